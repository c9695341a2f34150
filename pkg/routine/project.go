package routine

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
)

// ProjectLibrary is the routine library of the project at root under cfg:
// <root>/.decree/routines, plus routine_source (relative to root unless
// absolute) as the shared directory.
func ProjectLibrary(root string, cfg *config.Config) Library {
	shared := cfg.RoutineSource
	if shared != "" && !filepath.IsAbs(shared) {
		shared = filepath.Join(root, shared)
	}
	return Library{Dir: layout.Path(root, layout.Routines), SharedDir: shared, NotebookSupport: cfg.NotebookSupport, Tree: &cfg.Tree}
}

// syncMu makes SyncProject's read-modify-write of config.yml one at a time
// within the process (one controller owns a project).
var syncMu sync.Mutex

// SyncProject runs Sync on the project at root: it reads
// <root>/.decree/config.yml, brings its registries in line with the routine
// files, and writes them back with config.WriteRegistry (only the registry
// keys change) when anything changed. A config.yml that does not load is
// reported and left alone.
func SyncProject(root string) (SyncReport, error) {
	syncMu.Lock()
	defer syncMu.Unlock()
	path := layout.Path(root, layout.Config)
	cfg, _, err := config.Load(path)
	if err != nil {
		return SyncReport{}, fmt.Errorf("sync routines: %w", err)
	}
	rep, err := Sync(ProjectLibrary(root, cfg), cfg.Routines, cfg.SharedRoutines)
	if err != nil {
		return rep, fmt.Errorf("sync routines: %w", err)
	}
	if !rep.Changed() {
		return rep, nil
	}
	return rep, config.WriteRegistry(path, rep.Routines, rep.Shared)
}
