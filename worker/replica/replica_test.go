package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fakeController serves a manifest and its blobs like the controller's
// replica service, counting what travels.
type fakeController struct {
	decreev1.UnimplementedWorkerServiceServer
	mu       sync.Mutex
	entries  []*decreev1.FileEntry
	blobs    map[string][]byte
	fetched  int
	bytes    int64
	uploaded map[string][]byte
	// onChunk, when set, is called before each chunk GetBlobs sends.
	onChunk func()
	// tamper, when set, changes the entries sent after their digest was
	// computed.
	tamper func([]*decreev1.FileEntry) []*decreev1.FileEntry
}

func (f *fakeController) set(t *testing.T, files map[string]string, links map[string]string, exec ...string) {
	t.Helper()
	m := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, c := range files {
		mode := checkpoint.ModeFile
		for _, x := range exec {
			if x == p {
				mode = checkpoint.ModeExec
			}
		}
		m.Files[p] = checkpoint.Entry{SHA256: sumOf([]byte(c)), Size: int64(len(c)), Mode: mode}
		f.blobs[sumOf([]byte(c))] = []byte(c)
	}
	for p, target := range links {
		m.Files[p] = checkpoint.Entry{SHA256: sumOf([]byte(target)), Size: int64(len(target)), Mode: checkpoint.ModeSymlink, Link: target}
	}
	f.entries = wiremanifest.ToProto(m)
}

func (f *fakeController) GetWorkspaceManifest(context.Context, *decreev1.GetWorkspaceManifestRequest) (*decreev1.GetWorkspaceManifestResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Digest over what is sent, whether or not it is valid.
	m := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}}
	for _, fe := range f.entries {
		e := checkpoint.Entry{SHA256: fe.GetSha256(), Size: fe.GetSize(), Mode: checkpoint.ModeFile, Link: fe.GetLinkTarget()}
		if fe.GetMode() == wiremanifest.WireSymlink {
			e.Mode = checkpoint.ModeSymlink
		} else if fe.GetMode() == wiremanifest.WireExec {
			e.Mode = checkpoint.ModeExec
		}
		m.Files[fe.GetPath()] = e
	}
	d, _ := wiremanifest.Digest(m)
	entries := f.entries
	if f.tamper != nil {
		entries = f.tamper(slices.Clone(entries))
	}
	return &decreev1.GetWorkspaceManifestResponse{Digest: d, Files: entries}, nil
}

func (f *fakeController) GetBlobs(req *decreev1.GetBlobsRequest, stream grpc.ServerStreamingServer[decreev1.GetBlobsResponse]) error {
	const chunk = 1000
	for _, sum := range req.GetSha256() {
		f.mu.Lock()
		data, ok := f.blobs[sum]
		f.fetched++
		f.bytes += int64(len(data))
		f.mu.Unlock()
		if !ok {
			return status.Errorf(codes.PermissionDenied, "blob %s not in the manifest", sum)
		}
		for off := 0; ; off += chunk {
			f.mu.Lock()
			onChunk := f.onChunk
			f.mu.Unlock()
			if onChunk != nil {
				onChunk()
			}
			end := min(off+chunk, len(data))
			if err := stream.Send(&decreev1.GetBlobsResponse{Sha256: sum, Offset: uint64(off), Data: data[off:end], Last: end == len(data)}); err != nil {
				return err
			}
			if end == len(data) {
				break
			}
		}
	}
	return nil
}

func (f *fakeController) PutBlobs(stream grpc.ClientStreamingServer[decreev1.PutBlobsRequest, decreev1.PutBlobsResponse]) error {
	var stored []string
	var cur []byte
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&decreev1.PutBlobsResponse{Stored: stored})
		}
		if err != nil {
			return err
		}
		cur = append(cur, req.GetData()...)
		if req.GetLast() {
			if sumOf(cur) != req.GetSha256() {
				return status.Error(codes.InvalidArgument, "hash mismatch")
			}
			f.mu.Lock()
			f.uploaded[req.GetSha256()] = cur
			f.mu.Unlock()
			stored = append(stored, req.GetSha256())
			cur = nil
		}
	}
}

func (f *fakeController) counts() (int, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, b := f.fetched, f.bytes
	f.fetched, f.bytes = 0, 0
	return n, b
}

func serve(t *testing.T) (*fakeController, decreev1.WorkerServiceClient) {
	t.Helper()
	f := &fakeController{blobs: map[string][]byte{}, uploaded: map[string][]byte{}}
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	decreev1.RegisterWorkerServiceServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return f, decreev1.NewWorkerServiceClient(conn)
}

