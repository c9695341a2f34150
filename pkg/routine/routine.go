// Package routine finds, describes and registers decree routines: the files
// in .decree/routines/ (and an optional shared directory, routine_source) that
// process messages.
//
// Three formats exist:
//
//   - shell scripts, NAME.sh, run with bash by the "shell" driver;
//   - Jupyter notebooks, NAME.ipynb, run by the "notebook" driver, and only
//     considered at all when notebook support is enabled;
//   - decision trees, NAME.tree.json or NAME.tree.csv, run by the external
//     "tree" driver (a go-plugin binary).
//
// Discovery of a bare name follows spec 06: with notebook support on,
// NAME.ipynb is preferred over NAME.sh; with it off, notebooks are ignored as
// if they did not exist. Decision trees come last (NAME.tree.json before
// NAME.tree.csv). A name with an explicit extension ("develop.sh",
// "develop.ipynb", "x.tree.csv") names that one file and skips precedence.
// Project routines always win over shared ones: the shared directory is only
// searched when the project directory has no match for the name.
//
// When no file matches, Resolve falls back to the routines decree ships
// (Builtins: the git-baseline and git-stash-changes hooks), written to a
// file under .decree/cache/ so that workers can run them like any other.
// Listings and the registry never include them.
//
// Names that arrive from outside are validated with fsutil.CheckName, so
// "../x" or "a/b" is rejected before any file is touched.
package routine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/decreehq/decree/pkg/config"
)

// Format is the kind of a routine file.
type Format string

// The routine formats decree knows.
const (
	FormatShell    Format = "shell"
	FormatNotebook Format = "notebook"
	FormatTree     Format = "tree"
)

// StandardParams are the parameters every routine receives, in the order
// papermill's -p flags list them (spec 07).
var StandardParams = []string{"spec_file", "message_file", "message_id", "message_dir", "chain", "seq"}

// IsStandardParam reports whether name is one of StandardParams.
func IsStandardParam(name string) bool {
	for _, s := range StandardParams {
		if s == name {
			return true
		}
	}
	return false
}

// Routine is a resolved routine file.
type Routine struct {
	// Name is the routine's stem ("develop" for develop.sh).
	Name string
	// Path is the absolute path of the file.
	Path string
	// Format is the file's format; Format.Driver() names its driver.
	Format Format
	// Shared is true when the file comes from routine_source rather than
	// the project's .decree/routines/.
	Shared bool
	// Builtin is true for a routine decree ships (see Builtins), found
	// because no file of its name exists.
	Builtin bool
	// Tree is the project's tree: settings, from Library.Tree; Check of a
	// decision tree then also checks its CLI codenames.
	Tree *config.TreeSettings
}

// Entry is one line of a routine listing: a stem with the format that
// discovery would pick for it, and the other formats present.
type Entry struct {
	Routine
	// Also lists the other formats found for the same stem in the same
	// directory, which discovery does not pick (for example FormatShell
	// when both develop.ipynb and develop.sh exist with notebook support).
	Also []Format
}

// Param is a parameter a routine declares.
type Param struct {
	// Name is the variable name.
	Name string
	// Default is the routine's default value, when HasDefault is set. For
	// shell scripts it is the literal value or the X in "${name:-X}"; for
	// notebooks it is the decoded value of a string literal or the source
	// text of any other Python literal (0, True, None, [1, 2]).
	Default string
	// HasDefault is false when the default is computed (a command
	// substitution, another variable) and so cannot be known statically.
	HasDefault bool
}

// ErrRoutineNotFound is matched (errors.Is) by every "no such routine" error.
var ErrRoutineNotFound = errors.New("routine not found")

// NotFoundError says which routine was missing and where discovery looked.
// It matches ErrRoutineNotFound with errors.Is.
type NotFoundError struct {
	// Name is the routine name as requested.
	Name string
	// Looked lists the files checked, in order.
	Looked []string
	// Hint is an extra sentence telling the user what to do, if any.
	Hint string
}

func (e *NotFoundError) Error() string {
	msg := fmt.Sprintf("routine %q not found (looked for %s)", e.Name, strings.Join(e.Looked, ", "))
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Is makes errors.Is(err, ErrRoutineNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrRoutineNotFound }
