package notebook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/layout"
)

// VenvDir returns the venv notebooks use: cfg.Venv, else $DECREE_VENV, else
// <Workdir>/.decree/venv.
func VenvDir(cfg driver.TaskConfig) string {
	if cfg.Venv != "" {
		return cfg.Venv
	}
	if v := os.Getenv("DECREE_VENV"); v != "" {
		return v
	}
	return layout.Path(cfg.Workdir, layout.Venv)
}

// FindPapermill looks for papermill in the venv's bin directory, then on
// PATH. It returns "" when there is none.
func FindPapermill(venv string) string {
	p := filepath.Join(venv, "bin", "papermill")
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p
	}
	if p, err := exec.LookPath("papermill"); err == nil {
		return p
	}
	return ""
}

// EnsureVenv makes sure venv exists and holds papermill and ipykernel: it
// creates it with `python3 -m venv` when missing and pip-installs the two
// packages when papermill is absent. It is only ever called for notebook
// routines. The error says which step failed and how to fix it.
func EnsureVenv(ctx context.Context, python, venv string) error {
	if python == "" {
		python = "python3"
	}
	if _, err := os.Stat(filepath.Join(venv, "bin", "python")); err != nil {
		if err := os.MkdirAll(filepath.Dir(venv), 0o755); err != nil {
			return fmt.Errorf("create venv %s: %w", venv, err)
		}
		out, err := exec.CommandContext(ctx, python, "-m", "venv", venv).CombinedOutput()
		if err != nil {
			return fmt.Errorf("create venv %s with `%s -m venv`: %w: %s; install python3-venv (Debian) or point DECREE_VENV at an existing venv", venv, python, err, tail(out))
		}
	}
	if _, err := os.Stat(filepath.Join(venv, "bin", "papermill")); err == nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, filepath.Join(venv, "bin", "python"), "-m", "pip", "install",
		"--disable-pip-version-check", "--retries", "0", "--timeout", "15", "papermill", "ipykernel").CombinedOutput()
	if err != nil {
		return fmt.Errorf("install papermill and ipykernel into venv %s: %w: %s; run `%s/bin/pip install papermill ipykernel` where a package index is reachable, point DECREE_VENV at a venv that has them, or set notebook_engine: nbconvert (needs jupyter nbconvert and ipykernel, e.g. apt install jupyter-nbconvert python3-ipykernel)", venv, err, tail(out), venv)
	}
	return nil
}

// tail returns the last few lines of a command's output, on one line.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(bytes.ToValidUTF8(out, nil))), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// jupyterPython finds the Python interpreter that runs jupyter nbconvert
// (from the shebang of jupyter-nbconvert or jupyter on PATH), which is the
// one that can import nbclient and nbformat.
func jupyterPython() (string, error) {
	for _, name := range []string{"jupyter-nbconvert", "jupyter"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		b := make([]byte, 256)
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		n, _ := f.Read(b)
		f.Close()
		line, _, _ := strings.Cut(string(b[:n]), "\n")
		if !strings.HasPrefix(line, "#!") {
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, "#!"))
		if len(fields) == 0 {
			continue
		}
		if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
			if p, err := exec.LookPath(fields[len(fields)-1]); err == nil {
				return p, nil
			}
			continue
		}
		return fields[0], nil
	}
	return "", fmt.Errorf("jupyter nbconvert not found on PATH; install it (Debian: apt install jupyter-nbconvert python3-ipykernel) or install papermill into the notebook venv")
}