func newReplica(t *testing.T, opts ...Options) (*Replica, string) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	r, err := Open(ws, o)
	if err != nil {
		t.Fatal(err)
	}
	return r, r.Root()
}

func readTree(t *testing.T, r *Replica) *checkpoint.Manifest {
	t.Helper()
	m, err := r.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSyncTransfersOnlyDifferences(t *testing.T) {
	f, c := serve(t)
	r, ws := newReplica(t)
	big := strings.Repeat("large file content\n", 1000)
	files := map[string]string{
		"a.txt": "alpha\n", "b.txt": "beta\n", "dir/c.txt": "gamma\n", "dir/deep/d.txt": "delta\n",
		"big.txt": big, "same1.txt": "same\n", "same2.txt": "same\n", ".gitignore": "build/\n", "run.sh": "echo\n",
	}
	f.set(t, files, map[string]string{"link": "dir/c.txt"}, "run.sh")
	st, err := r.Sync(context.Background(), c, "tok", "")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := f.counts()
	if n != 8 || st.FetchedBlobs != 8 { // 9 files, "same" twice
		t.Errorf("first sync fetched %d blobs (reported %d), want 8 distinct contents", n, st.FetchedBlobs)
	}
	if got := readTree(t, r); !got.Equal(st.Manifest) {
		t.Fatalf("replica differs from the controller after the first sync: %v", checkpoint.Compare(st.Manifest, got))
	}
	if fi, _ := os.Stat(filepath.Join(ws, "run.sh")); fi.Mode().Perm()&0o100 == 0 {
		t.Error("run.sh is not executable")
	}

	// The replica has ignored build output and a stray tracked file.
	os.MkdirAll(filepath.Join(ws, "build"), 0o755)
	os.WriteFile(filepath.Join(ws, "build", "out.o"), []byte("object"), 0o644)
	os.WriteFile(filepath.Join(ws, "stray.txt"), []byte("stray"), 0o644)
	// The controller changes two files, deletes one, renames one, and adds
	// a copy of content the replica has.
	delete(files, "b.txt")
	delete(files, "dir/deep/d.txt")
	files["a.txt"] = "alpha v2\n"
	files["big.txt"] = big + "one more line\n"
	files["moved/d.txt"] = "delta\n"
	files["copy.txt"] = "gamma\n"
	f.set(t, files, map[string]string{"link": "dir/c.txt"})
	st, err = r.Sync(context.Background(), c, "tok", "")
	if err != nil {
		t.Fatal(err)
	}
	n, bytes := f.counts()
	if n != 2 || bytes != int64(len("alpha v2\n")+len(big)+len("one more line\n")) {
		t.Errorf("second sync fetched %d blobs, %d bytes; want the 2 changed contents only", n, bytes)
	}
	if st.CopiedLocal != 2 || st.Deleted != 3 {
		t.Errorf("copied locally %d, deleted %d; want 2 and 3 (b.txt, d.txt, stray.txt)", st.CopiedLocal, st.Deleted)
	}
	if got := readTree(t, r); !got.Equal(st.Manifest) {
		t.Fatalf("replica differs from the controller after the second sync: %v", checkpoint.Compare(st.Manifest, got))
	}
	if b, err := os.ReadFile(filepath.Join(ws, "build", "out.o")); err != nil || string(b) != "object" {
		t.Errorf("ignored build output touched: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "dir", "deep")); !os.IsNotExist(err) {
		t.Errorf("emptied directory dir/deep left behind: %v", err)
	}
	// Nothing changed: nothing travels.
	if _, err := r.Sync(context.Background(), c, "tok", ""); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.counts(); n != 0 {
		t.Errorf("a sync of an up-to-date replica fetched %d blobs", n)
	}
}

func TestSyncRefusesUnsafeManifests(t *testing.T) {
	tests := []struct {
		name  string
		entry *decreev1.FileEntry
	}{
		{"parent traversal", &decreev1.FileEntry{Path: "../etc/passwd", Sha256: sumOf([]byte("x")), Size: 1, Mode: wiremanifest.WireFile}},
		{"absolute path", &decreev1.FileEntry{Path: "/etc/passwd", Sha256: sumOf([]byte("x")), Size: 1, Mode: wiremanifest.WireFile}},
		{"symlink with an empty target", &decreev1.FileEntry{Path: "empty", Sha256: sumOf(nil), Size: 0, Mode: wiremanifest.WireSymlink, LinkTarget: ""}},
		{"into .decree", &decreev1.FileEntry{Path: ".decree/worker-id", Sha256: sumOf([]byte("x")), Size: 1, Mode: wiremanifest.WireFile}},
		{"file below a link", &decreev1.FileEntry{Path: "link/x", Sha256: sumOf([]byte("x")), Size: 1, Mode: wiremanifest.WireFile}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := serve(t)
			r, ws := newReplica(t)
			f.set(t, map[string]string{"a.txt": "a\n", "x": "x"}, map[string]string{"link": "a.txt"})
			f.entries = append(f.entries, tt.entry)
			parent := filepath.Dir(ws)
			before, _ := os.ReadDir(parent)
			_, err := r.Sync(context.Background(), c, "tok", "")
			if !errors.Is(err, wiremanifest.ErrInvalid) {
				t.Fatalf("err = %v, want the manifest refused", err)
			}
			if after, _ := os.ReadDir(parent); len(after) != len(before) {
				t.Errorf("something was written beside the workspace")
			}
			if m := readTree(t, r); len(m.Files) != 0 {
				t.Errorf("the replica was changed: %v", m.Paths())
			}
		})
	}
}

func TestSyncChecksDigest(t *testing.T) {
	f, c := serve(t)
	r, _ := newReplica(t)
	f.set(t, map[string]string{"a.txt": "a\n"}, nil)
	if _, err := r.Sync(context.Background(), c, "tok", strings.Repeat("0", 64)); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("err = %v, want ErrDigestMismatch", err)
	}
}

