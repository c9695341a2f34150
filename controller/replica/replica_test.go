package replica

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// fakeLeases knows active leases by token.
type fakeLeases map[string]lease.AssignmentView

func (f fakeLeases) Active(token string) (lease.AssignmentView, error) {
	v, ok := f[token]
	if !ok {
		return v, lease.ErrUnknownLease
	}
	return v, nil
}

type env struct {
	root   string
	cp     *checkpoint.Checkpointer
	svc    *Service
	leases fakeLeases
	base   *checkpoint.Manifest
	digest string
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// newEnv builds a project tree with files, snapshots and publishes it, and
// activates lease "tok" on that manifest.
func newEnv(t *testing.T, files map[string]string, opts Options) *env {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "project")
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, ".decree"), 0o755); err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: filepath.Join(root, ".decree", "objects"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	base, err := cp.Snapshot(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	leases := fakeLeases{}
	opts.Root, opts.Objects, opts.Leases = root, cp.Store(), leases
	svc, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	digest, release, err := svc.Publish(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	leases["tok"] = lease.AssignmentView{MessageID: "m-1", Attempt: 1, ManifestDigest: digest}
	return &env{root: root, cp: cp, svc: svc, leases: leases, base: base, digest: digest}
}

// fetch collects SendBlobs output per hash, checking chunk order.
func (e *env) fetch(t *testing.T, sums ...string) (map[string][]byte, int, error) {
	t.Helper()
	got := map[string][]byte{}
	chunks := 0
	err := e.svc.SendBlobs(context.Background(), "tok", sums, func(r *decreev1.GetBlobsResponse) error {
		chunks++
		if uint64(len(got[r.GetSha256()])) != r.GetOffset() {
			t.Errorf("chunk of %s at offset %d, have %d bytes", r.GetSha256(), r.GetOffset(), len(got[r.GetSha256()]))
		}
		got[r.GetSha256()] = append(got[r.GetSha256()], r.GetData()...)
		if r.GetLast() && sumOf(got[r.GetSha256()]) != r.GetSha256() {
			t.Errorf("blob %s marked last but its content does not match", r.GetSha256())
		}
		return nil
	})
	return got, chunks, err
}

func TestManifestMatchesDigest(t *testing.T) {
	e := newEnv(t, map[string]string{"a.txt": "alpha\n", "dir/b.txt": "beta\n"}, Options{})
	resp, err := e.svc.Manifest("tok")
	if err != nil {
		t.Fatal(err)
	}
	m, err := wiremanifest.FromProto(resp.GetFiles(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := wiremanifest.Digest(m); d != resp.GetDigest() || d != e.digest {
		t.Errorf("digest %s, response %s, published %s", d, resp.GetDigest(), e.digest)
	}
	if !m.Equal(e.base) {
		t.Errorf("manifest differs from the snapshot")
	}
	if _, err := e.svc.Manifest("nope"); !errors.Is(err, lease.ErrUnknownLease) {
		t.Errorf("unknown lease: err = %v", err)
	}
	e.leases["router"] = lease.AssignmentView{MessageID: "m-1"}
	if _, err := e.svc.Manifest("router"); !errors.Is(err, ErrNoManifest) {
		t.Errorf("lease without digest: err = %v", err)
	}
}

func TestSendBlobs(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1000) // 16000 bytes
	e := newEnv(t, map[string]string{"small.txt": "small\n", "big.bin": big, "empty": ""}, Options{ChunkSize: 4096})
	got, chunks, err := e.fetch(t, sumOf([]byte("small\n")), sumOf([]byte(big)), sumOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if string(got[sumOf([]byte(big))]) != big || string(got[sumOf([]byte("small\n"))]) != "small\n" {
		t.Error("contents differ from the files")
	}
	if want := 1 + 4 + 1; chunks != want { // 16000 bytes in 4096-byte chunks: 4
		t.Errorf("%d chunks, want %d", chunks, want)
	}
	// The big blob comes from the store even when the tree changed since.
	if err := os.WriteFile(filepath.Join(e.root, "big.bin"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _, err := e.fetch(t, sumOf([]byte(big))); err != nil || string(got[sumOf([]byte(big))]) != big {
		t.Errorf("after the tree changed: err %v, content ok %v", err, string(got[sumOf([]byte(big))]) == big)
	}
}

func TestSendBlobsRefusesOtherContent(t *testing.T) {
	e := newEnv(t, map[string]string{"a.txt": "alpha\n"}, Options{})
	// A file on the controller's disk outside the manifest.
	secret := []byte("secret outside the manifest\n")
	if err := os.WriteFile(filepath.Join(e.root, ".decree", "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.cp.Store().Put(sumOf(secret), secret); err != nil {
		t.Fatal(err)
	}
	for _, sum := range []string{sumOf(secret), "../../etc/passwd", strings.Repeat("A", 64)} {
		sent := 0
		err := e.svc.SendBlobs(context.Background(), "tok", []string{sumOf([]byte("alpha\n")), sum}, func(*decreev1.GetBlobsResponse) error { sent++; return nil })
		if err == nil || sent != 0 {
			t.Errorf("asking for %q: err %v after %d chunks; want a refusal before anything is sent", sum, err, sent)
		}
		if sum == sumOf(secret) && !errors.Is(err, ErrForbidden) {
			t.Errorf("asking for a stored blob outside the manifest: err = %v, want ErrForbidden", err)
		}
	}
}

// upload is a PutBlobs stream: a list of requests, then an error or EOF.
func upload(reqs []*decreev1.PutBlobsRequest, end error) func() (*decreev1.PutBlobsRequest, error) {
	i := 0
	return func() (*decreev1.PutBlobsRequest, error) {
		if i < len(reqs) {
			i++
			return reqs[i-1], nil
		}
		return nil, end
	}
}

func chunked(token, sum string, data []byte, size int) []*decreev1.PutBlobsRequest {
	var out []*decreev1.PutBlobsRequest
	for off := 0; ; off += size {
		end := min(off+size, len(data))
		out = append(out, &decreev1.PutBlobsRequest{LeaseToken: token, Sha256: sum, Offset: uint64(off), Data: data[off:end], Last: end == len(data)})
		if end == len(data) {
			return out
		}
	}
}

func TestReceiveBlobs(t *testing.T) {
	good := bytes.Repeat([]byte("new content "), 500)
	other := []byte("other")
	tests := []struct {
		name    string
		reqs    []*decreev1.PutBlobsRequest
		end     error
		wantErr error    // nil: success
		stored  []string // hashes that must be stored afterwards
		absent  []string // hashes that must not be stored
	}{
		{"chunked blob is stored", chunked("tok", sumOf(good), good, 1000), io.EOF, nil, []string{sumOf(good)}, nil},
		{"hash mismatch is refused", chunked("tok", sumOf(other), good, 1000), io.EOF, checkpoint.ErrBlobMismatch, nil, []string{sumOf(other), sumOf(good)}},
		{"oversized blob is refused", chunked("tok", sumOf(good), good, 1000)[:5], io.EOF, checkpoint.ErrBlobTooLarge, nil, []string{sumOf(good)}},
		{"disconnect mid-upload leaves nothing", chunked("tok", sumOf(good), good, 1000)[:3], errors.New("connection reset"), nil, nil, []string{sumOf(good)}},
		{"client closing mid-blob leaves nothing", chunked("tok", sumOf(good), good, 1000)[:3], io.EOF, io.ErrUnexpectedEOF, nil, []string{sumOf(good)}},
		{"first blob kept, broken second dropped",
			append(chunked("tok", sumOf(other), other, 1000), chunked("tok", sumOf(good), good, 1000)[:2]...), errors.New("gone"), nil,
			[]string{sumOf(other)}, []string{sumOf(good)}},
		{"chunk out of order", func() []*decreev1.PutBlobsRequest {
			r := chunked("tok", sumOf(good), good, 1000)
			r[1], r[2] = r[2], r[1]
			return r
		}(), io.EOF, ErrInvalid, nil, []string{sumOf(good)}},
		{"unknown lease", chunked("nope", sumOf(good), good, 1000), io.EOF, lease.ErrUnknownLease, nil, []string{sumOf(good)}},
		{"bad hash", []*decreev1.PutBlobsRequest{{LeaseToken: "tok", Sha256: "../x", Data: good, Last: true}}, io.EOF, ErrInvalid, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{}
			if strings.HasPrefix(tt.name, "oversized") {
				opts.MaxBlobSize = 4096
			}
			e := newEnv(t, map[string]string{"a.txt": "alpha\n"}, opts)
			_, err := e.svc.ReceiveBlobs(upload(tt.reqs, tt.end))
			switch {
			case tt.end != io.EOF && tt.wantErr == nil:
				if err == nil {
					t.Error("a broken upload succeeded")
				}
			case tt.wantErr == nil && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			for _, s := range tt.stored {
				if !e.cp.Store().Has(s) {
					t.Errorf("blob %s not stored", s[:8])
				}
			}
			for _, s := range tt.absent {
				if e.cp.Store().Has(s) {
					t.Errorf("blob %s stored, want nothing accepted", s[:8])
				}
			}
			leftovers, _ := filepath.Glob(filepath.Join(e.root, ".decree", "objects", "packs", "tmp-*"))
			if len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}
