package deploy

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// entrypointEnv prepares a run of docker-entrypoint.sh with real bash and
// stand-ins for npm and decreectl (scripts that record their arguments):
// no Docker engine runs here, and the script is what the image runs.
type entrypointEnv struct {
	t                         *testing.T
	work, home, bin, npmCalls string
	ctlCalls, tmp             string
}

func newEntrypointEnv(t *testing.T) *entrypointEnv {
	t.Helper()
	e := &entrypointEnv{t: t, work: t.TempDir(), home: filepath.Join(t.TempDir(), "home"), bin: t.TempDir(), tmp: t.TempDir()}
	e.npmCalls = filepath.Join(e.bin, "npm.calls")
	e.ctlCalls = filepath.Join(e.bin, "decreectl.calls")
	// npm stand-in: records its arguments and "installs" the CLI as an
	// executable in the npm prefix, as npm install --global does.
	e.stub("npm", `echo "$*" >> `+e.npmCalls+`
case "$*" in
  *claude-code*) tool=claude ;; *opencode-ai*) tool=opencode ;; *@github/copilot*) tool=copilot ;;
esac
mkdir -p "$NPM_CONFIG_PREFIX/bin" && printf '#!/bin/sh\n' > "$NPM_CONFIG_PREFIX/bin/$tool" && chmod +x "$NPM_CONFIG_PREFIX/bin/$tool"`)
	e.stub("decreectl", `echo "$*" >> `+e.ctlCalls)
	return e
}

func (e *entrypointEnv) stub(name, body string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.bin, name), []byte("#!/usr/bin/env bash\n# stand-in written by the deploy tests\n"+body+"\n"), 0o755); err != nil {
		e.t.Fatal(err)
	}
}

// run runs the entrypoint with env and args; it returns the exit code,
// the output, and the recorded npm and decreectl calls.
func (e *entrypointEnv) run(env []string, args ...string) (int, string, []string, []string) {
	e.t.Helper()
	os.Remove(e.npmCalls)
	os.Remove(e.ctlCalls)
	cmd := exec.Command("bash", append([]string{"docker-entrypoint.sh"}, args...)...)
	cmd.Env = append([]string{"PATH=" + e.bin + ":/usr/bin:/bin", "HOME=" + e.home, "TMPDIR=" + e.tmp, "DECREE_WORK=" + e.work,
		"DECREE_ROUTINES=" + filepath.Join(e.work, "no-routines")}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, string(out), lines(e.npmCalls), lines(e.ctlCalls)
}

func lines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestEntrypoint(t *testing.T) {
	testtool.Require(t, "bash")
	e := newEntrypointEnv(t)
	w := "-C " + e.work
	cases := []struct {
		name     string
		env      []string
		args     []string
		code     int
		npm, ctl []string
		out      string
	}{
		{"daemon with claude", []string{"DECREE_AI=claude", "DECREE_DAEMON=true", "DECREE_INTERVAL=5"}, nil, 0,
			[]string{"install --global --no-audit --no-fund @anthropic-ai/claude-code"}, []string{w + " init --ai claude", w + " daemon --interval 5"}, ""},
		{"claude already installed by the run before", []string{"DECREE_AI=claude", "DECREE_DAEMON=true"}, nil, 0,
			nil, []string{w + " init --ai claude", w + " daemon --interval 2"}, "claude is installed"},
		{"opencode, one process run", []string{"DECREE_AI=opencode"}, nil, 0,
			[]string{"install --global --no-audit --no-fund opencode-ai"}, []string{w + " init --ai opencode", w + " process"}, ""},
		{"copilot", []string{"DECREE_AI=copilot", "DECREE_DAEMON=false"}, nil, 0,
			[]string{"install --global --no-audit --no-fund @github/copilot"}, []string{w + " init --ai copilot", w + " process"}, ""},
		{"no AI, a command", nil, []string{"cron", "list"}, 0, nil, []string{w + " init", w + " cron list"}, ""},
		{"unknown AI", []string{"DECREE_AI=cursor"}, nil, 2, nil, nil, "DECREE_AI=cursor is not supported; use claude, opencode or copilot"},
		{"bad DECREE_DAEMON", []string{"DECREE_DAEMON=maybe"}, nil, 2, nil, nil, "DECREE_DAEMON=maybe: use true or false"},
		{"no project", []string{"DECREE_WORK=/nonexistent/work"}, nil, 2, nil, nil, "/nonexistent/work does not exist: mount the project there"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, npm, ctl := e.run(c.env, c.args...)
			if code != c.code || !slices.Equal(npm, c.npm) || !slices.Equal(ctl, c.ctl) || !strings.Contains(out, c.out) {
				t.Errorf("exit %d, npm %q, decreectl %q, output:\n%s\nwant exit %d, npm %q, decreectl %q, output with %q",
					code, npm, ctl, out, c.code, c.npm, c.ctl, c.out)
			}
		})
	}

	// Shared routines: reachable as ~/.decree/routines, with a hint when
	// config.yml does not use them.
	shared := filepath.Join(t.TempDir(), "routines")
	os.MkdirAll(shared, 0o755)
	os.MkdirAll(filepath.Join(e.work, ".decree"), 0o755)
	os.WriteFile(filepath.Join(e.work, ".decree", "config.yml"), []byte("max_retries: 2\n"), 0o644)
	_, out, _, _ := e.run([]string{"DECREE_ROUTINES=" + shared})
	if target, err := os.Readlink(filepath.Join(e.home, ".decree", "routines")); err != nil || target != shared {
		t.Errorf("~/.decree/routines -> %q (%v), want %s", target, err, shared)
	}
	if !strings.Contains(out, `add routine_source: "~/.decree/routines"`) {
		t.Errorf("no hint about routine_source:\n%s", out)
	}

	// A HOME the user cannot write (compose's arbitrary uid) falls back.
	_, out, _, ctl := e.run([]string{"HOME=/proc/decree-home", "DECREE_AI=claude"})
	if _, err := os.Stat(filepath.Join(e.tmp, "decree-home", ".npm-global", "bin", "claude")); err != nil || len(ctl) != 2 {
		t.Errorf("unwritable HOME: decreectl %q npm %q\n%s", ctl, lines(e.npmCalls), out)
	}
}

