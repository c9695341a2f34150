package message

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzReadHead checks that the streamed form agrees with the in-memory
// one: ReadHead gives Parse's frontmatter and, as its body reader, Parse's
// body; RenderTo from that reader writes what Render writes.
func FuzzReadHead(f *testing.F) {
	addMessageSeeds(f)
	for _, s := range []string{"---\na: 1\n---\nbody", "---", "---\n", "\xEF\xBB\xBF---\nk: v\n---\r\nx", "\xEF\xBB\xBF---x", "---\r\n---\r\n---\n", "body\n---\nnot: fm\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, perr := Parse(data)
		// One byte at a time: the reader must not depend on how reads split.
		h, err := ReadHead(iotest.OneByteReader(bytes.NewReader(data)))
		if (perr == nil) != (err == nil) {
			t.Fatalf("Parse error %v, ReadHead error %v for %q", perr, err, data)
		}
		if err != nil {
			if perr.Error() != err.Error() {
				t.Fatalf("errors differ: Parse %q, ReadHead %q", perr, err)
			}
			return
		}
		body, err := io.ReadAll(h.Body)
		if err != nil {
			t.Fatal(err)
		}
		got := &Message{Fields: h.Message.Fields, HasFrontmatter: h.Message.HasFrontmatter, Body: body}
		if !got.Equal(want) {
			t.Fatalf("ReadHead gave %#v, Parse %#v for %q", got, want, data)
		}
		if int(h.Offset)+len(body) != len(data) {
			t.Fatalf("offset %d + body %d != %d bytes", h.Offset, len(body), len(data))
		}
		var out bytes.Buffer
		n, err := h.Message.RenderTo(&out, bytes.NewReader(body))
		if err != nil || n != int64(out.Len()) {
			t.Fatalf("RenderTo: %d, %v (wrote %d)", n, err, out.Len())
		}
		if !bytes.Equal(out.Bytes(), want.Render()) {
			t.Fatalf("RenderTo wrote %q, Render %q", out.Bytes(), want.Render())
		}
	})
}

// TestReadHeadLargeBody streams a 32 MiB body: the frontmatter is read,
// the body comes back byte for byte, and the rewritten frontmatter (a new
// field) lands in front of the same body.
func TestReadHeadLargeBody(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef---\n"), (32<<20)/20)
	src := append([]byte("---\nroutine: develop\n---\n"), body...)
	h, err := ReadHead(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if h.Message.Routine() != "develop" || h.Message.Body != nil || h.Offset != 25 {
		t.Fatalf("head: routine %q, body %d bytes, offset %d", h.Message.Routine(), len(h.Message.Body), h.Offset)
	}
	h.Message.Set("chain", "2025022514320000")
	var out bytes.Buffer
	if _, err := h.Message.RenderTo(&out, h.Body); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if back.Chain() != "2025022514320000" || back.Routine() != "develop" || !bytes.Equal(back.Body, body) {
		t.Fatalf("rewritten message: chain %q routine %q, body equal %v", back.Chain(), back.Routine(), bytes.Equal(back.Body, body))
	}
}

func TestReadHeadErrors(t *testing.T) {
	long := "---\nk: " + strings.Repeat("x", MaxFrontmatterBytes) + "\n---\nbody"
	tests := []struct {
		name, in, want string
	}{
		{"never closed", "---\na: 1\nbody\n", "never closed"},
		{"over the limit", long, "not closed within its first 1024 KiB"},
		{"bad yaml", "---\na: [1\n---\n", "frontmatter line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadHead(strings.NewReader(tt.in))
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadHead: %v, want a *ParseError containing %q", err, tt.want)
			}
		})
	}
	// Parse has no such limit: a message given whole in memory is read whole.
	if _, err := Parse([]byte(long)); err != nil {
		t.Fatalf("Parse of a large frontmatter: %v", err)
	}
	// A read error is passed on, not mistaken for a message problem.
	_, err := ReadHead(iotest.ErrReader(io.ErrUnexpectedEOF))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadHead of a failing reader: %v", err)
	}
}
