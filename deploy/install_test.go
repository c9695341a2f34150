package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// commands are the programs under cmd/.
func commands(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 5 {
		t.Fatalf("cmd/ holds only %v", out)
	}
	return out
}

// TestReadmeInstall checks that the README's first screen says how to put
// every program on PATH, the Go way and with make.
func TestReadmeInstall(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	first := strings.Join(lines[:min(len(lines), 50)], "\n")
	for _, c := range commands(t) {
		want := "go install github.com/decreehq/decree/cmd/" + c + "@latest"
		if !strings.Contains(first, want) {
			t.Errorf("the README's first 50 lines lack %q", want)
		}
	}
	if !strings.Contains(first, "make install") {
		t.Errorf("the README's first 50 lines do not mention make install")
	}
}

// TestMakeInstall runs `make install BINDIR=...` and checks every program
// lands there, runnable.
func TestMakeInstall(t *testing.T) {
	testtool.Require(t, "make")
	dir := t.TempDir()
	cmd := exec.Command("make", "-C", "..", "install", "BINDIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, c := range commands(t) {
		fi, err := os.Stat(filepath.Join(dir, c))
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("make install did not install %s: %v", c, err)
		}
	}
	out, err := exec.Command(filepath.Join(dir, "decreectl"), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "init") {
		t.Errorf("the installed decreectl --help: %v\n%s", err, out)
	}
}
