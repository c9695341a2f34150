// Package ignore decides which entries of a project tree decree tracks.
//
// It reads nested .gitignore and .decreeignore files with git's own
// semantics (ported from git's dir.c and wildmatch.c, not approximated):
// patterns apply relative to the directory of the file that holds them,
// later lines override earlier ones, deeper files override shallower ones,
// '!' re-includes, a trailing '/' matches directories only, a '/' at the
// start or in the middle anchors the pattern, "**" spans directories, and
// an ignored directory is never entered (so nothing inside it can be
// re-included, exactly like git). "logs/**" therefore does not ignore the
// directory logs itself, and "!logs/keep/" re-includes that directory, while
// files below it stay ignored by "logs/**" unless re-included too.
//
// .decreeignore uses the same syntax and nesting. It has precedence over
// .gitignore: a path is decided by the deepest-then-last matching
// .decreeignore pattern if any matches, otherwise by the .gitignore files.
// So a .decreeignore can both add exclusions and re-include ("!build/")
// paths that git ignores.
//
// Independently of any rule, entries named .git and .decree are skipped at
// every depth (git metadata and decree's runtime data), and ignore files
// that are symlinks are not read (as git does since 2.32). Only regular
// files and symlinks are reported by Walk: sockets, FIFOs and devices are
// skipped. git's other sources (.git/info/exclude, core.excludesFile) are
// deliberately not read, so the result does not depend on the machine.
package ignore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/decreehq/decree/pkg/layout"
)

// Names of the ignore files read in every directory.
const (
	GitIgnoreFile    = ".gitignore"
	DecreeIgnoreFile = ".decreeignore"
)

// AlwaysSkipped reports whether an entry name is skipped regardless of rules.
func AlwaysSkipped(name string) bool {
	return name == ".git" || name == layout.Dir
}

// Rules holds the ignore patterns in force inside one directory: its own
// ignore files and, through its parent, those of every ancestor.
type Rules struct {
	parent *Rules
	base   string // directory relative to the root, slash-separated, "" for the root
	git    []pattern
	decree []pattern
}

// LoadRules reads the ignore files of directory dir (relative to root,
// slash-separated, "" for the root itself) and returns its rules, chained to
// parent (nil for the root).
func LoadRules(root, dir string, parent *Rules) (*Rules, error) {
	r := &Rules{parent: parent, base: dir}
	var err error
	if r.git, err = readPatterns(root, dir, GitIgnoreFile); err != nil {
		return nil, err
	}
	if r.decree, err = readPatterns(root, dir, DecreeIgnoreFile); err != nil {
		return nil, err
	}
	if parent != nil && len(r.git) == 0 && len(r.decree) == 0 {
		return parent, nil // nothing new here: the parent's rules decide
	}
	return r, nil
}

func readPatterns(root, dir, name string) ([]pattern, error) {
	p := filepath.Join(root, filepath.FromSlash(dir), name)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ignore file %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil // symlinks and directories named like ignore files are not read
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read ignore file %s: %w (fix its permissions or remove it)", p, err)
	}
	return parsePatterns(data), nil
}

// Ignored reports whether the entry rel (relative to the root,
// slash-separated), which lies directly inside this rules' directory, is
// ignored. isDir tells whether it is a directory (not a symlink to one).
// Ancestors are not checked: that is the caller's walk's job.
func (r *Rules) Ignored(rel string, isDir bool) bool {
	name := path.Base(rel)
	if AlwaysSkipped(name) {
		return true
	}
	for rr := r; rr != nil; rr = rr.parent {
		if m, neg := lastMatch(rr.decree, rr.base, rel, name, isDir); m {
			return !neg
		}
	}
	for rr := r; rr != nil; rr = rr.parent {
		if m, neg := lastMatch(rr.git, rr.base, rel, name, isDir); m {
			return !neg
		}
	}
	return false
}

// Matcher answers "is this path ignored?" for arbitrary paths of one tree,
// reading and caching each directory's ignore files on first use. It is safe
// for concurrent use. Call Reset after ignore files change.
type Matcher struct {
	root string
	mu   sync.Mutex
	dirs map[string]*Rules
}

// NewMatcher returns a Matcher for the tree at root.
func NewMatcher(root string) *Matcher {
	return &Matcher{root: root, dirs: map[string]*Rules{}}
}

// Ignored reports whether rel (slash-separated, relative to the root) is
// ignored, either itself or because one of its parent directories is.
func (m *Matcher) Ignored(rel string, isDir bool) (bool, error) {
	rel = strings.Trim(rel, "/")
	if rel == "" || rel == "." {
		return false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := strings.Split(rel, "/")
	var rules *Rules
	dir := ""
	for i, part := range parts {
		r, ok := m.dirs[dir]
		if !ok {
			var err error
			if r, err = LoadRules(m.root, dir, rules); err != nil {
				return false, err
			}
			m.dirs[dir] = r
		}
		rules = r
		cur := path.Join(dir, part)
		last := i == len(parts)-1
		if rules.Ignored(cur, !last || isDir) {
			return true, nil
		}
		dir = cur
	}
	return false, nil
}
