package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Discover lists the driver binaries in dirs, name -> path, in search order
// ("$PATH" stands for every PATH directory): the first binary of a name
// wins, names in skip (the built-in drivers) are never shadowed, and only
// regular executable files count. Find uses the same rules for one name.
func Discover(dirs []string, skip func(name string) bool) map[string]string {
	found := map[string]string{}
	for _, dir := range expandDirs(dirs) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name, ok := strings.CutPrefix(e.Name(), BinaryPrefix)
			if !ok || name == "" {
				continue
			}
			if _, dup := found[name]; dup || (skip != nil && skip(name)) {
				continue
			}
			if p := filepath.Join(dir, e.Name()); isExecutable(p) {
				found[name] = p
			}
		}
	}
	return found
}

func expandDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if d == "$PATH" {
			out = append(out, filepath.SplitList(os.Getenv("PATH"))...)
			continue
		}
		out = append(out, d)
	}
	return out
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Pool holds the driver plugins found at start-up (see Discover). Each is
// launched on first use and kept running; one that exited is launched
// again. It is safe for concurrent use.
type Pool struct {
	log   *slog.Logger
	mu    sync.Mutex
	paths map[string]string
	live  map[string]*Driver
}

// NewPool discovers the plugins in dirs (skipping built-in names); it does
// not start any.
func NewPool(dirs []string, skip func(name string) bool, log *slog.Logger) *Pool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pool{log: log, paths: Discover(dirs, skip), live: map[string]*Driver{}}
}

// Names lists the discovered plugin names, sorted.
func (p *Pool) Names() []string {
	names := make([]string, 0, len(p.paths))
	for n := range p.paths {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Get returns the running plugin for name, launching it if needed.
func (p *Pool) Get(ctx context.Context, name string) (*Driver, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	path, ok := p.paths[name]
	if !ok {
		return nil, fmt.Errorf("no driver %q on this worker: install %s%s beside decree-worker, on PATH or in .decree/drivers/, then restart the worker", name, BinaryPrefix, name)
	}
	if d := p.live[name]; d != nil && !d.Exited() {
		return d, nil
	}
	d, err := Launch(ctx, path, p.log)
	if err != nil {
		return nil, fmt.Errorf("start driver %s (%s): %w", name, path, err)
	}
	p.live[name] = d
	return d, nil
}

// Close stops every running plugin.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, d := range p.live {
		d.Close()
		delete(p.live, n)
	}
}
