package prompt

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/routine"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixture loads testdata/project, whose routine_source is testdata/shared.
func fixture(t *testing.T) (Source, Project) {
	t.Helper()
	root, err := filepath.Abs("testdata/project")
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(root, ".decree", "config.yml")
	cfg, warns, err := config.Load(cfgFile)
	if err != nil || len(warns) > 0 {
		t.Fatalf("fixture config: %v %v", err, warns)
	}
	shared := filepath.Join(root, cfg.RoutineSource)
	lib := routine.Library{Dir: filepath.Join(root, ".decree", "routines"), SharedDir: shared}
	src := Source{Dir: filepath.Join(root, ".decree", "prompts"), SharedDir: SharedDir(shared)}
	return src, Project{Root: root, Config: cfg, ConfigFile: cfgFile,
		ProcessedFile: filepath.Join(root, ".decree", "processed.md"), Routines: lib}
}

func TestRenderGolden(t *testing.T) {
	src, proj := fixture(t)
	ctx, err := Gather(proj)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"spec", "review", "deploy"} {
		t.Run(name, func(t *testing.T) {
			tmpl, err := src.Find(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(ctx)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", name+".txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("render %s:\n%s\nwant (%s):\n%s", name, got, golden, want)
			}
		})
	}
}

func TestListAndPrecedence(t *testing.T) {
	src, _ := fixture(t)
	list, err := src.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tm := range list {
		got = append(got, tm.Name+":"+map[bool]string{false: "project", true: "shared"}[tm.Shared]+":"+tm.Description())
	}
	want := []string{"deploy:shared:Deploy checklist", "review:project:Review (project copy)", "spec:project:Write a spec"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("List = %q, want %q", got, want)
	}
	if tm, err := src.Find("review.md"); err != nil || tm.Shared {
		t.Errorf("Find(review.md) = %+v %v, want the project copy", tm, err)
	}
	for _, bad := range []string{"nope", "../x", ""} {
		if _, err := src.Find(bad); err == nil {
			t.Errorf("Find(%q) succeeded", bad)
		}
	}
	if _, err := src.Find("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "decreectl prompt") {
		t.Errorf("Find(nope) = %v, want ErrNotFound with a hint", err)
	}
}

// An empty project renders notes instead of empty lists.
func TestGatherEmptyProject(t *testing.T) {
	root := t.TempDir()
	cfg, _, _ := config.Load(filepath.Join(root, "config.yml"))
	ctx, err := Gather(Project{Root: root, Config: cfg, ConfigFile: filepath.Join(root, "config.yml"),
		ProcessedFile: filepath.Join(root, "processed.md"), Routines: routine.Library{Dir: filepath.Join(root, "routines")}})
	if err != nil {
		t.Fatal(err)
	}
	got := Render("{migrations}|{routines}|{processed}|{config}", ctx)
	want := "(no migrations yet in .decree/migrations)|(no enabled routines)|(no migration processed yet)|(no .decree/config.yml: every setting has its default)"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestClipboard(t *testing.T) {
	on := func(names ...string) func(string) (string, error) {
		return func(n string) (string, error) {
			for _, x := range names {
				if x == n {
					return "/bin/" + n, nil
				}
			}
			return "", errors.New("not found")
		}
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name string
		env  func(string) string
		look func(string) (string, error)
		want string // "" = ErrNoClipboard
	}{
		{"wayland", env("WAYLAND_DISPLAY", "wayland-0", "DISPLAY", ":0"), on("wl-copy", "xclip"), "/bin/wl-copy"},
		{"x11 xclip", env("DISPLAY", ":0"), on("wl-copy", "xclip", "xsel"), "/bin/xclip -selection clipboard"},
		{"x11 xsel", env("DISPLAY", ":0"), on("xsel"), "/bin/xsel --clipboard --input"},
		{"macOS", env(), on("pbcopy"), "/bin/pbcopy"},
		{"no display", env(), on("wl-copy", "xclip", "xsel"), ""},
		{"nothing installed", env("DISPLAY", ":0"), on(), ""},
	}
	for _, tt := range tests {
		argv, err := Clipboard(tt.env, tt.look)
		if tt.want == "" {
			if !errors.Is(err, ErrNoClipboard) || !strings.Contains(err.Error(), "--print") {
				t.Errorf("%s: %v %v, want ErrNoClipboard", tt.name, argv, err)
			}
			continue
		}
		if err != nil || strings.Join(argv, " ") != tt.want {
			t.Errorf("%s: %v %v, want %s", tt.name, argv, err, tt.want)
		}
	}
}
