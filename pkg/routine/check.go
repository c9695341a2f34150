package routine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/decreehq/decree/pkg/tree"
)

// Check reads the routine file and rejects what no attempt could run: a
// shell script with CRLF line endings or NUL bytes, a notebook that is not
// nbformat 4 JSON. The pipeline calls it before the first attempt, so such
// a routine dead-letters the message at once instead of failing every
// retry; the drivers check again when they start. A decision tree is
// read and linted by pkg/tree, with the project's tree: settings when
// r.Tree is set (else its CLI codenames are left to the tree driver).
func (r Routine) Check() error {
	if r.Format == FormatTree {
		var err error
		if r.Tree != nil {
			_, err = tree.Load(r.Path, *r.Tree)
		} else {
			_, err = tree.Lint(r.Path)
		}
		if err != nil {
			return fmt.Errorf("routine %s (%s): %w", r.Name, r.Path, err)
		}
		return nil
	}
	b, err := r.read()
	if err != nil {
		return err
	}
	if r.Format == FormatNotebook {
		err := CheckNotebook(b)
		if err == nil {
			_, err = NotebookParams(b)
		}
		if err != nil {
			return fmt.Errorf("routine %s (%s): %w", r.Name, r.Path, err)
		}
		return nil
	}
	return CheckShell(r.Name, r.Path, b)
}

// CheckShell rejects scripts bash cannot run as written: CRLF line endings
// and NUL bytes.
func CheckShell(name, path string, src []byte) error {
	if i := bytes.Index(src, []byte("\r\n")); i >= 0 {
		line := bytes.Count(src[:i], []byte("\n")) + 1
		return fmt.Errorf("routine %s (%s) has Windows (CRLF) line endings (first at line %d); bash would fail on them. Convert the file with `dos2unix %s` or `sed -i 's/\\r$//' %s`", name, path, line, path, path)
	}
	if bytes.IndexByte(src, 0) >= 0 {
		return fmt.Errorf("routine %s (%s) contains NUL bytes; it is not a shell script", name, path)
	}
	return nil
}

// CheckNotebook rejects files that are not nbformat 4 JSON with a clear
// reason.
func CheckNotebook(src []byte) error {
	var nb struct {
		Cells    []json.RawMessage `json:"cells"`
		Nbformat int               `json:"nbformat"`
	}
	if err := json.Unmarshal(src, &nb); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("not a valid notebook: JSON syntax error at byte %d: %v; open it in Jupyter and save it again, or fix the JSON", se.Offset, err)
		}
		return fmt.Errorf("not a valid notebook: %w", err)
	}
	if nb.Cells == nil {
		return fmt.Errorf("not a valid notebook: no \"cells\" list")
	}
	if nb.Nbformat != 0 && nb.Nbformat < 4 {
		return fmt.Errorf("notebook format %d is too old; convert it with `jupyter nbconvert --to notebook --nbformat 4`", nb.Nbformat)
	}
	return nil
}
