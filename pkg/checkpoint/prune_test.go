package checkpoint

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
)

// TestStorePruneLeavesMostlyLivePacks: a pack is copied only once at least
// half of its bytes are dead; a pack with no live blob is deleted.
func TestStorePruneLeavesMostlyLivePacks(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	big := make([]byte, 64<<10)
	rand.Read(big) // incompressible: the pack's bytes are mostly this blob
	writeSpec(t, root, map[string]spec{"big": file(string(big)), "small": file("one\n")})
	m1 := snapshot(t, cp, root)
	packs := func() int {
		es, err := os.ReadDir(filepath.Join(cp.Store().Dir(), "packs"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			if filepath.Ext(e.Name()) == ".pack" {
				n++
			}
		}
		return n
	}

	writeSpec(t, root, map[string]spec{"small": file("two\n")})
	m2 := snapshot(t, cp, root)
	if n, err := cp.Store().Prune(m2); err != nil || n != 0 {
		t.Fatalf("Prune with a tiny dead share removed %d (%v), want 0: the big pack is not worth copying", n, err)
	}
	if _, err := cp.Store().Get(m1.Files["small"].SHA256); err != nil {
		t.Fatalf("dead blob of a mostly live pack should stay until the pack is rewritten: %v", err)
	}

	rand.Read(big)
	writeSpec(t, root, map[string]spec{"big": file(string(big))})
	m3 := snapshot(t, cp, root)
	if n, err := cp.Store().Prune(m3); err != nil || n != 2 {
		t.Fatalf("Prune of a mostly dead pack removed %d (%v), want 2", n, err)
	}
	for _, old := range []string{m1.Files["small"].SHA256, m1.Files["big"].SHA256} {
		if cp.Store().Has(old) {
			t.Errorf("dead blob %s still stored", old[:12])
		}
	}
	for p, e := range m3.Files {
		if _, err := cp.Store().Get(e.SHA256); err != nil {
			t.Errorf("live blob of %s lost: %v", p, err)
		}
	}
	if got := packs(); got != 2 {
		t.Errorf("%d packs left, want 2 (the second and third snapshots'; the first one held only dead blobs)", got)
	}
}
