package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/plugin"
	"github.com/decreehq/decree/pkg/tree/treedriver"
)

// TestPlugin builds the plugin, launches it as the worker does and runs a
// tree through it: the tree: settings travel in the request (the CLI
// template named there is the one run).
func TestPlugin(t *testing.T) {
	testtool.Require(t, "bash")
	dir := t.TempDir()
	bin := filepath.Join(dir, plugin.BinaryPrefix+treedriver.Name)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d, err := plugin.Launch(context.Background(), bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Name() != "tree" || strings.Join(d.Extensions(), " ") != ".tree.json .tree.csv" {
		t.Errorf("describe: %s %v", d.Name(), d.Extensions())
	}
	chart := filepath.Join(dir, "hello.tree.csv")
	if err := os.WriteFile(chart, []byte("Id,Name,Line Source,Line Destination,Tags,Text Area 1\n1,Document,,,,Greeter\n3,Process,,,NoValidation,Say hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	desc, _, err := d.Inspect(context.Background(), chart)
	if err != nil || !strings.Contains(desc, `Decision tree "Greeter"`) || !strings.Contains(desc, "Say hello") {
		t.Errorf("inspect: %q %v", desc, err)
	}
	settings := config.Default().Tree
	settings.CLIs["ECHO"] = `printf 'from the ECHO template\n{"completed": true}\n' <prompt>`
	settings.DefaultCLI = "ECHO"
	var out bytes.Buffer
	res, err := driver.Run(context.Background(), d, driver.TaskConfig{Routine: "hello", Path: chart, Workdir: dir, MessageDir: dir,
		Tree: &settings, KillGrace: time.Second}, &out)
	if err != nil || !res.Success() {
		t.Fatalf("result %+v err %v\n%s", res, err, out.String())
	}
	if !strings.Contains(out.String(), "from the ECHO template") {
		t.Errorf("output:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "tree.json")); err != nil {
		t.Error(err)
	}
}
