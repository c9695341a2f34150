package routine

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/decreehq/decree/pkg/config"
)

func boolp(b bool) *bool { return &b }

func TestSync(t *testing.T) {
	proj := mkRoutines(t, "develop.sh", "rust-develop.sh", "nb.ipynb")
	shared := mkRoutines(t, "deploy.sh", "notify.sh")
	lib := Library{Dir: proj, SharedDir: shared}

	routines := map[string]config.RoutineSettings{
		"develop": {Enabled: boolp(false), TimeoutS: 60},    // kept as the user set it
		"gone":    {Enabled: boolp(true)},                   // file vanished
		"back":    {Enabled: boolp(true), Deprecated: true}, // file returns below
	}
	os.WriteFile(filepath.Join(proj, "back.sh"), []byte("echo\n"), 0o644)

	rep, err := Sync(lib, routines, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Added, []string{"rust-develop"}) {
		t.Errorf("Added = %v", rep.Added)
	}
	if !reflect.DeepEqual(rep.AddedShared, []string{"deploy", "notify"}) {
		t.Errorf("AddedShared = %v", rep.AddedShared)
	}
	if !reflect.DeepEqual(rep.Deprecated, []string{"gone"}) || !reflect.DeepEqual(rep.Restored, []string{"back"}) {
		t.Errorf("Deprecated = %v, Restored = %v", rep.Deprecated, rep.Restored)
	}
	if s := routines["rust-develop"]; s.Enabled == nil || !*s.Enabled {
		t.Errorf("new project routine not enabled: %+v", s)
	}
	if s := routines["develop"]; *s.Enabled || s.TimeoutS != 60 || s.Deprecated {
		t.Errorf("existing settings changed: %+v", s)
	}
	if !routines["gone"].Deprecated || routines["back"].Deprecated {
		t.Errorf("deprecation marks wrong: gone=%+v back=%+v", routines["gone"], routines["back"])
	}
	if _, ok := routines["nb"]; ok {
		t.Errorf("notebook registered although notebook support is off")
	}
	for _, n := range []string{"deploy", "notify"} {
		s := rep.Shared[n]
		if s.Enabled == nil || *s.Enabled {
			t.Errorf("new shared routine %s should be explicitly disabled: %+v", n, s)
		}
	}

	// Second run: nothing to do.
	rep2, err := Sync(lib, routines, rep.Shared)
	if err != nil || rep2.Changed() {
		t.Errorf("second sync changed things: %+v, %v", rep2, err)
	}

	// A shared file disappears.
	os.Remove(filepath.Join(shared, "notify.sh"))
	rep3, _ := Sync(lib, routines, rep.Shared)
	if !reflect.DeepEqual(rep3.Deprecated, []string{"shared:notify"}) || !rep.Shared["notify"].Deprecated {
		t.Errorf("shared removal: %+v", rep3)
	}
}

func TestSyncListErrorLeavesRegistry(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	routines := map[string]config.RoutineSettings{"develop": {}}
	if _, err := Sync(Library{Dir: notDir}, routines, nil); err == nil {
		t.Fatal("Sync over a file instead of a directory succeeded")
	}
	if routines["develop"].Deprecated {
		t.Error("a listing error deprecated routines")
	}
}

func TestEnabled(t *testing.T) {
	reg := map[string]config.RoutineSettings{"off": {Enabled: boolp(false)}, "old": {Deprecated: true}}
	sh := map[string]config.RoutineSettings{"on": {Enabled: boolp(true)}, "unset": {}}
	tests := []struct {
		r    Routine
		want bool
	}{
		{Routine{Name: "new"}, true},
		{Routine{Name: "off"}, false},
		{Routine{Name: "old"}, false},
		{Routine{Name: "on", Shared: true}, true},
		{Routine{Name: "unset", Shared: true}, false},
		{Routine{Name: "absent", Shared: true}, false},
	}
	for _, tt := range tests {
		if got := Enabled(tt.r, reg, sh); got != tt.want {
			t.Errorf("Enabled(%+v) = %v, want %v", tt.r, got, tt.want)
		}
	}
}
