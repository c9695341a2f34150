package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Changed names exactly the touched paths that moved away from the state a
// diff left them in.
func TestChanged(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		if err := os.WriteFile(filepath.Join(root, rel), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("mod.txt", "one\n")
	write("del.txt", "gone soon\n")
	write("same.txt", "untouched\n")
	cp := newCP(t)
	before, err := cp.Snapshot(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	write("mod.txt", "two\n")
	write("new.txt", "fresh\n")
	os.Remove(filepath.Join(root, "del.txt"))
	diff, _, err := cp.Diff(context.Background(), root, before)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Changed(root, diff); err != nil || len(got) != 0 {
		t.Fatalf("right after the diff: %v, %v; want nothing changed", got, err)
	}
	write("mod.txt", "edited by hand\n")
	write("del.txt", "back again\n")
	write("same.txt", "not in the diff\n")
	os.Remove(filepath.Join(root, "new.txt"))
	got, err := Changed(root, diff)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"del.txt", "mod.txt", "new.txt"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
	for name, bad := range map[string]string{
		"truncated hunk": "diff --git a/mod.txt b/mod.txt\n--- a/mod.txt\n+++ b/mod.txt\n@@ -1,5 +1,5 @@\n-one\n",
		"escaping path":  "diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n",
	} {
		if _, err := Changed(root, []byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
