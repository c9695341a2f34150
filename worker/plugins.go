package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/plugin"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// plugins are the external drivers (decree-driver-NAME binaries) a worker
// found at start-up. Each is launched on first use and kept running; one
// that exited is launched again.
type plugins struct {
	log   *slog.Logger
	mu    sync.Mutex
	paths map[string]string
	live  map[string]*plugin.Driver
}

// discoverPlugins looks for decree-driver-* executables in dirs, in order
// ("$PATH" stands for every PATH directory); the first of a name wins.
// Built-in driver names are never shadowed.
func discoverPlugins(dirs []string, builtin driver.Set, log *slog.Logger) *plugins {
	p := &plugins{log: log, paths: map[string]string{}, live: map[string]*plugin.Driver{}}
	var expanded []string
	for _, d := range dirs {
		if d == "$PATH" {
			expanded = append(expanded, filepath.SplitList(os.Getenv("PATH"))...)
			continue
		}
		expanded = append(expanded, d)
	}
	for _, dir := range expanded {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name, ok := strings.CutPrefix(e.Name(), plugin.BinaryPrefix)
			if !ok || name == "" || e.IsDir() {
				continue
			}
			if _, dup := p.paths[name]; dup {
				continue
			}
			if _, isBuiltin := builtin[name]; isBuiltin {
				continue
			}
			full := filepath.Join(dir, e.Name())
			if fi, err := os.Stat(full); err != nil || fi.Mode()&0o111 == 0 {
				continue
			}
			p.paths[name] = full
		}
	}
	return p
}

// infos describes the discovered plugins for RegisterWorker.
func (p *plugins) infos() []*decreev1.DriverInfo {
	names := make([]string, 0, len(p.paths))
	for n := range p.paths {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*decreev1.DriverInfo, 0, len(names))
	for _, n := range names {
		out = append(out, &decreev1.DriverInfo{Name: n, Extensions: driverExtensions[n]})
	}
	return out
}

// get returns the running plugin for name, launching it if needed.
func (p *plugins) get(ctx context.Context, name string) (driver.Driver, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	path, ok := p.paths[name]
	if !ok {
		return nil, fmt.Errorf("no driver %q on this worker: install %s%s beside decree-worker, on PATH or in .decree/drivers/, then restart the worker", name, plugin.BinaryPrefix, name)
	}
	if d := p.live[name]; d != nil && !d.Exited() {
		return d, nil
	}
	d, err := plugin.Launch(ctx, path, p.log)
	if err != nil {
		return nil, fmt.Errorf("start driver %s (%s): %w", name, path, err)
	}
	p.live[name] = d
	return d, nil
}

// close stops every running plugin.
func (p *plugins) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, d := range p.live {
		d.Close()
		delete(p.live, n)
	}
}
