package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
)

// Report is tree.json: the chart and every step run, in order, from the
// Start terminator (when the chart has one) to the End reached.
type Report struct {
	Chart    string       `json:"chart"`
	Routine  string       `json:"routine,omitempty"`
	File     string       `json:"file"`
	Attempt  int          `json:"attempt,omitempty"`
	Status   string       `json:"status"` // running, succeeded, failed
	Error    string       `json:"error,omitempty"`
	Started  time.Time    `json:"started"`
	Finished *time.Time   `json:"finished,omitempty"`
	Nodes    []NodeReport `json:"nodes"`
}

// NodeReport is one step of the run.
type NodeReport struct {
	ID    string `json:"id"`
	Where string `json:"where,omitempty"`
	// Name is the node's text.
	Name string `json:"name"`
	// Type is start, process, decision or end.
	Type string `json:"type"`
	CLI  string `json:"cli,omitempty"`
	// Response is the parsed answer (Process or Decision).
	Response any `json:"response,omitempty"`
	// Validation is the last validation, if the step was validated.
	Validation *Validation `json:"validation,omitempty"`
	// Retries is how many times the step was retried.
	Retries int    `json:"retries"`
	Route   string `json:"route,omitempty"`
	Error   string `json:"error,omitempty"`
}

// open starts the attempt's log and report.
func (r *runner) open() error {
	r.report = Report{Chart: r.o.Tree.Doc.Title, Routine: r.o.Routine, File: r.o.Tree.Doc.File, Attempt: r.o.Attempt,
		Status: "running", Started: time.Now().UTC(), Nodes: []NodeReport{}}
	if r.o.RunDir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(r.o.RunDir, ArtifactName(LogFile, r.o.Attempt)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open the tree log: %w", err)
	}
	r.log = f
	r.logf("##### decision tree %s (%s), routine %s, attempt %d, started %s\n", r.report.Chart, r.report.File, r.o.Routine, r.o.Attempt, r.report.Started.Format(time.RFC3339))
	return r.save()
}

// add records a finished step and saves tree.json.
func (r *runner) add(n NodeReport) {
	r.report.Nodes = append(r.report.Nodes, n)
	_ = r.save()
}

// close records the outcome.
func (r *runner) close(err error) {
	now := time.Now().UTC()
	r.report.Finished = &now
	r.report.Status = "succeeded"
	if err != nil {
		r.report.Status, r.report.Error = "failed", err.Error()
		r.say("FAILED: %s", oneLine(err.Error()))
	} else {
		r.say("finished: %d steps run", len(r.report.Nodes))
	}
	if serr := r.save(); serr != nil {
		fmt.Fprintf(r.o.Output, "tree: %v\n", serr)
	}
	if r.log != nil {
		r.log.Close()
	}
}

func (r *runner) save() error {
	if r.o.RunDir == "" {
		return nil
	}
	b, err := json.MarshalIndent(r.report, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", ReportFile, err)
	}
	// Rewritten after every step: a crash leaves the previous version.
	return fsutil.ReplaceFile(filepath.Join(r.o.RunDir, ArtifactName(ReportFile, r.o.Attempt)), append(b, '\n'), 0o644)
}
