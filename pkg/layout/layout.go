// Package layout is the one place that knows the names inside a project's
// .decree/ directory and inside a message's run directory
// (.decree/runs/<chain>-<seq>/). Every other package asks it for a name or a
// path instead of spelling one out, so renaming a file or folder is a change
// to this file alone.
//
// The project directory:
//
//	.decree/config.yml  router.md  processed.md  last-run.yml  .gitignore
//	.decree/migrations/ routines/ prompts/ cron/ drivers/ venv/
//	.decree/inbox/ inbox/done/ inbox/dead/ outbox/ runs/ objects/ cache/
//	.decree/decree.sock controller.lock instance-id events.jsonl leases.json requests/
//
// A run directory:
//
//	message.md manifest.json state.json run.json failure-context.md
//	changes.diff changes.try-002.diff ...
//	routine.log routine.try-002.log ... hook-beforeeach.log router.log
//	output.ipynb papermill.log tree.json tree.log discarded-followups/try-001/
package layout

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Dir is the name of decree's directory in a project root.
const Dir = ".decree"

// Names directly inside .decree/.
const (
	Config      = "config.yml"
	RouterGuide = "router.md"
	Processed   = "processed.md"
	LastRun     = "last-run.yml"
	GitIgnore   = ".gitignore"
	Migrations  = "migrations"
	Routines    = "routines"
	Prompts     = "prompts"
	Cron        = "cron"
	Drivers     = "drivers"
	Venv        = "venv"
	Inbox       = "inbox"
	Done        = "inbox/done"
	Dead        = "inbox/dead"
	Outbox      = "outbox"
	Runs        = "runs"
	// OpenRuns holds an empty file per run without an outcome, named by
	// its message id: a controller's start and status list it instead of
	// reading every run's state.
	OpenRuns       = "open-runs"
	Objects        = "objects"
	Cache          = "cache"
	StatCache      = "cache/statcache"
	Socket         = "decree.sock"
	ControllerLock = "controller.lock"
	InstanceID     = "instance-id"
	WorkerID       = "worker-id"
	Events         = "events.jsonl"
	Leases         = "leases.json"
	Requests       = "requests"
)

// InitDirs are the folders of .decree/ that `decreectl init` creates.
var InitDirs = []string{Migrations, Routines, Prompts, Cron, Drivers, Inbox, Done, Dead, Outbox, Runs}

// MessageExt is the file-name ending of inbox, done, dead and outbox
// messages; SpecExt that of migration specs.
const (
	MessageExt = ".md"
	SpecExt    = ".spec.md"
	// DeadNoteSuffix is appended to a dead message's file name to name the
	// note that says why it is dead ("fix.md.dead.txt").
	DeadNoteSuffix = ".dead.txt"
)

// Names inside a run directory.
const (
	MessageFile        = "message.md"
	ManifestFile       = "manifest.json"
	StateFile          = "state.json"
	RunFile            = "run.json"
	DiffFile           = "changes.diff"
	FailureContextFile = "failure-context.md"
	// InboxBeforeFile records the inbox as it was before the current
	// attempt, as names added to and removed from InboxBaseFile: what
	// follow-up collection compares against.
	InboxBeforeFile = "inbox-before.txt"
	// InboxBaseFile lists queued names (one per line), shared by hard link
	// between the runs whose snapshots start from it.
	InboxBaseFile      = "inbox-base.txt"
	DiscardedFollowUps = "discarded-followups"
	NotebookOutput     = "output.ipynb"
	PapermillLog       = "papermill.log"
	TreeJSON           = "tree.json"
	TreeLog            = "tree.log"
	// HeldFollowUps keeps the follow-ups of an attempt awaiting review
	// until it is approved (inbox/ and outbox/ inside).
	HeldFollowUps = "held-followups"
	// RefusedReplies lists replies that were refused, one JSON per line.
	RefusedReplies = "replies-refused.jsonl"
)

// AskFileName is where attempt n may write a question
// (DECREE_ASK_FILE): "ask.try-001.json".
func AskFileName(n int) string { return fmt.Sprintf("ask.try-%03d.json", n) }

