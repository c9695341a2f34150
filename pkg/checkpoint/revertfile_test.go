package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// streamingOnly makes RevertFile and ChangedFile read every diff as a
// stream of headers, as they do for diffs over 64 MiB.
func streamingOnly(t *testing.T) {
	old := inMemoryDiffLimit
	inMemoryDiffLimit = -1
	t.Cleanup(func() { inMemoryDiffLimit = old })
}

func writeDiffFile(t *testing.T, diff []byte) string {
	p := filepath.Join(t.TempDir(), "changes.diff")
	if err := os.WriteFile(p, diff, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRevertFileStreaming(t *testing.T) {
	streamingOnly(t)
	tests := []struct {
		name    string
		change  func(root string)
		wantErr error
		naming  string
	}{
		{"clean", func(string) {}, nil, ""},
		{"touched file edited", func(root string) {
			os.WriteFile(filepath.Join(root, "a.txt"), []byte("edited\n"), 0o644)
		}, ErrConflict, "a.txt"},
		{"deleted file back", func(root string) {
			os.WriteFile(filepath.Join(root, "gone.txt"), []byte("back\n"), 0o644)
		}, ErrConflict, "gone.txt"},
		{"untouched file edited", func(root string) {
			os.WriteFile(filepath.Join(root, "keep/x"), []byte("edited\n"), 0o644)
		}, ErrConflict, "keep/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, root, before, diff := changedTree(t)
			tt.change(root)
			p := writeDiffFile(t, diff)
			inMemory, _ := Changed(root, diff)
			streamed, err := ChangedFile(root, p)
			if err != nil || strings.Join(streamed, ",") != strings.Join(inMemory, ",") {
				t.Fatalf("ChangedFile = %v, %v; Changed = %v", streamed, err, inMemory)
			}
			state := treeState(t, root)
			err = cp.RevertFile(context.Background(), root, p, before)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := snapshot(t, cp, root); !got.Equal(before) {
					t.Fatal("tree not back to the manifest")
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.naming) {
				t.Fatalf("err = %v, want %v naming %s", err, tt.wantErr, tt.naming)
			}
			if got := treeState(t, root); got != state {
				t.Error("a refused revert changed the tree")
			}
		})
	}
}

func TestRevertFileStreamingCorruptHeaders(t *testing.T) {
	streamingOnly(t)
	cp, root, before, diff := changedTree(t)
	state := treeState(t, root)
	for i, bad := range []string{
		"this is not a diff\n",
		dropFirstIndexLine(string(diff)),
		strings.Replace(string(diff), "diff --git a/a.txt b/a.txt", "diff --git a/a.txt", 1),
	} {
		err := cp.RevertFile(context.Background(), root, writeDiffFile(t, []byte(bad)), before)
		if !errors.Is(err, ErrCorruptDiff) {
			t.Errorf("case %d: err = %v, want ErrCorruptDiff", i, err)
		}
		if got := treeState(t, root); got != state {
			t.Fatalf("case %d changed the tree", i)
		}
	}
}

// dropFirstIndexLine removes a section's "index" line, which carries the
// blob id of the section's result.
func dropFirstIndexLine(diff string) string {
	i := strings.Index(diff, "\nindex ")
	j := strings.Index(diff[i+1:], "\n")
	return diff[:i+1] + diff[i+1+j+1:]
}
