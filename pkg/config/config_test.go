package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefault(t *testing.T) {
	c := Default()
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"max_retries", c.MaxRetries, 3},
		{"max_depth", c.MaxDepth, 10},
		{"parallel", c.Parallel, 1},
		{"max_log_bytes", c.MaxLogBytes, int64(64 << 20)},
		{"default_routine", c.DefaultRoutine, "develop"},
		{"notebook_support", c.NotebookSupport, false},
		{"notebook_engine", c.NotebookEngine, "auto"},
		{"on_migration_failure", c.OnMigrationFailure, "stop"},
		{"migrations_dir", c.MigrationsDir, ".decree/migrations"},
		{"routine_source", c.RoutineSource, ""},
		{"time_zone", c.TimeZone, ""},
		{"commands.router", c.Commands.Router, ""},
		{"hooks", c.Hooks, Hooks{}},
		{"routines", len(c.Routines), 0},
		{"shared_routines", len(c.SharedRoutines), 0},
		{"tree.default_cli", c.Tree.DefaultCLI, "CLAUDE"},
		{"tree.validate_cli", c.Tree.ValidateCLI, "CLAUDE"},
		{"tree.retry_cli", c.Tree.RetryCLI, "CLAUDE"},
		{"tree.retry_count", c.Tree.RetryCount, 3},
		{"tree.timeout_s", c.Tree.TimeoutS, 600},
		{"tree.clis.CLAUDE", c.Tree.CLIs["CLAUDE"], "claude -p <prompt> --output-format json"},
	}
	for _, tc := range checks {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}
	for _, code := range []string{"CLAUDE", "CURSOR", "GEMINI", "COPILOT", "QODO", "AIDER"} {
		if !strings.Contains(c.Tree.CLIs[code], "<prompt>") {
			t.Errorf("default CLI %s = %q lacks <prompt>", code, c.Tree.CLIs[code])
		}
	}
	// Default returns fresh maps each time.
	c.Tree.CLIs["X"] = "x <prompt>"
	c.Routines["a"] = RoutineSettings{}
	if _, ok := Default().Tree.CLIs["X"]; ok || len(Default().Routines) != 0 {
		t.Error("Default shares maps between calls")
	}
}