func TestSyncRefusesWritingThroughSymlink(t *testing.T) {
	f, c := serve(t)
	r, ws := newReplica(t)
	outside := t.TempDir()
	// An ignored symlink in the replica pointing outside it.
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("out\n"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "out"))
	f.set(t, map[string]string{".gitignore": "out\n", "out/pwned": "evil"}, nil)
	if _, err := r.Sync(context.Background(), c, "tok", ""); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("err = %v, want a refusal to write through the symlink", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("written outside the workspace: %v", ents)
	}
}

func TestUploadSendsOnlyNewContents(t *testing.T) {
	f, c := serve(t)
	r, ws := newReplica(t, Options{ChunkSize: 1000}) // several chunks per file
	f.set(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, nil)
	st, err := r.Sync(context.Background(), c, "tok", "")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a changed\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "new.txt"), []byte(strings.Repeat("n", 5000)), 0o644)
	os.WriteFile(filepath.Join(ws, "odd.txt"), []byte(strings.Repeat("o", 5500)), 0o644)
	os.WriteFile(filepath.Join(ws, "copy.txt"), []byte("b\n"), 0o644) // content the controller has
	after := readTree(t, r)
	up, err := r.Upload(context.Background(), c, "tok", st.Manifest, after)
	if err != nil {
		t.Fatal(err)
	}
	if up.Blobs != 3 || len(f.uploaded) != 3 || string(f.uploaded[sumOf([]byte("a changed\n"))]) != "a changed\n" ||
		len(f.uploaded[sumOf([]byte(strings.Repeat("o", 5500)))]) != 5500 || up.Bytes != int64(len("a changed\n")+5000+5500) {
		t.Errorf("uploaded %d blobs, %d bytes (%d stored), want the 3 new contents", up.Blobs, up.Bytes, len(f.uploaded))
	}
	// A file changed after the scan is not sent under the old hash.
	os.WriteFile(filepath.Join(ws, "new.txt"), []byte(strings.Repeat("m", 5000)), 0o644)
	f.uploaded = map[string][]byte{}
	if _, err := r.Upload(context.Background(), c, "tok", st.Manifest, after); err == nil || !strings.Contains(err.Error(), "changed after the scan") {
		t.Errorf("err = %v, want the changed file named", err)
	}
}

