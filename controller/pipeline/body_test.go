package pipeline

import (
	"bytes"
	"strings"
	"testing"
)

// A router prompt carries at most routerBodyLimit bytes of a body, and says
// how much was left out.
func TestBodyForRouter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		wantCut  bool
		wantNote string
	}{
		{"empty", 0, false, ""},
		{"small", 100, false, ""},
		{"exactly the limit", routerBodyLimit, false, ""},
		{"one byte over", routerBodyLimit + 1, true, "[... 1 more bytes of the task left out ...]"},
		{"60 MB", 60 << 20, true, "more bytes of the task left out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Repeat([]byte("x"), tc.size)
			got, err := bodyForRouter(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.wantCut {
				if !bytes.Equal(got, body) {
					t.Fatalf("a body of %d bytes came back as %d bytes", tc.size, len(got))
				}
				return
			}
			if !bytes.HasPrefix(got, body[:routerBodyLimit]) || len(got) > routerBodyLimit+100 || !strings.Contains(string(got[routerBodyLimit:]), tc.wantNote) {
				t.Fatalf("cut body: %d bytes, tail %q", len(got), got[routerBodyLimit:])
			}
		})
	}
}
