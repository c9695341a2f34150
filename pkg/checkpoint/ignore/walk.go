package ignore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// WalkFunc is called for every tracked regular file and symlink. rel is
// slash-separated and relative to the root; info comes from lstat (on Linux
// its Sys() is a *unix.Stat_t).
type WalkFunc func(rel string, info fs.FileInfo) error

// Walk visits every regular file and symlink below root that is not ignored,
// in lexical order of rel, never following symlinks and never entering
// ignored directories. A directory that cannot be read is an error.
func Walk(ctx context.Context, root string, fn WalkFunc) error {
	return walkDir(ctx, root, "", nil, fn)
}

// File is one tracked file or symlink found by WalkConcurrent.
type File struct {
	Rel  string
	Info fs.FileInfo
}

// WalkConcurrent is Walk with up to workers directories read at once. fn
// receives the tracked files of one directory at a time; it is called
// concurrently and in no particular order of directories. The batch slice
// is reused once fn returns, and so is the memory behind its Info values:
// fn must not keep an Info (Rel strings may be kept).
func WalkConcurrent(ctx context.Context, root string, workers int, fn func(batch []File) error) error {
	return WalkTree(ctx, root, workers, TreeOptions{}, fn)
}

// TreeOptions narrows and observes a WalkTree.
type TreeOptions struct {
	// Start is the directory (relative to the root, slash-separated, ""
	// for the root) whose subtree is walked. The caller has checked that
	// it is not ignored.
	Start string
	// Parent holds the rules in force in Start's parent directory (nil
	// when Start is the root).
	Parent *Rules
	// Enter, if set, is called for every directory before it is read: a
	// file watcher adds its watch there, so that whatever changes after
	// the read is reported to it and whatever changed before is read.
	Enter func(dir string) error
	// Visited, if set, is called once a directory has been read, with the
	// rules in force inside it (its own ignore files and its ancestors').
	// It is called concurrently for different directories.
	Visited func(dir string, rules *Rules)
}

// WalkTree is WalkConcurrent over the subtree opts.Start, telling opts'
// callbacks about every tracked directory (empty ones too).
func WalkTree(ctx context.Context, root string, workers int, opts TreeOptions, fn func(batch []File) error) error {
	if workers < 1 {
		workers = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		dir   string
		rules *Rules
	}
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		queue    = []job{{dir: opts.Start, rules: opts.Parent}}
		pending  = 1 // directories queued or being read
		firstErr error
		wg       sync.WaitGroup
	)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []File
			var sc scratch
			for {
				mu.Lock()
				for len(queue) == 0 && pending > 0 {
					cond.Wait()
				}
				if len(queue) == 0 {
					mu.Unlock()
					return
				}
				j := queue[len(queue)-1]
				queue = queue[:len(queue)-1]
				mu.Unlock()
				var subs []job
				clear(batch)
				batch = batch[:0]
				err := error(nil)
				if ctx.Err() == nil && opts.Enter != nil {
					err = opts.Enter(j.dir)
				}
				if ctx.Err() == nil && err == nil {
					var rules *Rules
					err = scanDir(ctx, root, j.dir, j.rules, &sc, func(rel string, info fs.FileInfo) error {
						batch = append(batch, File{rel, info})
						return nil
					}, func(sub string, r *Rules) error {
						subs = append(subs, job{sub, r})
						return nil
					}, &rules)
					if err == nil && opts.Visited != nil {
						opts.Visited(j.dir, rules)
					}
				}
				if err == nil && len(batch) > 0 {
					err = fn(batch)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				if ctx.Err() == nil {
					queue = append(queue, subs...)
					pending += len(subs)
				}
				pending--
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func walkDir(ctx context.Context, root, dir string, parent *Rules, fn WalkFunc) error {
	return scanDir(ctx, root, dir, parent, nil, fn, func(sub string, r *Rules) error {
		return walkDir(ctx, root, sub, r, fn)
	}, nil)
}

// scanDir reads one directory, loads its ignore files (if it has any),
// reports its tracked files to fn and its tracked subdirectories to onDir,
// in name order. With inside set, *inside receives the rules in force in
// the directory.
func scanDir(ctx context.Context, root, dir string, parent *Rules, sc *scratch, fn WalkFunc, onDir func(sub string, rules *Rules) error, inside **Rules) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	abs := filepath.Join(root, filepath.FromSlash(dir))
	d, err := openDir(abs, sc)
	if err != nil {
		return fmt.Errorf("walk %s: %w (make the directory readable or ignore it in .decreeignore)", abs, err)
	}
	defer d.close()
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	entries, err := d.entries(prefix)
	if err != nil {
		return fmt.Errorf("walk %s: %w (make the directory readable or ignore it in .decreeignore)", abs, err)
	}
	slices.SortFunc(entries, func(a, b dirEntry) int { return strings.Compare(a.name, b.name) })
	rules := parent
	hasIgnore := false
	for _, e := range entries {
		if n := e.name; (n == GitIgnoreFile || n == DecreeIgnoreFile) && e.typ&fs.ModeType != fs.ModeDir {
			hasIgnore = true
		}
	}
	if hasIgnore || parent == nil {
		if rules, err = LoadRules(root, dir, parent); err != nil {
			return err
		}
	}
	if inside != nil {
		*inside = rules
	}
	for _, e := range entries {
		name, rel := e.name, e.rel
		typ := e.typ
		if typ != modeUnknown && rules.Ignored(rel, typ.IsDir()) {
			continue
		}
		var info fs.FileInfo
		if typ == modeUnknown || typ.IsRegular() || typ&fs.ModeSymlink != 0 {
			info, err = d.lstat(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue // vanished since the directory was read
			}
			if err != nil {
				return fmt.Errorf("walk: stat %s: %w (make it readable or ignore it in .decreeignore)", filepath.Join(abs, name), err)
			}
			if typ == modeUnknown {
				typ = info.Mode().Type()
				if rules.Ignored(rel, typ.IsDir()) {
					continue
				}
			}
		}
		isDir := typ.IsDir()
		switch {
		case isDir:
			if err := onDir(rel, rules); err != nil {
				return err
			}
		case typ.IsRegular() || typ&fs.ModeSymlink != 0:
			if err := fn(rel, info); err != nil {
				return err
			}
		}
	}
	return nil
}