func TestLoadMissingFile(t *testing.T) {
	c, w, err := Load(filepath.Join(t.TempDir(), "config.yml"))
	if err != nil || len(w) != 0 {
		t.Fatalf("missing file: %v %v", err, w)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("missing file gave %+v", c)
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "read config") {
		t.Fatalf("directory as config: %v", err)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, in := range []string{"", "# only a comment\n", "~\n", "---\n"} {
		c, w, err := Parse("c.yml", []byte(in))
		if err != nil || len(w) != 0 || !reflect.DeepEqual(c, Default()) {
			t.Errorf("Parse(%q) = %+v, %v, %v", in, c, w, err)
		}
	}
}

func ptr(b bool) *bool { return &b }

// TestParseKeys sets every key and checks where it lands.
func TestParseKeys(t *testing.T) {
	home, _ := os.UserHomeDir()
	tests := []struct {
		name  string
		yaml  string
		check func(c *Config) any
		want  any
	}{
		{"commands.router", "commands:\n  router: claude -p\n", func(c *Config) any { return c.Commands.Router }, "claude -p"},
		{"commands.ai_interactive", "commands:\n  ai_interactive: claude\n", func(c *Config) any { return c.Commands.AIInteractive }, "claude"},
		{"max_retries", "max_retries: 5\n", func(c *Config) any { return c.MaxRetries }, 5},
		{"max_attempts alias", "max_attempts: 7\n", func(c *Config) any { return c.MaxRetries }, 7},
		{"both, same value", "max_retries: 4\nmax_attempts: 4\n", func(c *Config) any { return c.MaxRetries }, 4},
		{"max_depth", "max_depth: 3\n", func(c *Config) any { return c.MaxDepth }, 3},
		{"max_log_bytes bytes", "max_log_bytes: 1048576\n", func(c *Config) any { return c.MaxLogBytes }, int64(1 << 20)},
		{"max_log_bytes MiB", "max_log_bytes: 16MiB\n", func(c *Config) any { return c.MaxLogBytes }, int64(16 << 20)},
		{"max_log_bytes MB", "max_log_bytes: 500 MB\n", func(c *Config) any { return c.MaxLogBytes }, int64(500_000_000)},
		{"max_log_bytes no limit", "max_log_bytes: 0\n", func(c *Config) any { return c.MaxLogBytes }, int64(0)},
		{"default_routine", "default_routine: rust-develop\n", func(c *Config) any { return c.DefaultRoutine }, "rust-develop"},
		{"notebook_support", "notebook_support: true\n", func(c *Config) any { return c.NotebookSupport }, true},
		{"notebook_engine", "notebook_engine: nbconvert\n", func(c *Config) any { return c.NotebookEngine }, "nbconvert"},
		{"on_migration_failure", "on_migration_failure: continue\n", func(c *Config) any { return c.OnMigrationFailure }, "continue"},
		{"migrations_dir", "migrations_dir: specs/\n", func(c *Config) any { return c.MigrationsDir }, "specs"},
		{"routine_source absolute", "routine_source: /srv/routines\n", func(c *Config) any { return c.RoutineSource }, "/srv/routines"},
		{"routine_source ~", "routine_source: \"~/.decree/routines\"\n", func(c *Config) any { return c.RoutineSource }, filepath.Join(home, ".decree/routines")},
		{"time_zone", "time_zone: Europe/Berlin\n", func(c *Config) any { return c.TimeZone }, "Europe/Berlin"},
		{"hooks", "hooks:\n  beforeAll: a\n  afterAll: b\n  beforeEach: git-baseline\n  afterEach: git-stash-changes\n  onDeadLetter: notify-failure\n  onWait: notify-chat\n  beforeMerge: gate\n  afterMerge: notify-merge\n",
			func(c *Config) any { return c.Hooks }, Hooks{"a", "b", "git-baseline", "git-stash-changes", "notify-failure", "notify-chat", "gate", "notify-merge"}},
		{"parallel", "parallel: 4\n", func(c *Config) any { return c.Parallel }, 4},
		{"review", "routines:\n  develop:\n    review: true\n", func(c *Config) any { return c.Routines["develop"].Review }, true},
		{"null value keeps default", "max_retries:\nhooks:\n", func(c *Config) any { return c.MaxRetries }, 3},
		{"routines", "routines:\n  develop:\n    enabled: true\n  gmail-sync:\n    enabled: true\n    max_attempts: 5\n  actual-budget:\n    timeout_s: 60\n    deprecated: true\n    requires: {gpu: \"true\", os: linux}\n  bare:\n",
			func(c *Config) any { return c.Routines }, map[string]RoutineSettings{
				"develop":       {Enabled: ptr(true)},
				"gmail-sync":    {Enabled: ptr(true), MaxRetries: 5},
				"actual-budget": {TimeoutS: 60, Deprecated: true, Requires: map[string]string{"gpu": "true", "os": "linux"}},
				"bare":          {},
			}},
		{"shared_routines", "shared_routines:\n  deploy:\n    enabled: true\n  notify:\n    enabled: false\n    max_retries: 2\n",
			func(c *Config) any { return c.SharedRoutines }, map[string]RoutineSettings{
				"deploy": {Enabled: ptr(true)},
				"notify": {Enabled: ptr(false), MaxRetries: 2},
			}},
		{"tree settings", "tree:\n  default_cli: gemini\n  retry_count: 0\n  timeout_s: 30\n  clis:\n    mine: my-ai --ask <prompt>\n    CLAUDE: claude --print <prompt>\n",
			func(c *Config) any {
				return []any{c.Tree.DefaultCLI, c.Tree.ValidateCLI, c.Tree.RetryCLI, c.Tree.RetryCount, c.Tree.TimeoutS, c.Tree.CLIs["MINE"], c.Tree.CLIs["CLAUDE"], c.Tree.CLIs["AIDER"] != ""}
			}, []any{"GEMINI", "GEMINI", "GEMINI", 0, 30, "my-ai --ask <prompt>", "claude --print <prompt>", true}},
		{"routine cost settings", "routines:\n  develop:\n    max_cost_usd: 2.5\n    attempts: [haiku, sonnet, opus]\n  other:\n    max_cost_usd: 3\n    attempts: [x]\n    max_retries: 1\n",
			func(c *Config) any {
				return []any{c.RoutineBudget("develop"), c.AttemptValuesFor("develop"), c.AttemptsFor("develop"), c.RoutineBudget("other"), c.AttemptsFor("other"), c.RoutineBudget("none")}
			}, []any{2.5, []string{"haiku", "sonnet", "opus"}, 3, 3.0, 1, 0.0}},
		{"prices", "prices:\n  GPT-5: {input: 2, output: 20}\n  my-model:\n    input: 0.5\n    cache_read: 0\n",
			func(c *Config) any {
				p, _ := c.PriceTable().Lookup("gpt-5-2025-08-07")
				m, _ := c.PriceTable().Lookup("my-model")
				s, _ := c.PriceTable().Lookup("claude-sonnet-4-5")
				return []float64{p.Input, p.Output, m.Input, s.Input}
			}, []float64{2, 20, 0.5, 3}},
		{"tree validate and retry CLIs", "tree:\n  validate_cli: CURSOR\n  retry_cli: mine\n  clis:\n    mine: m <prompt>\n",
			func(c *Config) any { return []string{c.Tree.DefaultCLI, c.Tree.ValidateCLI, c.Tree.RetryCLI} }, []string{"CLAUDE", "CURSOR", "MINE"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, w, err := Parse("config.yml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if len(w) != 0 {
				t.Fatalf("unexpected warnings %v", w)
			}
			if got := tc.check(c); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // every one must appear in the error
	}{
		{"enum engine", "notebook_engine: fast\n", []string{"config.yml:1: notebook_engine: got fast, allowed: auto, papermill, nbconvert"}},
		{"enum migration failure", "\n\non_migration_failure: skip\n", []string{"config.yml:3: on_migration_failure: got skip, allowed: stop, continue"}},
		{"zero retries", "max_retries: 0\n", []string{"config.yml:1: max_retries: got 0, allowed: a whole number above 0"}},
		{"negative attempts", "max_attempts: -2\n", []string{"config.yml:1: max_attempts: got -2, allowed: a whole number above 0"}},
		{"tiny log limit", "max_log_bytes: 100\n", []string{"config.yml:1: max_log_bytes: got 100, allowed: 0 (no limit) or a size of at least 4KiB"}},
		{"log limit unit", "max_log_bytes: 5 parsecs\n", []string{`max_log_bytes: got "5 parsecs", allowed`}},
		{"text depth", "max_depth: ten\n", []string{"config.yml:1: max_depth: got ten, allowed: a whole number above 0"}},
		{"zero lanes", "parallel: 0\n", []string{"config.yml:1: parallel: got 0, allowed: a whole number above 0"}},
		{"float depth", "max_depth: 2.5\n", []string{"max_depth: got 2.5, allowed: a whole number above 0"}},
		{"list for a number", "max_depth: [1]\n", []string{"max_depth: got a list, allowed: a whole number above 0"}},
		{"bool as yes", "notebook_support: yes\n", []string{"config.yml:1: notebook_support: got yes, allowed: true, false"}},
		{"bool as number", "notebook_support: 1\n", []string{"notebook_support: got 1, allowed: true, false"}},
		{"bad time zone", "time_zone: Mars/Olympus\n", []string{"config.yml:1: time_zone: got Mars/Olympus, allowed: an IANA zone name"}},
		{"routine name with slash", "default_routine: ../evil\n", []string{"default_routine: got ../evil, allowed: a routine name"}},
		{"default routine as mapping", "default_routine: {a: 1}\n", []string{"default_routine: got a mapping, allowed: a routine name"}},
		{"absolute migrations dir", "migrations_dir: /etc\n", []string{"migrations_dir: got /etc, allowed: a relative path inside the project"}},
		{"escaping migrations dir", "migrations_dir: ../x\n", []string{"migrations_dir: got ../x"}},
		{"hooks not a mapping", "hooks: git-baseline\n", []string{"config.yml:1: hooks: got git-baseline, allowed: a mapping of beforeAll, afterAll, beforeEach, afterEach, onDeadLetter, onWait"}},
		{"hook as bool", "hooks:\n  beforeEach: true\n", []string{"config.yml:2: hooks.beforeEach: got true, allowed: a routine name"}},
		{"router as list", "commands:\n  router: [a]\n", []string{"config.yml:2: commands.router: got a list, allowed: a shell command"}},
		{"routine entry not a mapping", "routines:\n  develop: yes\n", []string{"config.yml:2: routines.develop: got yes, allowed: a mapping of enabled, deprecated"}},
		{"routine enabled wrong", "routines:\n  develop:\n    enabled: maybe\n", []string{"config.yml:3: routines.develop.enabled: got maybe, allowed: true, false"}},
		{"routine timeout zero", "routines:\n  develop:\n    timeout_s: 0\n", []string{"config.yml:3: routines.develop.timeout_s: got 0, allowed: a whole number above 0"}},
		{"routine retries text", "shared_routines:\n  x:\n    max_retries: many\n", []string{"config.yml:3: shared_routines.x.max_retries: got many"}},
		{"routine requires list", "routines:\n  x:\n    requires: [gpu]\n", []string{"config.yml:3: routines.x.requires: got a list, allowed: a mapping"}},
		{"unsafe routine name", "routines:\n  ../x:\n    enabled: true\n", []string{"config.yml:2: routines: unsafe path: routine name \"../x\""}},
		{"unsafe bare routine name", "routines:\n  a/b:\n", []string{"config.yml:2: routines: unsafe path"}},
		{"alias clash top", "max_retries: 3\n\nmax_attempts: 5\n", []string{"config.yml:3: max_retries (line 1) is 3 but max_attempts (line 3) is 5"}},
		{"alias clash routine", "routines:\n  d:\n    max_attempts: 2\n    max_retries: 4\n", []string{"routines.d.max_retries (line 4) is 4 but routines.d.max_attempts (line 3) is 2"}},
		{"tree retry count negative", "tree:\n  retry_count: -1\n", []string{"config.yml:2: tree.retry_count: got -1, allowed: a whole number, 0 or more"}},
		{"tree timeout", "tree:\n  timeout_s: 0\n", []string{"tree.timeout_s: got 0, allowed: a whole number above 0"}},
		{"tree unknown cli", "tree:\n  default_cli: chatgpt\n", []string{"config.yml:2: tree.default_cli: got chatgpt, allowed: AIDER, CLAUDE, COPILOT, CURSOR, GEMINI, QODO"}},
		{"tree template without prompt", "tree:\n  clis:\n    X: run-it\n", []string{"config.yml:3: tree.clis.X: got run-it, allowed: a command line containing <prompt>"}},
		{"budget zero", "routines:\n  d:\n    max_cost_usd: 0\n", []string{"config.yml:3: routines.d.max_cost_usd: got 0, allowed: an amount of US dollars above 0"}},
		{"budget text", "routines:\n  d:\n    max_cost_usd: lots\n", []string{"routines.d.max_cost_usd: got lots"}},
		{"attempts not a list", "routines:\n  d:\n    attempts: opus\n", []string{"config.yml:3: routines.d.attempts: got opus, allowed: a list of one value per attempt"}},
		{"attempts empty", "routines:\n  d:\n    attempts: []\n", []string{"routines.d.attempts: got a list, allowed: a list of one value per attempt"}},
		{"attempts with a comma", "routines:\n  d:\n    attempts: [\"a,b\"]\n", []string{"routines.d.attempts: got \"a,b\", allowed: values without commas"}},
		{"attempts against max_retries", "routines:\n  d:\n    attempts: [a, b]\n    max_retries: 3\n", []string{"config.yml:4: routines.d.max_retries: got 3, allowed: nothing, or the length of routines.d.attempts (2)"}},
		{"negative price", "prices:\n  m:\n    input: -1\n", []string{"config.yml:3: prices.m.input: got -1, allowed: US dollars per million tokens"}},
		{"duplicate key", "max_depth: 3\nmax_depth: 4\n", []string{"config.yml:2: max_depth: given twice (also on line 1)"}},
		{"root is a list", "- a\n", []string{"config.yml:1: config: got a list"}},
		{"invalid YAML", "a: b: c\n", []string{"config.yml:1: invalid YAML"}},
		{"several errors reported together", "max_depth: 0\nnotebook_engine: x\n", []string{"config.yml:1: max_depth", "config.yml:2: notebook_engine"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := Parse("config.yml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; got %+v", c)
			}
			if c != nil {
				t.Error("a config was returned along with the error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestUnknownKeyWarnings(t *testing.T) {
	in := `max_retries: 3
colour: blue
max_Depth: 4
commands:
  router: x
  planning: y
hooks:
  before_each: a
routines:
  develop:
    enabled: true
    timeout: 5
tree:
  clis: {}
  model: x
`
	c, w, err := Parse("cfg.yml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cfg.yml:2: unknown key colour is ignored; known keys here: commands",
		"cfg.yml:3: unknown key max_Depth is ignored; did you mean max_depth?",
		"cfg.yml:6: unknown key commands.planning is ignored",
		"cfg.yml:8: unknown key hooks.before_each is ignored; did you mean hooks.beforeEach?",
		"cfg.yml:12: unknown key routines.develop.timeout is ignored",
		"cfg.yml:15: unknown key tree.model is ignored",
	}
	if len(w) != len(want) {
		t.Fatalf("got %d warnings: %v", len(w), w)
	}
	for i := range want {
		if !strings.HasPrefix(w[i].String(), want[i]) {
			t.Errorf("warning %d = %q, want prefix %q", i, w[i].String(), want[i])
		}
		if w[i].File != "cfg.yml" {
			t.Errorf("warning %d file %q", i, w[i].File)
		}
	}
	// Known keys around the unknown ones still apply.
	if c.MaxRetries != 3 || c.Commands.Router != "x" || !c.Routines["develop"].IsEnabled(false) || c.MaxDepth != 10 {
		t.Fatalf("config %+v", c)
	}
}

func TestAttemptsFor(t *testing.T) {
	c, _, err := Parse("c.yml", []byte(`max_attempts: 4
routines:
  gmail-sync:
    max_attempts: 5
  plain:
    enabled: true
shared_routines:
  deploy:
    max_retries: 2
  gmail-sync:
    max_retries: 9
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]int{"gmail-sync": 5, "plain": 4, "deploy": 2, "unknown": 4}
	for r, want := range tests {
		if got := c.AttemptsFor(r); got != want {
			t.Errorf("AttemptsFor(%q) = %d, want %d", r, got, want)
		}
	}
	if got := Default().AttemptsFor("x"); got != 3 {
		t.Errorf("default attempts %d", got)
	}
}

func TestRoutineSettingsFor(t *testing.T) {
	c, _, err := Parse("c.yml", []byte("routines:\n  a:\n    timeout_s: 60\nshared_routines:\n  a:\n    enabled: true\n  b:\n    enabled: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.RoutineSettingsFor("a", false); s.TimeoutS != 60 || s.Enabled != nil || !s.IsEnabled(true) {
		t.Errorf("project a = %+v", s)
	}
	if s := c.RoutineSettingsFor("a", true); s.TimeoutS != 0 || !s.IsEnabled(false) {
		t.Errorf("shared a = %+v", s)
	}
	if s := c.RoutineSettingsFor("b", true); s.Enabled == nil || *s.Enabled {
		t.Errorf("shared b = %+v", s)
	}
	if s := c.RoutineSettingsFor("missing", false); !reflect.DeepEqual(s, RoutineSettings{}) || s.IsEnabled(false) {
		t.Errorf("missing = %+v", s)
	}
}

func TestLocation(t *testing.T) {
	tests := []struct {
		tz   string
		want string
	}{
		{"", localZone().String()},
		{"Local", localZone().String()},
		{"UTC", "UTC"},
		{"America/New_York", "America/New_York"},
	}
	for _, tc := range tests {
		c := Default()
		c.TimeZone = tc.tz
		loc, err := c.Location()
		if err != nil || loc.String() != tc.want {
			t.Errorf("Location(%q) = %v, %v", tc.tz, loc, err)
		}
	}
	c := Default()
	c.TimeZone = "Nowhere/Land"
	if _, err := c.Location(); err == nil || !strings.Contains(err.Error(), "IANA") {
		t.Errorf("bad zone: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(p, []byte("max_depth: 2\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, w, err := Load(p)
	if err != nil || c.MaxDepth != 2 || len(w) != 1 || w[0].File != p || w[0].Line != 2 {
		t.Fatalf("Load = %+v %v %v", c, w, err)
	}
}

func TestEmptyHooksMeanNone(t *testing.T) {
	for _, src := range []string{
		"hooks:\n  beforeEach: \"\"\n  afterEach: ''\n  onDeadLetter:\n",
		"hooks:\n  beforeAll: ~\n",
	} {
		c, warns, err := Parse("config.yml", []byte(src))
		if err != nil || len(warns) != 0 {
			t.Fatalf("%q: err=%v warns=%v", src, err, warns)
		}
		if c.Hooks != (Hooks{}) {
			t.Fatalf("%q: hooks = %+v, want none", src, c.Hooks)
		}
	}
}

func TestLocationNamesTheMachineZone(t *testing.T) {
	t.Setenv("TZ", "America/New_York")
	loc, err := Default().Location()
	if err != nil {
		t.Fatal(err)
	}
	if loc.String() != "America/New_York" {
		t.Fatalf("zone = %q, want the IANA name from $TZ", loc.String())
	}
}

func TestTreeSettingsWireRoundTrip(t *testing.T) {
	c, _, err := Parse("config.yml", []byte("tree:\n  default_cli: gemini\n  retry_count: 0\n  timeout_s: 7\n  clis:\n    mine: m <prompt>\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := TreeSettingsFromProto(c.Tree.Proto())
	if !reflect.DeepEqual(got, c.Tree) {
		t.Errorf("round trip: got %+v, want %+v", got, c.Tree)
	}
	if d := TreeSettingsFromProto(nil); !reflect.DeepEqual(d, Default().Tree) {
		t.Errorf("nil settings: got %+v, want the defaults", d)
	}
}
