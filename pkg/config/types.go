package config

import (
	"time"

	"github.com/decreehq/decree/pkg/usage"
)

// Config is the parsed form of .decree/config.yml. Zero values are never
// seen by callers: Load fills every default (see Default).
type Config struct {
	// Commands holds the external commands decree calls.
	Commands Commands `yaml:"commands"`
	// MaxRetries is the total number of attempts per message (the key
	// max_attempts is accepted as an alias). Default 3.
	MaxRetries int `yaml:"max_retries"`
	// MaxDepth rejects messages whose seq is >= this value. Default 10.
	MaxDepth int `yaml:"max_depth"`
	// Parallel is how many chains may run at once, each in its own lane
	// on a replica worker, merged back one at a time (see the README's
	// "Parallel chains"). Default 1: one message at a time, in order.
	Parallel int `yaml:"parallel"`
	// MaxLogBytes is the most bytes one log (a stream of one attempt)
	// keeps; a longer log keeps its tail after a notice line. 0 means no
	// limit. Default DefaultMaxLogBytes (64 MiB); sizes such as "64MiB"
	// are accepted.
	MaxLogBytes int64 `yaml:"max_log_bytes"`
	// DefaultRoutine is used when no message, spec or router picks one.
	// Default "develop".
	DefaultRoutine string `yaml:"default_routine"`
	// NotebookSupport enables .ipynb routines (and makes them take
	// precedence over .sh). Default false.
	NotebookSupport bool `yaml:"notebook_support"`
	// NotebookEngine is one of auto, papermill, nbconvert. Default auto.
	NotebookEngine string `yaml:"notebook_engine"`
	// OnMigrationFailure is stop (default) or continue.
	OnMigrationFailure string `yaml:"on_migration_failure"`
	// MigrationsDir is where spec files live, relative to the project root.
	// Default ".decree/migrations".
	MigrationsDir string `yaml:"migrations_dir"`
	// RoutineSource is an optional directory of shared routines (fallbacks
	// behind project routines). "~" is expanded.
	RoutineSource string `yaml:"routine_source"`
	// TimeZone is the IANA zone cron schedules use when a schedule has no
	// CRON_TZ= prefix. Default: the controller's local zone.
	TimeZone string `yaml:"time_zone"`
	// Hooks names routines run around processing.
	Hooks Hooks `yaml:"hooks"`
	// Routines is the registry of project routines, by name.
	Routines map[string]RoutineSettings `yaml:"routines"`
	// SharedRoutines is the registry of routines from RoutineSource.
	SharedRoutines map[string]RoutineSettings `yaml:"shared_routines"`
	// Tree holds the decision-tree driver settings.
	Tree TreeSettings `yaml:"tree"`
	// UsageLimit configures waiting out an AI tool's usage limit.
	UsageLimit UsageLimitSettings `yaml:"usage_limit"`
	// Prices override or add to the price table (usage.DefaultPrices)
	// that prices AI calls reporting tokens but no cost.
	Prices usage.Prices `yaml:"prices"`
}

// UsageLimitSettings configure usage-limit waits: after a failed attempt
// whose log says an AI tool's usage limit was reached, decree waits until
// the limit resets and retries without counting the attempt.
type UsageLimitSettings struct {
	// Disabled turns detection off (enabled: false).
	Disabled bool `yaml:"-"`
	// Patterns are extra regular expressions (RE2, matched per log line,
	// case-insensitive) recognising a usage-limit notice, besides the
	// built-in ones.
	Patterns []string `yaml:"patterns"`
	// MaxWait caps one wait. Default 24h.
	MaxWait time.Duration `yaml:"max_wait"`
}

// Commands are the external commands decree invokes.
type Commands struct {
	// Router is the AI command used to pick routines and derive message
	// names; the prompt is passed on stdin. Empty disables the router.
	Router string `yaml:"router"`
	// AIInteractive starts the AI tool interactively; `decreectl prompt`
	// runs it with the rendered prompt as its last argument. Empty means
	// the first known AI tool on PATH.
	AIInteractive string `yaml:"ai_interactive"`
}

// Hooks name routines (by routine name, resolved like any routine) to run at
// points of the processing loop. Empty means no hook.
type Hooks struct {
	BeforeAll    string `yaml:"beforeAll"`
	AfterAll     string `yaml:"afterAll"`
	BeforeEach   string `yaml:"beforeEach"`
	AfterEach    string `yaml:"afterEach"`
	OnDeadLetter string `yaml:"onDeadLetter"`
	// OnWait runs when a message starts waiting for a person (a question
	// or a review), to notify someone.
	OnWait string `yaml:"onWait"`
	// BeforeMerge gates the merge of a finished parallel chain into the
	// project tree: it runs on the lane's tree, and failing makes the merge
	// a conflict that is not requeued. AfterMerge runs on the project
	// tree after a clean merge; its failure is a warning.
	BeforeMerge string `yaml:"beforeMerge"`
	AfterMerge  string `yaml:"afterMerge"`
}

// RoutineSettings is one registry entry (routines: or shared_routines:).
type RoutineSettings struct {
	// Enabled is nil when the key is absent from the file.
	Enabled *bool `yaml:"enabled,omitempty"`
	// Deprecated marks a routine whose file has disappeared.
	Deprecated bool `yaml:"deprecated,omitempty"`
	// MaxRetries overrides the global attempt count (alias max_attempts);
	// 0 means "use the global value".
	MaxRetries int `yaml:"max_retries,omitempty"`
	// TimeoutS caps one attempt in seconds; 0 means no cap.
	TimeoutS int `yaml:"timeout_s,omitempty"`
	// Requires lists worker labels (key=value) a worker must carry to run
	// this routine.
	Requires map[string]string `yaml:"requires,omitempty"`
	// MaxCostUSD caps what one message may cost with this routine, all
	// attempts together (0: no cap); see cost.go.
	MaxCostUSD float64 `yaml:"max_cost_usd,omitempty"`
	// Attempts are per-attempt values (a model name, a tool): attempt N
	// gets the Nth as DECREE_ATTEMPT_VALUE. Its length is the number of
	// attempts.
	Attempts []string `yaml:"attempts,omitempty"`
	// Review makes every successful attempt wait for a person's approve,
	// reject or retry before its follow-ups are collected.
	Review bool `yaml:"review,omitempty"`
}

// IsEnabled reports the effective enabled state: an absent key counts as
// enabled for project routines and disabled for shared ones (the caller
// passes which default applies).
func (s RoutineSettings) IsEnabled(def bool) bool {
	if s.Enabled == nil {
		return def
	}
	return *s.Enabled
}

// TreeSettings configure the decision-tree driver.
type TreeSettings struct {
	// DefaultCLI is the codename used for nodes that name none. Default CLAUDE.
	DefaultCLI string `yaml:"default_cli"`
	// ValidateCLI is the codename used to validate leaf nodes. Default: DefaultCLI.
	ValidateCLI string `yaml:"validate_cli"`
	// RetryCLI is the codename used for retries. Default: DefaultCLI.
	RetryCLI string `yaml:"retry_cli"`
	// RetryCount is the per-node validation retry limit; 0 disables
	// retries. Default 3.
	RetryCount int `yaml:"retry_count"`
	// TimeoutS caps one CLI call. Default 600.
	TimeoutS int `yaml:"timeout_s"`
	// CLIs maps a codename (CLAUDE, CURSOR, GEMINI, COPILOT, QODO, AIDER or a
	// custom one) to a command template containing <prompt>. Codenames are
	// stored upper-case; Default fills the six built-in ones (DefaultCLIs).
	CLIs map[string]string `yaml:"clis"`
}
