package checkpoint

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"testing"
)

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// failingReader returns data, then an error instead of EOF.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestPutReaderAndOpen(t *testing.T) {
	random := make([]byte, 3<<20)
	rand.Read(random)
	text := bytes.Repeat([]byte("compressible text\n"), 100000)
	tests := []struct {
		name  string
		data  []byte
		sum   string
		limit int64
		fail  error
		want  error
	}{
		{"random content", random, hexSum(random), 0, nil, nil},
		{"text content", text, hexSum(text), 0, nil, nil},
		{"empty", nil, hexSum(nil), 0, nil, nil},
		{"exactly the limit", text, hexSum(text), int64(len(text)), nil, nil},
		{"over the limit", text, hexSum(text), int64(len(text)) - 1, nil, ErrBlobTooLarge},
		{"wrong hash", text, hexSum(random), 0, nil, ErrBlobMismatch},
		{"reader fails", text, hexSum(text), 0, io.ErrClosedPipe, io.ErrClosedPipe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			var r io.Reader = bytes.NewReader(tt.data)
			if tt.fail != nil {
				r = &failingReader{r: r, err: tt.fail}
			}
			_, err = s.PutReader(tt.sum, r, tt.limit)
			if !errors.Is(err, tt.want) {
				t.Fatalf("PutReader err = %v, want %v", err, tt.want)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(dir, "packs", "tmp-*")); len(leftovers) != 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
			if tt.want != nil {
				if s.Has(tt.sum) {
					t.Error("a refused blob is stored")
				}
				return
			}
			rc, err := s.Open(tt.sum)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Errorf("Open read %d bytes (%v), want the %d bytes put", len(got), err, len(tt.data))
			}
			if g, err := s.Get(tt.sum); err != nil || !bytes.Equal(g, tt.data) {
				t.Errorf("Get after PutReader: %v", err)
			}
		})
	}
}

func TestOpenPackedAndMissing(t *testing.T) {
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"a.txt": file("packed content\n")})
	c, err := New(Options{ObjectsDir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	rc, err := c.Store().Open(hexSum([]byte("packed content\n")))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "packed content\n" {
		t.Errorf("packed blob read as %q", got)
	}
	if _, err := c.Store().Open(hexSum([]byte("never stored"))); !errors.Is(err, ErrMissingBlob) {
		t.Errorf("missing blob: err = %v, want ErrMissingBlob", err)
	}
}
