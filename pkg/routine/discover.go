package routine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
)

// Library is the set of directories routines are discovered in.
type Library struct {
	// Dir is the project's routine directory (normally
	// <project>/.decree/routines). A missing directory holds no routines.
	Dir string
	// SharedDir is the optional shared routine directory (routine_source,
	// with "~" already expanded). Empty means none.
	SharedDir string
	// NotebookSupport mirrors the notebook_support config flag.
	NotebookSupport bool
	// BuiltinDir is where Resolve writes the built-in routines it returns;
	// empty means BuiltinDirName below the parent of Dir.
	BuiltinDir string
	// Tree is passed to every routine found (see Routine.Tree); nil
	// leaves decision trees' codenames unchecked.
	Tree *config.TreeSettings
}

// order returns the extensions tried for a bare name, most preferred first.
func (l Library) order() []string { return extensionOrder(l.NotebookSupport) }

// dirs returns the directories searched, project first.
func (l Library) dirs() []struct {
	dir    string
	shared bool
} {
	out := []struct {
		dir    string
		shared bool
	}{{l.Dir, false}}
	if l.SharedDir != "" {
		out = append(out, struct {
			dir    string
			shared bool
		}{l.SharedDir, true})
	}
	return out
}

// Resolve maps a routine name (as found in message frontmatter, a spec, the
// router's answer or default_routine) to a file. It returns a *NotFoundError
// (matching ErrRoutineNotFound) when no file fits, and an error wrapping
// fsutil.ErrUnsafePath when the name is not a plain file name.
func (l Library) Resolve(name string) (Routine, error) {
	if err := fsutil.CheckName("routine", name); err != nil {
		return Routine{}, err
	}
	var looked []string
	if stem, _, format, ok := SplitExt(name); ok {
		if format == FormatNotebook && !l.NotebookSupport {
			return Routine{}, &NotFoundError{
				Name:   name,
				Looked: []string{"nothing: .ipynb routines are ignored while notebook_support is false"},
				Hint:   "set notebook_support: true in .decree/config.yml to run notebook routines",
			}
		}
		for _, d := range l.dirs() {
			p := filepath.Join(d.dir, name)
			looked = append(looked, p)
			if ok, err := isFile(p); err != nil {
				return Routine{}, err
			} else if ok {
				return Routine{Name: stem, Path: abs(p), Format: format, Shared: d.shared, Tree: l.Tree}, nil
			}
		}
		if rt, ok, err := l.resolveBuiltin(name); ok || err != nil {
			return rt, err
		}
		return Routine{}, &NotFoundError{Name: name, Looked: looked}
	}
	for _, d := range l.dirs() {
		for _, ext := range l.order() {
			p := filepath.Join(d.dir, name+ext)
			looked = append(looked, p)
			ok, err := isFile(p)
			if err != nil {
				return Routine{}, err
			}
			if ok {
				_, _, format, _ := SplitExt(name + ext)
				return Routine{Name: name, Path: abs(p), Format: format, Shared: d.shared, Tree: l.Tree}, nil
			}
		}
	}
	if rt, ok, err := l.resolveBuiltin(name); ok || err != nil {
		return rt, err
	}
	nf := &NotFoundError{Name: name, Looked: looked}
	if !l.NotebookSupport {
		nb, _ := FormatNotebook.Info()
	hint:
		for _, d := range l.dirs() {
			for _, ext := range nb.Extensions {
				if ok, _ := isFile(filepath.Join(d.dir, name+ext)); ok {
					nf.Hint = fmt.Sprintf("%s%s exists but notebook_support is false; set notebook_support: true in .decree/config.yml to use it", name, ext)
					break hint
				}
			}
		}
	}
	return Routine{}, nf
}

// List returns every routine discovery can reach, one entry per stem,
// sorted by name. A stem present in both the project and the shared
// directory is listed once, from the project. Notebooks are left out
// entirely when notebook support is off.
func (l Library) List() ([]Entry, error) {
	proj, err := l.listDir(l.Dir, false)
	if err != nil {
		return nil, err
	}
	out := proj
	if l.SharedDir != "" {
		shared, err := l.listDir(l.SharedDir, true)
		if err != nil {
			return nil, err
		}
		seen := make(map[string]bool, len(proj))
		for _, e := range proj {
			seen[e.Name] = true
		}
		for _, e := range shared {
			if !seen[e.Name] {
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ListProject returns the entries of the project directory only.
func (l Library) ListProject() ([]Entry, error) { return l.listDir(l.Dir, false) }

// ListShared returns the entries of the shared directory only, including
// stems a project routine shadows (the registry tracks files, not
// reachability). It returns nothing when SharedDir is empty.
func (l Library) ListShared() ([]Entry, error) {
	if l.SharedDir == "" {
		return nil, nil
	}
	return l.listDir(l.SharedDir, true)
}

func (l Library) listDir(dir string, shared bool) ([]Entry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list routines in %s: %w", dir, err)
	}
	byStem := map[string][]string{} // stem -> extensions present
	for _, de := range ents {
		name := de.Name()
		stem, ext, format, ok := SplitExt(name)
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		if format == FormatNotebook && !l.NotebookSupport {
			continue
		}
		if ok, _ := isFile(filepath.Join(dir, name)); !ok {
			continue
		}
		byStem[stem] = append(byStem[stem], ext)
	}
	var out []Entry
	for stem, exts := range byStem {
		var e Entry
		picked := false
		for _, ext := range l.order() {
			if !contains(exts, ext) {
				continue
			}
			_, _, format, _ := SplitExt(stem + ext)
			if !picked {
				e.Routine = Routine{Name: stem, Path: abs(filepath.Join(dir, stem+ext)), Format: format, Shared: shared, Tree: l.Tree}
				picked = true
			} else if !containsFormat(e.Also, format) && format != e.Format {
				e.Also = append(e.Also, format)
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func containsFormat(xs []Format, x Format) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// isFile reports whether p exists and is a regular file (following
// symlinks). A missing file is (false, nil); other errors are returned.
func isFile(p string) (bool, error) {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check routine file %s: %w", p, err)
	}
	return st.Mode().IsRegular(), nil
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
