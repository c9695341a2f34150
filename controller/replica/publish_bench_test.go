package replica

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/decreehq/decree/pkg/checkpoint"
)

// BenchmarkPublish publishes a 20,000-entry manifest with 10 entries
// changed since the previous publication, given as a new manifest that
// does not come from a served snapshot (the full comparison), and from
// scratch (a new Service each time, as the first publication).
func BenchmarkPublish(b *testing.B) {
	root := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".decree"), 0o755); err != nil {
		b.Fatal(err)
	}
	cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: filepath.Join(root, ".decree", "objects"), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	base := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}}
	for i := 0; i < 20000; i++ {
		p := fmt.Sprintf("pkg%02d/mod%02d/file%05d.go", i/1000, (i/20)%50, i)
		base.Files[p] = checkpoint.Entry{SHA256: sumOf([]byte(p)), Size: int64(i), Mode: checkpoint.ModeFile}
	}
	versions := make([]*checkpoint.Manifest, 8)
	for v := range versions {
		m := &checkpoint.Manifest{Files: maps.Clone(base.Files)}
		for k := 0; k < 10; k++ {
			p := fmt.Sprintf("pkg%02d/mod%02d/file%05d.go", 0, k, k*20+v)
			m.Files[p] = checkpoint.Entry{SHA256: sumOf([]byte(fmt.Sprint(p, v))), Size: 1, Mode: checkpoint.ModeFile}
		}
		versions[v] = m
	}
	newService := func() *Service {
		s, err := New(Options{Root: root, Objects: cp.Store(), Leases: fakeLeases{}})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("10-changed-compared", func(b *testing.B) {
		s := newService()
		for i := 0; i < b.N; i++ {
			_, release, err := s.Publish(versions[i%len(versions)])
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
	b.Run("from-scratch", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, release, err := newService().Publish(versions[i%len(versions)])
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}
