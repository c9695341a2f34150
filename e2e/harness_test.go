package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"

	"github.com/decreehq/decree/cmd/decreectl/cli"
)

// binDir holds decreectl, decree-controller and decree-worker built once
// per test binary run by TestMain; empty when the build failed (buildErr).
var (
	binDir   string
	buildErr error
)

func TestMain(m *testing.M) {
	binDir, buildErr = testtool.BinariesErr()
	code := m.Run()
	testtool.Cleanup()
	os.Exit(code)
}

// bin returns the path of a built command, failing the test when the build
// failed.
func bin(t *testing.T, name string) string {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// mode is how decreectl is invoked: in this process or as the built binary.
type mode string

const (
	inProcess mode = "inproc"
	binary    mode = "binary"
)

var modes = []mode{inProcess, binary}

// result is one decreectl invocation's outcome.
type result struct {
	args   []string
	code   int
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("decreectl %s: exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// project is a temporary decree project driven by one mode.
type project struct {
	t    *testing.T
	dir  string
	mode mode
}

// newProject creates a project with config.yml cfg and the given routines
// (name -> bash body, a standard header is prepended).
func newProject(t *testing.T, m mode, cfg string) *project {
	t.Helper()
	return newProjectIn(t, t.TempDir(), m, cfg)
}

// newProjectIn is newProject in an existing empty directory.
func newProjectIn(t *testing.T, dir string, m mode, cfg string) *project {
	t.Helper()
	// Resolve symlinks so paths compare equal to the controller's.
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	p := &project{t: t, dir: dir, mode: m}
	for _, d := range []string{"routines", "migrations", "inbox/done", "inbox/dead", "outbox"} {
		if err := os.MkdirAll(filepath.Join(dir, ".decree", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.write(".decree/config.yml", cfg)
	return p
}

// routineHeader declares the standard parameters like decree's templates.
const routineHeader = `#!/usr/bin/env bash
# %s
#
# A stand-in routine written by the e2e tests.
set -euo pipefail

spec_file="${spec_file:-}"
message_file="${message_file:-}"
message_id="${message_id:-}"
message_dir="${message_dir:-}"
chain="${chain:-}"
seq="${seq:-}"
`

// routine writes .decree/routines/<name>.sh: the standard header, extra
// parameter lines, then body.
func (p *project) routine(name, params, body string) {
	p.t.Helper()
	p.write(".decree/routines/"+name+".sh", fmt.Sprintf(routineHeader, name)+params+"\n"+body+"\n")
}

// script writes a stand-in program (router AI, ...) outside the project
// tree and returns the command that runs it: "bash PATH". Running it
// through bash (which reads the file) rather than exec'ing the file avoids
// ETXTBSY: a file just written can still be open for writing in a child
// forked meanwhile by a parallel test, and execve refuses such a file
// (exit 126).
func (p *project) script(name, body string) string {
	p.t.Helper()
	dir := filepath.Join(filepath.Dir(p.dir), filepath.Base(p.dir)+"-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755); err != nil {
		p.t.Fatal(err)
	}
	return "bash " + path
}

func (p *project) path(rel string) string { return filepath.Join(p.dir, filepath.FromSlash(rel)) }

func (p *project) write(rel, content string) {
	p.t.Helper()
	full := p.path(rel)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *project) read(rel string) string {
	p.t.Helper()
	b, err := os.ReadFile(p.path(rel))
	if err != nil {
		p.t.Fatalf("read %s: %v", rel, err)
	}
	return string(b)
}

func (p *project) exists(rel string) bool {
	_, err := os.Lstat(p.path(rel))
	return err == nil
}

// ctl runs decreectl -C <project> args in the project's mode with stdin.
func (p *project) ctl(stdin string, args ...string) result {
	p.t.Helper()
	return runCtl(p.t, p.mode, p.dir, stdin, args...)
}

// runCtl runs decreectl against dir; the binary runs with the project as
// working directory, the in-process call from the test's.
func runCtl(t *testing.T, m mode, dir, stdin string, args ...string) result {
	t.Helper()
	full := append([]string{"-C", dir}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	res := result{args: full}
	switch m {
	case inProcess:
		res.code = cli.Main(ctx, full, strings.NewReader(stdin), &out, &errb)
	case binary:
		cmd := exec.CommandContext(ctx, bin(t, "decreectl"), full...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=")
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			res.code = ee.ExitCode()
		case err != nil:
			t.Fatalf("run decreectl: %v", err)
		}
	}
	res.stdout, res.stderr = out.String(), errb.String()
	return res
}

// mustCode fails unless r exited with code.
func mustCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d\n%s", code, r)
	}
}

// list returns the names in a .decree/ subdirectory (files only, sorted),
// or nil when it does not exist.
func (p *project) list(rel string) []string {
	p.t.Helper()
	ents, err := os.ReadDir(p.path(rel))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// messages lists the *.md files of a .decree/ inbox directory.
func (p *project) messages(rel string) []string {
	var out []string
	for _, n := range p.list(rel) {
		if strings.HasSuffix(n, ".md") {
			out = append(out, n)
		}
	}
	return out
}

// runs lists run directory names, sorted (chain then seq for seq < 10).
func (p *project) runs() []string {
	ents, _ := os.ReadDir(p.path(".decree/runs"))
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// onlyRun returns the single run id, failing otherwise.
func (p *project) onlyRun() string {
	p.t.Helper()
	r := p.runs()
	if len(r) != 1 {
		p.t.Fatalf("want one run directory, have %v", r)
	}
	return r[0]
}

// runJSON is the part of run.json the tests read.
type runJSON struct {
	MessageID   string `json:"message_id"`
	Routine     string `json:"routine"`
	Trigger     string `json:"trigger"`
	Migration   string `json:"migration"`
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	ExitCode    int    `json:"exit_code"`
	Outcome     string `json:"outcome"`
	Start       string `json:"start"`
	End         string `json:"end"`
	Duration    string `json:"duration"`
	TimeZone    string `json:"time_zone"`
	Details     []struct {
		Attempt  int    `json:"attempt"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
		LogName  string `json:"log_name"`
	} `json:"attempt_details"`
}

func (p *project) runJSON(id string) runJSON {
	p.t.Helper()
	var r runJSON
	if err := json.Unmarshal([]byte(p.read(".decree/runs/"+id+"/run.json")), &r); err != nil {
		p.t.Fatalf("run.json of %s: %v", id, err)
	}
	return r
}

// tree returns the project's files outside .decree/ with their contents.
func (p *project) tree() map[string]string {
	p.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(p.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(p.dir, path)
		if d.IsDir() {
			if rel == ".decree" || rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// sameTree fails when the tree differs from want.
func (p *project) sameTree(want map[string]string) {
	p.t.Helper()
	got := p.tree()
	for k, v := range want {
		if g, ok := got[k]; !ok {
			p.t.Errorf("tree: %s missing", k)
		} else if g != v {
			p.t.Errorf("tree: %s is %q, want %q", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			p.t.Errorf("tree: unexpected file %s", k)
		}
	}
}

// manifest reads a run's manifest.json.
func (p *project) manifest(id string) map[string]struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode"`
} {
	p.t.Helper()
	var m struct {
		Files map[string]struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
			Mode   string `json:"mode"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(p.read(".decree/runs/"+id+"/manifest.json")), &m); err != nil {
		p.t.Fatalf("manifest of %s: %v", id, err)
	}
	return m.Files
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func contains(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%s does not contain %q:\n%s", what, sub, s)
	}
}

func notContains(t *testing.T, what, s, sub string) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Errorf("%s contains %q:\n%s", what, sub, s)
	}
}

// gitApplyCheck runs `git apply args... --check` with the diff on stdin in
// the project.
func (p *project) git(stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = p.dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// socketLive reports whether a unix socket accepts connections.
func socketLive(path string) bool {
	c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
