package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/layout"
)

// age sets a directory's mtime an hour back, as a queue written a while
// ago has it.
func age(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
}

// A store opened later counts an unchanged queue, done/ and dead/ from
// the directory cache, and lists again once a directory changed; a
// leftover temporary file that appears later is still swept.
func TestDirCacheAcrossOpens(t *testing.T) {
	root := t.TempDir()
	openStore(t, root).Close()
	d := filepath.Join(root, layout.Dir)
	for _, p := range []string{"inbox/a.md", "inbox/b.md", "inbox/done/c.md", "inbox/dead/e.md", "inbox/dead/e.md" + layout.DeadNoteSuffix} {
		write(t, filepath.Join(d, p), "x\n")
	}
	for _, rel := range []string{layout.Inbox, layout.Done, layout.Dead} {
		age(t, filepath.Join(d, rel))
	}
	s1 := openStore(t, root)
	sum, err := s1.Summarize()
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	if sum.Queued != 2 || sum.Done != 1 || sum.Dead != 1 {
		t.Fatalf("first summary %+v", sum)
	}

	s2 := openStore(t, root)
	sum, err = s2.Summarize()
	if err != nil {
		t.Fatal(err)
	}
	if !s2.reusedOpen {
		t.Error("a new store listed an unchanged inbox instead of using the cache")
	}
	if sum.Queued != 2 || sum.Done != 1 || sum.Dead != 1 {
		t.Errorf("cached summary %+v", sum)
	}
	s2.Close()

	// Changes: one more queued, one more done, and an interrupted write's
	// temporary file in the inbox and an orphaned note in dead/.
	write(t, filepath.Join(d, "inbox/f.md"), "x\n")
	write(t, filepath.Join(d, "inbox/.g.md.tmp-1"), "partial")
	write(t, filepath.Join(d, "inbox/done/h.md"), "x\n")
	write(t, filepath.Join(d, "inbox/dead/gone.md"+layout.DeadNoteSuffix), "reason: X\n")
	s3 := openStore(t, root)
	defer s3.Close()
	sum, err = s3.Summarize()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Queued != 3 || sum.Done != 2 || sum.Dead != 1 {
		t.Errorf("summary after the changes %+v, want 3 queued, 2 done, 1 dead", sum)
	}
	for _, p := range []string{"inbox/.g.md.tmp-1", "inbox/dead/gone.md" + layout.DeadNoteSuffix} {
		if exists(filepath.Join(d, p)) {
			t.Errorf("%s survived the open", p)
		}
	}
}

// A damaged cache file is ignored.
func TestDirCacheDamaged(t *testing.T) {
	root := t.TempDir()
	openStore(t, root).Close()
	d := filepath.Join(root, layout.Dir)
	write(t, filepath.Join(d, "inbox/a.md"), "x\n")
	age(t, filepath.Join(d, layout.Inbox))
	write(t, filepath.Join(d, dirCacheFile), `{"inbox": {"stamp": 7`)
	s := openStore(t, root)
	defer s.Close()
	sum, err := s.Summarize()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Queued != 1 {
		t.Errorf("queued = %d, want 1", sum.Queued)
	}
}
