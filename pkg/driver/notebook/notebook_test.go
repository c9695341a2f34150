package notebook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/internal/drivertest"
	"github.com/decreehq/decree/pkg/routine"
)

const chain = "2025022514320000"

// project copies testdata notebooks into a fresh project's
// .decree/routines and makes a run directory.
func project(t *testing.T, files ...string) (root, msgDir string, lib routine.Library) {
	t.Helper()
	root = t.TempDir()
	rdir := filepath.Join(root, ".decree", "routines")
	msgDir = filepath.Join(root, ".decree", "runs", chain+"-0")
	for _, d := range []string{rdir, msgDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rdir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, msgDir, routine.Library{Dir: rdir, NotebookSupport: true}
}

func params(msgDir string, custom map[string]string) map[string]string {
	p := map[string]string{
		"spec_file": "", "message_file": filepath.Join(msgDir, "message.md"),
		"message_id": chain + "-0", "message_dir": msgDir, "chain": chain, "seq": "0",
	}
	for k, v := range custom {
		p[k] = v
	}
	return p
}

// customFrom discovers the routine's custom parameters and picks values
// from message frontmatter fields, as the processor does.
func customFrom(t *testing.T, r routine.Routine, fields map[string]string) map[string]string {
	t.Helper()
	custom, err := r.CustomParams()
	if err != nil {
		t.Fatal(err)
	}
	return routine.SelectCustom(custom, fields)
}

func requireJupyter(t *testing.T) {
	t.Helper()
	drivertest.RequireTool(t, "jupyter")
	if _, err := jupyterPython(); err != nil {
		t.Fatal(err)
	}
	py, _ := jupyterPython()
	if out, err := exec.Command(py, "-c", "import nbclient, nbformat, ipykernel").CombinedOutput(); err != nil {
		if os.Getenv("DECREE_REQUIRE_TOOLS") == "1" {
			t.Fatalf("jupyter's python cannot import nbclient/ipykernel: %v\n%s", err, out)
		}
		t.Skipf("jupyter's python cannot import nbclient/ipykernel: %s", out)
	}
}

// outputsText returns all stream output text of an executed notebook.
func outputsText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read output notebook: %v", err)
	}
	var nb struct {
		Cells []struct {
			Outputs []struct {
				Text json.RawMessage `json:"text"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatalf("output notebook is not JSON: %v", err)
	}
	var sb strings.Builder
	for _, c := range nb.Cells {
		for _, o := range c.Outputs {
			s, _ := routine.CellSource(o.Text)
			sb.WriteString(s)
		}
	}
	return sb.String()
}

// Spec 06 with real Jupyter: the custom variable from frontmatter reaches the
// notebook, unknown fields are ignored, a missing one keeps the default, the
// kernel runs in the project root and %%bash cells can write follow-ups.
func TestNbconvertCustomVariables(t *testing.T) {
	requireJupyter(t)
	tests := []struct {
		name   string
		fields map[string]string
		want   string
	}{
		{"frontmatter value", map[string]string{"target_branch": "main", "unknown_field": "value"}, "py target_branch=main\n"},
		{"routine default", map[string]string{"unknown_field": "value"}, "py target_branch=default-branch\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, msgDir, lib := project(t, "pr-review.ipynb")
			r, err := lib.Resolve("pr-review")
			if err != nil || r.Format != routine.FormatNotebook {
				t.Fatalf("resolve: %+v, %v", r, err)
			}
			custom := customFrom(t, r, tt.fields)
			if _, ok := custom["unknown_field"]; ok {
				t.Fatal("unknown_field selected as a custom parameter")
			}
			var out bytes.Buffer
			res, err := driver.Run(context.Background(), New(), driver.TaskConfig{
				Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir,
				Params: params(msgDir, custom), NotebookEngine: EngineNbconvert,
			}, &out)
			if err != nil || !res.Success() {
				log, _ := os.ReadFile(filepath.Join(msgDir, "papermill.log"))
				t.Fatalf("run: %+v, %v\n%s", res, err, log)
			}
			text := outputsText(t, filepath.Join(msgDir, "output.ipynb"))
			for _, w := range []string{tt.want, "py seq=0\n", "py cwd=" + root + "\n", "bash chain=" + chain + " seq=0\n"} {
				if !strings.Contains(text, w) {
					t.Errorf("output notebook lacks %q:\n%s", w, text)
				}
			}
			if strings.Contains(text, "unknown_field") {
				t.Errorf("unknown_field leaked into the notebook")
			}
			if _, err := os.Stat(filepath.Join(root, ".decree", "inbox", chain+"-1.md")); err != nil {
				t.Errorf("%%%%bash cell did not write the follow-up message: %v", err)
			}
			log, err := os.ReadFile(filepath.Join(msgDir, "papermill.log"))
			if err != nil || !bytes.Equal(log, out.Bytes()) {
				t.Errorf("papermill.log (%v) should hold exactly the streamed engine output", err)
			}
			// pr-review.ipynb is nbformat 4.5 without cell ids, and the
			// kernel's debugger warns about frozen modules unless told not
			// to: neither may clutter the routine's log.
			for _, noise := range []string{"MissingIDFieldWarning", "Debugger warning"} {
				if bytes.Contains(log, []byte(noise)) {
					t.Errorf("engine output carries %q noise:\n%s", noise, log)
				}
			}
			// The injected cell follows the parameters cell.
			b, _ := os.ReadFile(filepath.Join(msgDir, "output.ipynb"))
			var nb map[string]any
			json.Unmarshal(b, &nb)
			cells := nb["cells"].([]any)
			if !cellHasTag(cells[1].(map[string]any), "parameters") || !cellHasTag(cells[2].(map[string]any), "injected-parameters") {
				t.Errorf("injected-parameters cell is not right after the parameters cell")
			}
		})
	}
}

// A failing %%bash cell fails the attempt with exit code 1, stops later
// cells, and still leaves output.ipynb with the outputs so far.
func TestNbconvertFailingBashCell(t *testing.T) {
	requireJupyter(t)
	root, msgDir, lib := project(t, "failing.ipynb")
	r, _ := lib.Resolve("failing")
	res, err := driver.Run(context.Background(), New(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir,
		Params: params(msgDir, nil), NotebookEngine: EngineNbconvert,
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 || res.Success() || !strings.Contains(res.Message, "failing") {
		t.Errorf("result %+v: want exit code 1 and a message naming the routine", res)
	}
	text := outputsText(t, filepath.Join(msgDir, "output.ipynb"))
	if !strings.Contains(text, "before failure") || !strings.Contains(text, "failing now") {
		t.Errorf("output notebook lacks the outputs before the failure:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(root, "after-failure-ran")); err == nil {
		t.Errorf("a cell after the failing one was executed")
	}
	log, _ := os.ReadFile(filepath.Join(msgDir, "papermill.log"))
	if !bytes.Contains(log, []byte("exit status 3")) {
		t.Errorf("papermill.log does not explain the failure:\n%s", log)
	}
}

// A notebook without a parameters cell gets the injected cell at the top.
func TestNbconvertNoParametersCell(t *testing.T) {
	requireJupyter(t)
	root, msgDir, lib := project(t, "noparams.ipynb")
	r, _ := lib.Resolve("noparams")
	res, err := driver.Run(context.Background(), New(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir,
		Params: params(msgDir, nil), NotebookEngine: EngineNbconvert,
	}, &bytes.Buffer{})
	if err != nil || !res.Success() {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if text := outputsText(t, filepath.Join(msgDir, "output.ipynb")); !strings.Contains(text, "np message_id="+chain+"-0") {
		t.Errorf("parameters not visible without a parameters cell:\n%s", text)
	}
}

func TestMalformedNotebook(t *testing.T) {
	root, msgDir, lib := project(t, "malformed.ipynb")
	r, _ := lib.Resolve("malformed")
	_, err := New().Start(context.Background(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir, NotebookEngine: EngineNbconvert,
	})
	if err == nil || !strings.Contains(err.Error(), "malformed") || !strings.Contains(err.Error(), "JSON") {
		t.Errorf("err = %v; want an error naming the routine and the JSON problem", err)
	}
	_, err = New().Start(context.Background(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir, NotebookEngine: "jupyterlab",
	})
	if err == nil {
		t.Error("bad notebook accepted")
	}
}

// Stop kills the kernel's %%bash background processes too.
func TestNbconvertStopKillsKernelChildren(t *testing.T) {
	requireJupyter(t)
	root, msgDir, lib := project(t, "sleeper.ipynb")
	r, _ := lib.Resolve("sleeper")
	pidfile := filepath.Join(t.TempDir(), "pid")
	h, err := New().Start(context.Background(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir, NotebookEngine: EngineNbconvert,
		Env: []string{"pidfile=" + pidfile}, Output: &bytes.Buffer{}, KillGrace: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := drivertest.WaitPidFile(t, pidfile, 60*time.Second)
	if err := h.Stop(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(context.Background())
	if err != nil || res.Success() || !res.Stopped {
		t.Errorf("result %+v, %v", res, err)
	}
	if !drivertest.WaitDead(pid, 5*time.Second) {
		t.Errorf("sleep %d started by a %%%%bash cell survived Stop", pid)
	}
	if _, err := os.Stat(filepath.Join(msgDir, "output.ipynb")); err != nil {
		t.Errorf("no output notebook after stop: %v", err)
	}
}

// fakePapermill writes a papermill stand-in (papermill cannot be installed
// here) that records its arguments and copies the input notebook, so the
// exact command line decree builds can be checked.
func fakePapermill(t *testing.T) (venv, argsFile string) {
	t.Helper()
	drivertest.RequireTool(t, "bash")
	venv = t.TempDir()
	argsFile = filepath.Join(venv, "args")
	os.MkdirAll(filepath.Join(venv, "bin"), 0o755)
	script := "#!/bin/bash\nprintf '%s\\n' \"$@\" > " + argsFile + "\necho 'papermill progress' >&2\ncp \"$1\" \"$2\"\n"
	if err := os.WriteFile(filepath.Join(venv, "bin", "papermill"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return venv, argsFile
}

// Spec 06/07: with papermill present, the notebook runs via papermill with
// the standard -p flags in order and -p target_branch main for the custom
// variable; unknown frontmatter is not passed.
func TestPapermillCommandLine(t *testing.T) {
	venv, argsFile := fakePapermill(t)
	root, msgDir, lib := project(t, "pr-review.ipynb")
	r, _ := lib.Resolve("pr-review")
	custom := customFrom(t, r, map[string]string{"target_branch": "main", "unknown_field": "value"})
	var out bytes.Buffer
	res, err := driver.Run(context.Background(), New(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir, Venv: venv,
		Params: params(msgDir, custom),
	}, &out)
	if err != nil || !res.Success() {
		t.Fatalf("run: %+v, %v", res, err)
	}
	got, _ := os.ReadFile(argsFile)
	want := strings.Join([]string{
		r.Path, filepath.Join(msgDir, "output.ipynb"),
		"-p", "spec_file", "",
		"-p", "message_file", filepath.Join(msgDir, "message.md"),
		"-p", "message_id", chain + "-0",
		"-p", "message_dir", msgDir,
		"-p", "chain", chain,
		"-p", "seq", "0",
		"-p", "target_branch", "main",
	}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("papermill arguments:\n got %q\nwant %q", got, want)
	}
	if log, _ := os.ReadFile(filepath.Join(msgDir, "papermill.log")); string(log) != "papermill progress\n" {
		t.Errorf("papermill.log = %q", log)
	}
}

// Spec 06 venv: with the auto engine and no .decree/venv, the venv is
// created before the notebook runs; when papermill cannot be installed (no
// package index here) the run falls back to nbconvert with a notice, and the
// papermill engine fails with an error saying what to do.
func TestEnsureVenvAndFallback(t *testing.T) {
	requireJupyter(t)
	drivertest.RequireTool(t, "python3")
	if FindPapermill(filepath.Join(t.TempDir(), "none")) != "" {
		t.Skip("papermill is on PATH; the fallback cannot be observed")
	}
	root, msgDir, lib := project(t, "noparams.ipynb")
	venv := filepath.Join(root, ".decree", "venv")
	r, _ := lib.Resolve("noparams")
	d := New()
	cfg := driver.TaskConfig{Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir, Params: params(msgDir, nil)}
	t.Setenv("DECREE_VENV", "")
	res, err := driver.Run(context.Background(), d, cfg, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(venv, "bin", "python")); err != nil {
		t.Fatalf("ensure_venv did not create %s: %v", venv, err)
	}
	log, _ := os.ReadFile(filepath.Join(msgDir, "papermill.log"))
	if FindPapermill(venv) == "" {
		if !res.Success() || !bytes.Contains(log, []byte("papermill is not available")) {
			t.Errorf("fallback run: %+v\n%s", res, log)
		}
		cfg.NotebookEngine = EnginePapermill
		_, err := d.Start(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "papermill") || !strings.Contains(err.Error(), "notebook_engine: nbconvert") {
			t.Errorf("papermill engine error = %v; want what failed and how to fix it", err)
		}
	} else if !res.Success() {
		t.Errorf("run with installed papermill failed: %+v\n%s", res, log)
	}
}

// A timed-out notebook leaves nothing running: the kernel runs in a session
// of its own and a %%bash cell's background child lives in that session,
// out of reach of the engine's process group. A papermill stand-in (papermill
// cannot be installed here) starts such a "kernel" with setsid and then
// hangs; when the exit event arrives, the kernel's child must be gone.
func TestTimedOutNotebookKillsKernelSession(t *testing.T) {
	drivertest.RequireTool(t, "bash")
	drivertest.RequireTool(t, "setsid")
	venv := t.TempDir()
	pidfile := filepath.Join(t.TempDir(), "kernel-child.pid")
	os.MkdirAll(filepath.Join(venv, "bin"), 0o755)
	script := "#!/bin/bash\nsetsid bash -c 'echo $$ > " + pidfile + "; while :; do sleep 0.02; done' &\nsleep 60\n"
	if err := os.WriteFile(filepath.Join(venv, "bin", "papermill"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	root, msgDir, lib := project(t, "sleeper.ipynb")
	r, _ := lib.Resolve("sleeper")
	h, err := New().Start(context.Background(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, MessageDir: msgDir, Venv: venv,
		Output: &bytes.Buffer{}, Timeout: 500 * time.Millisecond, KillGrace: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := drivertest.WaitPidFile(t, pidfile, 10*time.Second)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	res, err := h.Wait(context.Background())
	if err != nil || !res.TimedOut {
		t.Fatalf("result %+v, %v; want a timeout", res, err)
	}
	if drivertest.Alive(pid) {
		t.Errorf("the kernel's child %d still runs after the exit event", pid)
	}
}
