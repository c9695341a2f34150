package routine

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
)

//go:embed builtin/git.sh
var gitHookSource string

// builtins are the routines decree ships, by name: bash scripts that
// Resolve finds when neither the project nor the shared directory has a
// routine of that name (so a file of the same name in .decree/routines/
// replaces one). They are meant as hooks.
var builtins = map[string]string{
	"git-baseline":      strings.ReplaceAll(gitHookSource, "@NAME@", "git-baseline"),
	"git-stash-changes": strings.ReplaceAll(gitHookSource, "@NAME@", "git-stash-changes"),
}

// BuiltinDirName is where, below the parent of Library.Dir (normally
// .decree/), Resolve writes the built-in routines it returns: workers run
// files, so a built-in needs one. The directory lies under .decree/cache/,
// which init's .gitignore leaves out of version control.
const BuiltinDirName = "cache/builtin-routines"

// Builtins returns the names of the built-in routines, sorted.
func Builtins() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BuiltinSource returns the script of a built-in routine (ok false when
// name is not one).
func BuiltinSource(name string) (string, bool) {
	src, ok := builtins[Stem(name)]
	if ok && name != Stem(name) && !strings.HasSuffix(name, ".sh") {
		return "", false
	}
	return src, ok
}

// builtinDir is where the library's built-in routine files are written.
func (l Library) builtinDir() string {
	if l.BuiltinDir != "" {
		return l.BuiltinDir
	}
	return filepath.Join(filepath.Dir(l.Dir), filepath.FromSlash(BuiltinDirName))
}

// resolveBuiltin returns the built-in routine name, writing its file when
// it is missing or differs from the bundled script.
func (l Library) resolveBuiltin(name string) (Routine, bool, error) {
	src, ok := BuiltinSource(name)
	if !ok {
		return Routine{}, false, nil
	}
	stem := Stem(name)
	dir := l.builtinDir()
	p := filepath.Join(dir, stem+".sh")
	if old, err := os.ReadFile(p); err != nil || !bytes.Equal(old, []byte(src)) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Routine{}, false, fmt.Errorf("write built-in routine %s: %w", stem, err)
		}
		if err := fsutil.WriteFileAtomic(p, []byte(src), 0o755); err != nil {
			return Routine{}, false, fmt.Errorf("write built-in routine %s: %w", stem, err)
		}
	}
	return Routine{Name: stem, Path: abs(p), Format: FormatShell, Builtin: true}, true, nil
}

// CheckHooks resolves every hook named in h, so that a hook naming no
// routine is reported when the configuration is loaded rather than when
// the first message reaches it. The error names the hook key, what was
// looked for and the built-in hooks.
func (l Library) CheckHooks(h config.Hooks) error {
	for _, k := range []struct{ key, name string }{
		{"beforeAll", h.BeforeAll}, {"afterAll", h.AfterAll}, {"beforeEach", h.BeforeEach},
		{"afterEach", h.AfterEach}, {"onDeadLetter", h.OnDeadLetter}, {"onWait", h.OnWait},
		{"beforeMerge", h.BeforeMerge}, {"afterMerge", h.AfterMerge},
	} {
		if k.name == "" {
			continue
		}
		if _, err := l.Resolve(k.name); err != nil {
			return fmt.Errorf("hooks.%s: %w; create the routine or use a built-in hook (%s)", k.key, err, strings.Join(Builtins(), ", "))
		}
	}
	return nil
}
