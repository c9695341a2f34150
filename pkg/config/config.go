// Package config reads and writes .decree/config.yml.
//
// Load and Parse return a Config with every default filled in (see Default),
// the warnings worth showing the user (unknown keys, each with file and line)
// and an error for every invalid value, in the form
//
//	.decree/config.yml:7: notebook_engine: got fast, allowed: auto, papermill, nbconvert
//
// A missing file is not an error: it yields Default(). max_attempts is
// accepted wherever max_retries is (top level and per routine); both are the
// total number of attempts, and giving both with different values is an
// error. A key given with an empty (null) value keeps its default.
//
// WriteRegistry rewrites only the routines: and shared_routines: blocks of
// the file, keeping every other byte (comments, blank lines, key order) as
// it was.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	_ "time/tzdata" // time_zone must work on hosts without a zoneinfo database

	"github.com/decreehq/decree/pkg/layout"
)

// Defaults.
const (
	DefaultMaxRetries         = 3
	DefaultMaxDepth           = 10
	DefaultRoutineName        = "develop"
	DefaultNotebookEngine     = "auto"
	DefaultOnMigrationFailure = "stop"
	DefaultMigrationsDir      = layout.Dir + "/" + layout.Migrations
	DefaultTreeCLI            = "CLAUDE"
	DefaultTreeRetryCount     = 3
	DefaultTreeTimeoutS       = 600
	// PromptPlaceholder marks where a tree CLI template takes the prompt.
	PromptPlaceholder = "<prompt>"
)

// Allowed enum values.
var (
	NotebookEngines     = []string{"auto", "papermill", "nbconvert"}
	MigrationFailureOps = []string{"stop", "continue"}
)

// DefaultCLIs are the built-in tree CLI templates: each runs the tool once,
// headless, with the prompt as one argument in place of <prompt>, and prints
// the answer on stdout. Users override or add codenames under tree.clis.
//
//	CLAUDE   claude -p <prompt> --output-format json (Claude Code print mode; the
//	         engine reads the answer and records the call's usage)
//	CURSOR   cursor-agent -p <prompt> --output-format text
//	GEMINI   gemini -p <prompt>                      (Gemini CLI non-interactive)
//	COPILOT  copilot -p <prompt> --allow-all-tools   (GitHub Copilot CLI; tools pre-approved)
//	QODO     qodo --ci -y <prompt>                   (Qodo Command, CI mode, auto-confirm)
//	AIDER    aider --yes-always --no-pretty --message <prompt>
func DefaultCLIs() map[string]string {
	return map[string]string{
		"CLAUDE":  "claude -p <prompt> --output-format json",
		"CURSOR":  "cursor-agent -p <prompt> --output-format text",
		"GEMINI":  "gemini -p <prompt>",
		"COPILOT": "copilot -p <prompt> --allow-all-tools",
		"QODO":    "qodo --ci -y <prompt>",
		"AIDER":   "aider --yes-always --no-pretty --message <prompt>",
	}
}

// Default returns a Config with every default filled in.
func Default() *Config {
	return &Config{
		MaxRetries:         DefaultMaxRetries,
		MaxDepth:           DefaultMaxDepth,
		Parallel:           1,
		MaxLogBytes:        DefaultMaxLogBytes,
		DefaultRoutine:     DefaultRoutineName,
		NotebookEngine:     DefaultNotebookEngine,
		OnMigrationFailure: DefaultOnMigrationFailure,
		MigrationsDir:      DefaultMigrationsDir,
		Routines:           map[string]RoutineSettings{},
		SharedRoutines:     map[string]RoutineSettings{},
		Tree: TreeSettings{
			DefaultCLI:  DefaultTreeCLI,
			ValidateCLI: DefaultTreeCLI,
			RetryCLI:    DefaultTreeCLI,
			RetryCount:  DefaultTreeRetryCount,
			TimeoutS:    DefaultTreeTimeoutS,
			CLIs:        DefaultCLIs(),
		},
		UsageLimit: UsageLimitSettings{MaxWait: DefaultUsageLimitMaxWait},
	}
}

// Warning is a problem that does not stop decree, such as an unknown key.
type Warning struct {
	File string
	Line int
	Msg  string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Msg)
}

// Load reads the config file at path. A missing file yields Default() and
// no error.
func Load(path string) (*Config, []Warning, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return Parse(path, data)
}

// ErrInvalid is matched (errors.Is) by every error that says config.yml
// holds invalid values.
var ErrInvalid = errors.New("invalid configuration")

// InvalidError lists every invalid value of a config file.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }

// Unwrap exposes the individual problems and ErrInvalid.
func (e *InvalidError) Unwrap() []error { return []error{e.Err, ErrInvalid} }

// Parse reads config data; path is used in messages only. On error the
// returned Config is nil and the error lists every invalid value.
func Parse(path string, data []byte) (*Config, []Warning, error) {
	p := &parser{file: path, cfg: Default()}
	p.parse(data)
	if len(p.errs) > 0 {
		return nil, p.warns, &InvalidError{Err: errors.Join(p.errs...)}
	}
	return p.cfg, p.warns, nil
}

// RoutineSettingsFor returns the registry entry of a project routine
// (shared=false) or a shared one; the zero value when it has none. name is
// the routine's name (routine.Routine.Name, the file's stem: "develop" for
// develop.sh); registry keys are stems.
func (c *Config) RoutineSettingsFor(name string, shared bool) RoutineSettings {
	reg := c.Routines
	if shared {
		reg = c.SharedRoutines
	}
	return reg[name]
}

// AttemptsFor returns the total number of attempts for a routine: the
// length of its attempts list, else its own max_retries from the project
// registry, else from the shared registry, else the global max_retries.
func (c *Config) AttemptsFor(routine string) int {
	if v := c.AttemptValuesFor(routine); len(v) > 0 {
		return len(v)
	}
	if n := c.RoutineSettingsFor(routine, false).MaxRetries; n > 0 {
		return n
	}
	if n := c.RoutineSettingsFor(routine, true).MaxRetries; n > 0 {
		return n
	}
	if c.MaxRetries > 0 {
		return c.MaxRetries
	}
	return DefaultMaxRetries
}

// Location returns the time zone for cron schedules without a CRON_TZ=
// prefix: time_zone when set, else the local zone.
//
// Without time_zone it is the machine's zone, under its IANA name when one
// can be found ($TZ, else the /etc/localtime link), so that records name a
// real zone rather than "Local".
func (c *Config) Location() (*time.Location, error) {
	if c.TimeZone == "" || c.TimeZone == "Local" {
		return localZone(), nil
	}
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time_zone %q: %w; use an IANA zone name such as UTC or Europe/Berlin", c.TimeZone, err)
	}
	return loc, nil
}

// localZone returns the machine's zone under its IANA name if possible.
func localZone() *time.Location {
	name := strings.TrimPrefix(os.Getenv("TZ"), ":")
	if name == "" {
		if target, err := os.Readlink("/etc/localtime"); err == nil {
			if _, after, ok := strings.Cut(target, "zoneinfo/"); ok {
				name = after
			}
		}
	}
	if name != "" {
		if loc, err := time.LoadLocation(name); err == nil {
			return loc
		}
	}
	return time.Local
}

// expandHome replaces a leading "~" with the user's home directory.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}
