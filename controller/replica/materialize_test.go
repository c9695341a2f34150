package replica

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// put uploads content through ReceiveBlobs.
func (e *env) put(t *testing.T, content string) {
	t.Helper()
	if _, err := e.svc.ReceiveBlobs(upload(chunked("tok", sumOf([]byte(content)), []byte(content), 7), io.EOF)); err != nil {
		t.Fatal(err)
	}
}

func file(p, content string, mode uint32) *decreev1.FileEntry {
	return &decreev1.FileEntry{Path: p, Sha256: sumOf([]byte(content)), Size: int64(len(content)), Mode: mode}
}

func link(p, target string) *decreev1.FileEntry {
	return &decreev1.FileEntry{Path: p, Sha256: sumOf([]byte(target)), Size: int64(len(target)), Mode: wiremanifest.WireSymlink, LinkTarget: target}
}

func TestMaterializeAppliesEveryKindOfChange(t *testing.T) {
	e := newEnv(t, map[string]string{
		"keep.txt": "keep\n", "edit.txt": "old\n", "gone.txt": "bye\n", "dir/deep/gone.txt": "bye\n",
		"run.sh": "echo hi\n", "was-file": "file\n",
	}, Options{})
	// An ignored file in a directory whose tracked files go away stays.
	if err := os.WriteFile(filepath.Join(e.root, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.root, "dir", "deep", "x.log"), []byte("log"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := e.cp.Snapshot(context.Background(), e.root)
	if err != nil {
		t.Fatal(err)
	}
	e.put(t, "new\n")
	e.put(t, "brand new file\n")
	after := wiremanifest.ToProto(base)
	after = replaceEntries(after, map[string]*decreev1.FileEntry{
		"edit.txt":          file("edit.txt", "new\n", wiremanifest.WireFile),
		"gone.txt":          nil,
		"dir/deep/gone.txt": nil,
		"run.sh":            file("run.sh", "echo hi\n", wiremanifest.WireExec),
		"was-file":          link("was-file", "keep.txt"),
		"sub/new.txt":       file("sub/new.txt", "brand new file\n", wiremanifest.WireFile),
		"sub/copy.txt":      file("sub/copy.txt", "keep\n", wiremanifest.WireFile), // content the controller has
		"sub/link":          link("sub/link", "../keep.txt"),
	})
	applied, err := e.svc.Materialize(context.Background(), base, after)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.cp.Snapshot(context.Background(), e.root)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := wiremanifest.FromProto(after, 0)
	if diff := checkpoint.Compare(want, got); len(diff) != 0 {
		t.Errorf("tree differs from the replica's manifest at %d path(s), first %s", len(diff), diff[0].Path)
	}
	if len(applied.Deleted) != 2 || len(applied.Written) != 6 {
		t.Errorf("applied %+v, want 2 deleted and 6 written", applied)
	}
	if _, err := os.Stat(filepath.Join(e.root, "dir", "deep", "x.log")); err != nil {
		t.Errorf("ignored file was touched: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(e.root, "run.sh")); fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh mode %v, want executable", fi.Mode())
	}
}

// replaceEntries returns entries with the given paths replaced, removed
// (nil) or added.
func replaceEntries(entries []*decreev1.FileEntry, with map[string]*decreev1.FileEntry) []*decreev1.FileEntry {
	var out []*decreev1.FileEntry
	for _, fe := range entries {
		if r, ok := with[fe.GetPath()]; ok {
			if r != nil {
				out = append(out, r)
			}
			delete(with, fe.GetPath())
			continue
		}
		out = append(out, fe)
	}
	for _, r := range with {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

func TestMaterializeRefusesBadManifests(t *testing.T) {
	tests := []struct {
		name    string
		entry   *decreev1.FileEntry
		upload  string
		limit   int64
		wantErr error
	}{ // limit 0: the default (1 GiB)
		{"parent traversal", file("../x", "evil\n", wiremanifest.WireFile), "evil\n", 0, fsutil.ErrUnsafePath},
		{"deep traversal", file("a/../../x", "evil\n", wiremanifest.WireFile), "evil\n", 0, fsutil.ErrUnsafePath},
		{"absolute path", file("/etc/passwd", "evil\n", wiremanifest.WireFile), "evil\n", 0, fsutil.ErrUnsafePath},
		{"symlink with an empty target", link("d/empty", ""), "", 0, fsutil.ErrUnsafePath},
		{"into .decree", file(".decree/config.yml", "evil\n", wiremanifest.WireFile), "evil\n", 0, wiremanifest.ErrInvalid},
		{"into .git", file(".git/hooks/pre-commit", "evil\n", wiremanifest.WireFile), "evil\n", 0, wiremanifest.ErrInvalid},
		{"content never uploaded", file("new.txt", "not uploaded\n", wiremanifest.WireFile), "", 0, ErrMissing},
		{"file over the limit", &decreev1.FileEntry{Path: "huge.bin", Sha256: sumOf([]byte("x")), Size: 2 << 30, Mode: wiremanifest.WireFile}, "", 0, checkpoint.ErrBlobTooLarge},
		{"link hash lies", &decreev1.FileEntry{Path: "l", Sha256: sumOf([]byte("other")), Size: 1, Mode: wiremanifest.WireSymlink, LinkTarget: "a"}, "", 0, wiremanifest.ErrInvalid},
		{"bad mode", &decreev1.FileEntry{Path: "m", Sha256: sumOf(nil), Mode: 0o4755}, "", 0, wiremanifest.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, map[string]string{"a.txt": "alpha\n", "d/b.txt": "beta\n"}, Options{MaxBlobSize: tt.limit})
			if tt.upload != "" {
				e.put(t, tt.upload)
			}
			after := append(wiremanifest.ToProto(e.base), tt.entry)
			before := listDir(t, filepath.Dir(e.root))
			_, err := e.svc.Materialize(context.Background(), e.base, after)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			got, _ := e.cp.Snapshot(context.Background(), e.root)
			if !got.Equal(e.base) {
				t.Errorf("the tree changed although the manifest was refused: %v", checkpoint.Compare(e.base, got))
			}
			if now := listDir(t, filepath.Dir(e.root)); now != before {
				t.Errorf("something was written beside the project: %s -> %s", before, now)
			}
		})
	}
}

func TestMaterializeRefusesWritingThroughSymlinkedDir(t *testing.T) {
	e := newEnv(t, map[string]string{"a.txt": "alpha\n"}, Options{})
	outside := t.TempDir()
	// An untracked (ignored) symlink to a directory outside the project.
	if err := os.WriteFile(filepath.Join(e.root, ".gitignore"), []byte("out\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.root, "out")); err != nil {
		t.Fatal(err)
	}
	base, _ := e.cp.Snapshot(context.Background(), e.root)
	e.put(t, "evil\n")
	after := append(wiremanifest.ToProto(base), file("out/pwned", "evil\n", wiremanifest.WireFile))
	if _, err := e.svc.Materialize(context.Background(), base, after); !errors.Is(err, fsutil.ErrUnsafePath) {
		t.Fatalf("err = %v, want ErrUnsafePath", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("written outside the project: %v", ents)
	}
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

type fakeFollowUps struct{ got []string }

func (f *fakeFollowUps) ReceiveFollowUp(chain string, seq int, area, name string, content []byte) (*store.Rejected, error) {
	f.got = append(f.got, area+"/"+name)
	return nil, nil
}

type fakeRun map[string]string

func (f fakeRun) WriteFile(name string, data []byte) error { f[name] = string(data); return nil }

func TestDeliverFiles(t *testing.T) {
	fu := &fakeFollowUps{}
	run := fakeRun{}
	files := []*decreev1.ReturnedFile{
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_INBOX, Name: "20250101000000-00-1.md", Content: []byte("a")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_OUTBOX, Name: "next.md", Content: []byte("b")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "output.ipynb", Content: []byte("{}")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "papermill.log", Content: []byte("log")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "state.json", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "routine-2.log", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "routine.log", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "routine.try-002.log", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "hook-aftereach.try-002.log", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "router.log", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "changes.try-003.diff", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "failure-context.md", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, Name: "../../evil", Content: []byte("forged")},
		{Area: decreev1.ReturnedFileArea_RETURNED_FILE_AREA_UNSPECIFIED, Name: "x", Content: []byte("?")},
	}
	notes, err := DeliverFiles(fu, "2025010100000000", 0, run, files)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(fu.got, " ") != "inbox/20250101000000-00-1.md outbox/next.md" {
		t.Errorf("follow-ups delivered: %v", fu.got)
	}
	if len(run) != 2 || run["output.ipynb"] != "{}" || run["papermill.log"] != "log" {
		t.Errorf("run files written: %v", run)
	}
	if len(notes) != 10 {
		t.Errorf("notes = %q, want 10 refusals", notes)
	}
}

// TestMaterializeKeepsLargeUnchangedFiles: the upload limit applies to new
// contents only; a large file the controller already has does not block a
// result.
func TestMaterializeKeepsLargeUnchangedFiles(t *testing.T) {
	big := strings.Repeat("x", 5000)
	e := newEnv(t, map[string]string{"big.bin": big, "a.txt": "a\n"}, Options{MaxBlobSize: 1000})
	e.put(t, "b\n")
	after := append(wiremanifest.ToProto(e.base), file("b.txt", "b\n", wiremanifest.WireFile))
	if _, err := e.svc.Materialize(context.Background(), e.base, after); err != nil {
		t.Fatalf("a result next to an unchanged large file was refused: %v", err)
	}
	after = replaceEntries(wiremanifest.ToProto(e.base), map[string]*decreev1.FileEntry{"big.bin": file("big.bin", big+"more", wiremanifest.WireFile)})
	if _, err := e.svc.Materialize(context.Background(), e.base, after); !errors.Is(err, checkpoint.ErrBlobTooLarge) {
		t.Errorf("a changed large file: err = %v, want ErrBlobTooLarge", err)
	}
}

// TestMaterializeWritesAnySymlinkAsALink: a replica's manifest with
// absolute and escaping symlinks is applied as links with their exact
// targets; replacing a link that points outside never writes through it.
func TestMaterializeWritesAnySymlinkAsALink(t *testing.T) {
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "target.txt")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, map[string]string{"a.txt": "alpha\n"}, Options{})
	if err := os.Symlink(outside, filepath.Join(e.root, "old-abs")); err != nil {
		t.Fatal(err)
	}
	base, err := e.cp.Snapshot(context.Background(), e.root)
	if err != nil {
		t.Fatal(err)
	}
	e.put(t, "replaced\n")
	links := map[string]string{
		"venv/bin/python": "/usr/bin/python3",
		"up":              "../../elsewhere",
		"dir-out":         outsideDir,
	}
	with := map[string]*decreev1.FileEntry{"old-abs": file("old-abs", "replaced\n", wiremanifest.WireFile)}
	for p, target := range links {
		with[p] = link(p, target)
	}
	after := replaceEntries(wiremanifest.ToProto(base), with)
	if _, err := e.svc.Materialize(context.Background(), base, after); err != nil {
		t.Fatalf("materialize with outside symlinks: %v", err)
	}
	for p, want := range links {
		if got, err := os.Readlink(filepath.Join(e.root, filepath.FromSlash(p))); err != nil || got != want {
			t.Errorf("%s -> %q, %v; want a symlink to %q", p, got, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(e.root, "old-abs")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("old-abs should now be a regular file: %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside\n" {
		t.Errorf("replacing a link wrote through it: the outside file is now %q", b)
	}
	if ents, _ := os.ReadDir(outsideDir); len(ents) != 1 {
		t.Errorf("something was written in the directory a link points to: %v", ents)
	}
}