// TestEntrypointDaemon runs the entrypoint with the real decreectl on an
// empty project: it creates .decree/, registers the shared routines of
// /routines through routine_source "~/.decree/routines", serves the project
// as a daemon, and exits 0 on SIGTERM (decreectl replaced the script).
func TestEntrypointDaemon(t *testing.T) {
	testtool.Require(t, "bash")
	bin := testtool.Binaries(t)
	work := t.TempDir()
	home := filepath.Join(t.TempDir(), "home")
	shared := t.TempDir()
	os.WriteFile(filepath.Join(shared, "notify.sh"), []byte("#!/usr/bin/env bash\n# Notify\necho notified\n"), 0o755)
	os.MkdirAll(filepath.Join(work, ".decree"), 0o755)
	os.WriteFile(filepath.Join(work, ".decree", "config.yml"), []byte("routine_source: \"~/.decree/routines\"\n"), 0o644)
	cmd := exec.Command("bash", "docker-entrypoint.sh")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+home, "DECREE_WORK="+work, "DECREE_ROUTINES="+shared,
		"DECREE_DAEMON=true", "DECREE_INTERVAL=0.5", "DECREE_AI=")
	p := testtool.Start(t, "entrypoint", cmd)
	sock := filepath.Join(work, ".decree", "decree.sock")
	testtool.WaitFor(t, 30*time.Second, "the daemon's socket", func() bool {
		select {
		case <-p.Done():
			t.Fatalf("the entrypoint exited early:\n%s", p.Out)
		default:
		}
		c, err := net.DialTimeout("unix", sock, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if _, err := os.Stat(filepath.Join(work, ".decree", "routines", "develop.sh")); err != nil {
		t.Errorf("init did not run: %v", err)
	}
	cfg, _ := os.ReadFile(filepath.Join(work, ".decree", "config.yml"))
	if !regexp.MustCompile(`(?s)shared_routines:\s+notify:`).Match(cfg) {
		t.Errorf("the shared routine was not registered:\n%s", cfg)
	}
	if !strings.Contains(p.Out.String(), "inbox every 500ms") {
		t.Errorf("DECREE_INTERVAL not passed:\n%s", p.Out)
	}
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", code, p.Out)
	}
}

// TestDockerExample checks examples/docker/compose.yaml against the
// Dockerfile, the entrypoint's variables and decreectl's flags.
func TestDockerExample(t *testing.T) {
	var c composeFile
	readYAML(t, "../examples/docker/compose.yaml", &c)
	s, ok := c.Services["decree"]
	if !ok {
		t.Fatal("examples/docker/compose.yaml has no decree service")
	}
	if !slices.Contains(dockerTargets(t), s.Build.Target) || s.Build.Target != "decree" {
		t.Errorf("the example builds target %q; want the Dockerfile's decree stage", s.Build.Target)
	}
	if s.Build.Dockerfile != "deploy/Dockerfile" || s.Build.Context != "../.." {
		t.Errorf("the example builds %s from %s; want deploy/Dockerfile from the repository root (../..)", s.Build.Dockerfile, s.Build.Context)
	}
	var mounts []string
	mountRe := regexp.MustCompile(`^(.+):(/[^:]*)(?::ro)?$`)
	for _, v := range s.Volumes {
		m := mountRe.FindStringSubmatch(v)
		if m == nil {
			t.Errorf("cannot read mount %q", v)
			continue
		}
		mounts = append(mounts, m[2])
		if !strings.HasPrefix(m[1], "${") {
			t.Errorf("mount %s: make its source a variable with a default", v)
		}
	}
	for _, want := range []string{"/work", "/routines"} {
		if !slices.Contains(mounts, want) {
			t.Errorf("the example mounts %v, not %s", mounts, want)
		}
	}
	if ai := s.Environment["DECREE_AI"]; !slices.Contains([]string{"claude", "opencode", "copilot"}, ai) {
		t.Errorf("DECREE_AI=%q", ai)
	}
	if s.Environment["DECREE_DAEMON"] != "true" || s.Environment["DECREE_INTERVAL"] == "" {
		t.Errorf("the example does not run the daemon: %v", s.Environment)
	}
	if s.User == "" {
		t.Error("the example runs as the image's user; the project belongs to the host user")
	}
	for _, dir := range []string{"../examples/docker/project", "../examples/docker/routines"} {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("%s is mounted by default but missing", dir)
		}
	}
	// The interval the example sets and the flags the entrypoint passes
	// are accepted by decreectl.
	bin := filepath.Join(testtool.Binaries(t), "decreectl")
	if out, err := exec.Command(bin, "daemon", "--interval", s.Environment["DECREE_INTERVAL"], "--help").CombinedOutput(); err != nil {
		t.Errorf("decreectl daemon --interval %s: %v\n%s", s.Environment["DECREE_INTERVAL"], err, out)
	}
	script, err := os.ReadFile("docker-entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`decreectl -C "\$work" (\w[\w-]*)((?: --[a-z-]+)*)`).FindAllStringSubmatch(string(script), -1) {
		out, _ := exec.Command(bin, m[1], "--help").CombinedOutput()
		for _, f := range strings.Fields(m[2]) {
			if !strings.Contains(string(out), f+" ") {
				t.Errorf("the entrypoint passes %s to decreectl %s, which does not accept it:\n%s", f, m[1], out)
			}
		}
	}
	// The Dockerfile's decree stage uses the entrypoint and the variables.
	df, _ := os.ReadFile("Dockerfile")
	for _, want := range []string{"deploy/docker-entrypoint.sh", "DECREE_DAEMON=false", "DECREE_INTERVAL=2", "NPM_CONFIG_PREFIX", "VOLUME [\"/work\"]"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
