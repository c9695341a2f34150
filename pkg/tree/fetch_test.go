package tree

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// lucidServer answers like Lucid's GET /documents/{id}/contents: the
// document for the right key and id, 401 and 404 otherwise.
func lucidServer(t *testing.T, doc []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodGet || r.Header.Get("Lucid-Api-Version") != "1":
			w.WriteHeader(http.StatusBadRequest)
		case r.Header.Get("Authorization") != "Bearer good-key":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"unauthorized","message":"Invalid token"}`))
		case r.URL.Path == "/documents/doc-1/contents":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
		case r.URL.Path == "/documents/html/contents":
			_, _ = w.Write([]byte("<html>login</html>"))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestFetch(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testtool.SharedFixtures(t, "monads"), "sample_data.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := lucidServer(t, doc)
	got, err := Fetch(context.Background(), srv.Client(), srv.URL, "doc-1", "good-key")
	if err != nil || string(got) != string(doc) {
		t.Fatalf("Fetch: %v", err)
	}
	for _, c := range []struct{ id, key, want string }{
		{"doc-1", "bad-key", "401 Unauthorized: the key in LUCIDCHART_API_KEY may not read it"},
		{"nope", "good-key", "404 Not Found: no such document"},
		{"html", "good-key", "the answer is not document contents"},
		{"doc-1", "", "set LUCIDCHART_API_KEY"},
	} {
		if _, err := Fetch(context.Background(), srv.Client(), srv.URL, c.id, c.key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s: err = %v, want %q", c.id, c.key, err, c.want)
		}
	}
}
