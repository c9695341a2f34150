package replica

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Limits on the files returned with a result (they travel inside the
// CompleteAssignment message).
const (
	MaxReturnedFile  = 16 << 20
	MaxReturnedTotal = 48 << 20
)

// WriteRoutine writes a routine sent with an assignment to a private path
// under .decree/replica/routines/ and returns that absolute path. The file
// name is the base name of ref.path (so drivers see the right extension).
func (r *Replica) WriteRoutine(ref *decreev1.RoutineRef) (string, error) {
	name := path.Base(ref.GetPath())
	if ref.GetPath() == "" || name == "." || name == "/" {
		return "", fmt.Errorf("routine %s has no path to name its file after; the controller must send one", ref.GetName())
	}
	if err := fsutil.CheckName("routine file", name); err != nil {
		return "", err
	}
	dir := filepath.Join(r.dir, "routines")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write routine %s: %w", ref.GetName(), err)
	}
	p := filepath.Join(dir, name)
	if err := fsutil.WriteFileAtomic(p, ref.GetContent(), 0o755); err != nil {
		return "", fmt.Errorf("write routine %s: %w", ref.GetName(), err)
	}
	return p, nil
}

// areas are the follow-up directories of a replica.
var areas = []struct {
	dir  string
	area decreev1.ReturnedFileArea
}{
	{layout.Dir + "/" + layout.Inbox, decreev1.ReturnedFileArea_RETURNED_FILE_AREA_INBOX},
	{layout.Dir + "/" + layout.Outbox, decreev1.ReturnedFileArea_RETURNED_FILE_AREA_OUTBOX},
}

// PrepareRun empties the replica's inbox and outbox of message files and
// its run directory messageDir (which must lie under .decree/runs/), so
// that after the run everything found there is new.
func (r *Replica) PrepareRun(messageDir string) error {
	for _, a := range areas {
		dir := filepath.Join(r.root, filepath.FromSlash(a.dir))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("prepare %s: %w", a.dir, err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	if messageDir == "" {
		return nil
	}
	abs, err := r.runDir(messageDir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(abs); err != nil {
		return fmt.Errorf("clear run directory %s: %w", messageDir, err)
	}
	return os.MkdirAll(abs, 0o755)
}

func (r *Replica) runDir(messageDir string) (string, error) {
	if err := fsutil.CheckRelPath(messageDir); err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	if !strings.HasPrefix(messageDir, layout.Dir+"/"+layout.Runs+"/") {
		return "", fmt.Errorf("%w: run directory %q is not under .decree/runs/", fsutil.ErrUnsafePath, messageDir)
	}
	return fsutil.ConfinedJoin(r.root, messageDir)
}

// Collect gathers the files to return after a run: message files written
// to .decree/inbox and .decree/outbox (removed from the replica once
// collected) and the files of the run directory except the run files the
// controller sent (skip). Files over the limits are left out and named in
// the notes.
func (r *Replica) Collect(messageDir string, skip map[string]bool) ([]*decreev1.ReturnedFile, []string) {
	var out []*decreev1.ReturnedFile
	var notes []string
	total := 0
	add := func(area decreev1.ReturnedFileArea, abs, name string) {
		fi, err := os.Lstat(abs)
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		if fi.Size() > MaxReturnedFile || total+int(fi.Size()) > MaxReturnedTotal {
			notes = append(notes, fmt.Sprintf("%s (%d bytes) not returned: over the size limit", name, fi.Size()))
			return
		}
		data, err := os.ReadFile(abs)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s not returned: %v", name, err))
			return
		}
		total += len(data)
		out = append(out, &decreev1.ReturnedFile{Area: area, Name: name, Content: data})
	}
	for _, a := range areas {
		dir := filepath.Join(r.root, filepath.FromSlash(a.dir))
		for _, name := range sortedNames(dir) {
			if !layout.IsMessageFile(name) {
				continue
			}
			abs := filepath.Join(dir, name)
			add(a.area, abs, name)
			os.Remove(abs)
		}
	}
	if messageDir != "" {
		if dir, err := r.runDir(messageDir); err == nil {
			for _, name := range sortedNames(dir) {
				if !skip[name] && !strings.HasPrefix(name, ".") {
					add(decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR, filepath.Join(dir, name), name)
				}
			}
		}
	}
	return out, notes
}

func sortedNames(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}
