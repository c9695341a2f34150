package controller

import (
	"path/filepath"

	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/routine"
)

// SyncRoutines registers the routines found on disk in the project's
// config.yml (routine discovery): new project routines enabled, new shared
// ones disabled, vanished ones deprecated. Only the registry keys of
// config.yml are rewritten, and only when something changed. It runs at
// `decreectl routine-sync`, and at the start of `process`, `daemon` and
// decree-controller.
func SyncRoutines(root string) (routine.SyncReport, error) {
	path := filepath.Join(root, store.DecreeDir, "config.yml")
	cfg, _, err := config.Load(path)
	if err != nil {
		return routine.SyncReport{}, err
	}
	rep, err := routine.Sync(pipeline.Library(root, cfg), cfg.Routines, cfg.SharedRoutines)
	if err != nil || !rep.Changed() {
		return rep, err
	}
	return rep, config.WriteRegistry(path, rep.Routines, rep.Shared)
}