// WaitFileName records wait k (question and answer): "wait-001.json".
func WaitFileName(k int) string { return fmt.Sprintf("wait-%03d.json", k) }

// ReplyFileName holds the note of wait k's reply (DECREE_REPLY_FILE):
// "reply-001.md".
func ReplyFileName(k int) string { return fmt.Sprintf("reply-%03d.md", k) }

// Path joins a project root, .decree and elem: Path("/p", Inbox, "x.md") is
// "/p/.decree/inbox/x.md".
func Path(root string, elem ...string) string {
	return filepath.Join(append([]string{root, Dir}, elem...)...)
}

// LogName is the file name of a log stream for an attempt: "routine.log"
// for attempt 1, "routine.try-002.log" for attempt 2, and so on (three
// digits, more beyond attempt 999). Unlike "routine-2.log" and
// "routine-10.log", these names sort in attempt order both byte-wise and
// under locale collation that ignores punctuation ("routine.log" sorts
// before "routine.try-..." because "l" < "t").
func LogName(stream string, attempt int) string {
	if attempt <= 1 {
		return stream + ".log"
	}
	return fmt.Sprintf("%s.try-%03d.log", stream, attempt)
}

// TreeAfterName is the manifest of the tree failed attempt n left,
// "tree-after.try-001.json": the start of attempt n+1.
func TreeAfterName(n int) string { return fmt.Sprintf("tree-after.try-%03d.json", n) }

// AttemptDiffName is the name of attempt n's own copy of the diff,
// "changes.try-001.diff".
func AttemptDiffName(n int) string { return fmt.Sprintf("changes.try-%03d.diff", n) }

// DiscardedDir is where follow-ups of failed attempt n are kept, relative
// to the run directory: "discarded-followups/try-001".
func DiscardedDir(n int) string {
	return filepath.Join(DiscardedFollowUps, fmt.Sprintf("try-%03d", n))
}

// SocketPath is the controller's unix socket of a project.
func SocketPath(root string) string { return Path(root, Socket) }

// controllerOwned matches run-directory names that only the controller
// writes: the message, checkpoint, state and record files, every diff, and
// every log the controller stores from worker streams (routine, router,
// hook-<point>, any attempt), the trees failed attempts left, the logs of
// interrupted attempts, the usage-limit record of older versions, and the
// hidden temporary files of its writes ("."+name+".tmp-..."). A worker
// returning one of these is refused.
var controllerOwned = regexp.MustCompile(`^(\..+\.tmp-.*|` +
	regexp.QuoteMeta(MessageFile) + `|` + regexp.QuoteMeta(FailureContextFile) + `|` +
	regexp.QuoteMeta(ManifestFile) + `|` + regexp.QuoteMeta(StateFile) + `|` + regexp.QuoteMeta(RunFile) +
	`|` + regexp.QuoteMeta(InboxBeforeFile) + `|` + regexp.QuoteMeta(InboxBaseFile) +
	`|changes(\.try-[0-9]+)?\.diff` +
	`|tree-after\.try-[0-9]+\.json|interrupted-[0-9]+\..+|usage-limit\.json|usage\.router\.jsonl` +
	`|wait-[0-9]+\.json|reply-[0-9]+\.md|` + regexp.QuoteMeta(RefusedReplies) +
	`|(routine|router|hook(-[a-z]+)?)(\.try-[0-9]+|-[0-9]+)?\.log)$`)

// ControllerOwned reports whether a run-directory file name is one that
// only the controller writes (a worker may not return it).
func ControllerOwned(name string) bool { return controllerOwned.MatchString(name) }

// IsMessageFile reports whether a directory entry's name is a message
// file: it ends in ".md", has a stem, and is not hidden (temporary files
// start with ".").
func IsMessageFile(name string) bool {
	return strings.HasSuffix(name, MessageExt) && len(name) > len(MessageExt) && !strings.HasPrefix(name, ".")
}

// MessageStem is a message file name without ".md".
func MessageStem(name string) string { return strings.TrimSuffix(name, MessageExt) }