func TestCollectReturnsFollowUpsAndArtifacts(t *testing.T) {
	r, ws := newReplica(t)
	dir := ".decree/runs/2025-1"
	if err := r.PrepareRun(dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, ".decree/inbox/2025-2.md"), []byte("next"), 0o644)
	os.WriteFile(filepath.Join(ws, ".decree/outbox/later.md"), []byte("later"), 0o644)
	os.WriteFile(filepath.Join(ws, dir, "message.md"), []byte("msg"), 0o644)
	os.WriteFile(filepath.Join(ws, dir, "output.ipynb"), []byte("{}"), 0o644)
	files, notes := r.Collect(dir, map[string]bool{"message.md": true})
	var got []string
	for _, f := range files {
		got = append(got, f.GetArea().String()+":"+f.GetName())
	}
	want := "RETURNED_FILE_AREA_INBOX:2025-2.md RETURNED_FILE_AREA_OUTBOX:later.md RETURNED_FILE_AREA_RUN_DIR:output.ipynb"
	if strings.Join(got, " ") != want || len(notes) != 0 {
		t.Errorf("collected %v (notes %v), want %s", got, notes, want)
	}
	if _, err := os.Stat(filepath.Join(ws, ".decree/outbox/later.md")); !os.IsNotExist(err) {
		t.Error("collected outbox file left in the replica (it would be sent again)")
	}
	if err := r.PrepareRun("../../etc"); err == nil {
		t.Error("a run directory outside .decree/runs was accepted")
	}
}

// A blob that arrives in several chunks is written to a temporary file and
// renamed into place. When that rename fails, the sync must fail and must
// not record the file as synced. The rename is made to fail for real: the
// destination directory is immutable (chattr +i), which stops even root.
func TestSyncReportsFailedRenameOfLargeBlob(t *testing.T) {
	chattr := testtool.Require(t, "chattr")
	f, c := serve(t)
	r, ws := newReplica(t)
	locked := filepath.Join(ws, "locked")
	if err := os.Mkdir(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(chattr, "+i", locked).CombinedOutput(); err != nil {
		t.Skipf("cannot make a directory immutable here (needs CAP_LINUX_IMMUTABLE): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(chattr, "-i", locked).Run() })
	big := strings.Repeat("0123456789", 300) // 3000 bytes: three chunks of the fake controller
	f.set(t, map[string]string{"locked/big.bin": big}, nil)
	st, err := r.Sync(context.Background(), c, "tok", "")
	if err == nil || !strings.Contains(err.Error(), "locked/big.bin") {
		t.Fatalf("sync = %+v, %v; want an error naming locked/big.bin", st, err)
	}
	if _, err := os.Stat(filepath.Join(locked, "big.bin")); err == nil {
		t.Error("big.bin exists although its rename failed")
	}
	exec.Command(chattr, "-i", locked).Run()
	// With the directory writable again, the next sync writes it: the
	// failed one recorded nothing as synced.
	if _, err := r.Sync(context.Background(), c, "tok", ""); err != nil {
		t.Fatalf("sync after unlocking: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(locked, "big.bin")); err != nil || string(b) != big {
		t.Errorf("big.bin after the second sync: %d bytes, %v", len(b), err)
	}
}

// TestSyncKeepsAnySymlinkAsALink: symlinks are data. Absolute links and
// links climbing out of the project (a virtualenv's bin/python) arrive in
// the replica as links with their exact target, nothing they point to is
// read or written, and a scan records them as links again.
func TestSyncKeepsAnySymlinkAsALink(t *testing.T) {
	f, c := serve(t)
	r, ws := newReplica(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"venv/bin/python": "/usr/bin/python3",
		"venv/lib64":      "lib",
		"up":              "../../../somewhere/else",
		"abs":             outside,
		"dangling":        "/nonexistent/decree/target",
	}
	f.set(t, map[string]string{"a.txt": "a\n", "venv/lib/site.py": "x = 1\n"}, links)
	st, err := r.Sync(context.Background(), c, "tok", "")
	if err != nil {
		t.Fatalf("sync with outside symlinks: %v", err)
	}
	for p, want := range links {
		got, err := os.Readlink(filepath.Join(ws, filepath.FromSlash(p)))
		if err != nil || got != want {
			t.Errorf("%s -> %q, %v; want a symlink to %q", p, got, err, want)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside\n" {
		t.Errorf("the file an absolute link points to changed: %q", b)
	}
	if got := readTree(t, r); !got.Equal(st.Manifest) {
		t.Fatalf("the replica's scan differs from the controller's manifest: %v", checkpoint.Compare(st.Manifest, got))
	}
	// Retargeting a link replaces the link, not what it points to.
	links["abs"] = "/etc/hostname"
	f.set(t, map[string]string{"a.txt": "a\n", "venv/lib/site.py": "x = 1\n"}, links)
	if _, err := r.Sync(context.Background(), c, "tok", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(ws, "abs")); got != "/etc/hostname" {
		t.Errorf("abs -> %q after retargeting, want /etc/hostname", got)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside\n" {
		t.Errorf("retargeting wrote through the old link: %q", b)
	}
}
