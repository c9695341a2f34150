package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
)

// The ask stage: a person in the loop (see wait.go for the rest).
//
// Every attempt gets DECREE_ASK_FILE, a file of its own in the run
// directory. A routine that writes a question there and exits 0 asks:
//
//	{"question": "...", "options": {"yes": "what yes means", "no": "..."}, "timeout": "24h"}
//
// After the attempt the stage reads and checks the question and adds it
// to the attempt's result, so the machine records the wait in the same
// write as the attempt's end (like a usage limit). A malformed question
// fails the attempt with an error that says what is wrong. Without a
// question, a successful attempt of a routine or message with review
// enabled waits for a review (approve, reject, retry).
//
// The question with its options' meanings is written to wait-<k>.json
// before the end is recorded (a crash in between leaves a file the next
// wait overwrites).

// maxQuestionBytes bounds a question file.
const maxQuestionBytes = 64 << 10

// question is a parsed question file.
type question struct {
	Question string
	Options  []waitOption
	Timeout  time.Duration
	// Context is handed back to the attempt after the reply as
	// DECREE_ASK_CONTEXT (a tree names its asking node there).
	Context string
}

// maxAskContext bounds a question's context.
const maxAskContext = 4 << 10

// waitOption is an option with what it means.
type waitOption struct {
	Name    string `json:"name"`
	Meaning string `json:"meaning,omitempty"`
}

var optionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// parseQuestion reads a question file, strictly: unknown fields, missing
// or empty question or options, bad option names and bad timeouts are
// errors that say what to write instead.
func parseQuestion(data []byte) (question, error) {
	var raw struct {
		Question string          `json:"question"`
		Options  json.RawMessage `json:"options"`
		Timeout  string          `json:"timeout"`
		Context  string          `json:"context"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return question{}, fmt.Errorf("not the expected JSON object {\"question\": \"...\", \"options\": {\"yes\": \"...\"}, \"timeout\": \"24h\"}: %w", err)
	}
	q := question{Question: strings.TrimSpace(raw.Question), Context: raw.Context}
	if len(q.Context) > maxAskContext {
		return q, fmt.Errorf(`"context" is longer than %d KiB; keep state in a file and name it there`, maxAskContext>>10)
	}
	if q.Question == "" {
		return q, errors.New(`"question" is missing or empty`)
	}
	opts, err := orderedOptions(raw.Options)
	if err != nil {
		return q, err
	}
	q.Options = opts
	if t := strings.TrimSpace(raw.Timeout); t != "" {
		d, err := parseTimeout(t)
		if err != nil {
			return q, err
		}
		q.Timeout = d
	}
	return q, nil
}

// orderedOptions reads the options object keeping the routine's order.
func orderedOptions(raw json.RawMessage) ([]waitOption, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, errors.New(`"options" is missing: give at least one, as {"yes": "what yes means"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New(`"options" must be an object of option names to what they mean, as {"yes": "...", "no": "..."}`)
	}
	var out []waitOption
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf(`"options": %w`, err)
		}
		name := t.(string)
		var meaning string
		if err := dec.Decode(&meaning); err != nil {
			return nil, fmt.Errorf(`option %q: its meaning must be a string`, name)
		}
		switch {
		case !optionName.MatchString(name):
			return nil, fmt.Errorf("option %q: names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
		case name == msgstate.OptionTimedOut:
			return nil, fmt.Errorf("option %q is reserved for a wait whose deadline passed", name)
		case seen[name]:
			return nil, fmt.Errorf("option %q is given twice", name)
		}
		seen[name] = true
		out = append(out, waitOption{Name: name, Meaning: meaning})
	}
	if len(out) == 0 {
		return nil, errors.New(`"options" is empty: give at least one, as {"yes": "what yes means"}`)
	}
	return out, nil
}

// parseTimeout reads a Go duration ("90m", "24h") or whole days ("2d").
func parseTimeout(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf(`"timeout" %q is not a positive duration such as "90m", "24h" or "2d"`, s)
	}
	return d, nil
}

// askStage is the stage.
type askStage struct {
	now func() time.Time
}

func (s *askStage) before(context.Context, *msg, int) error { return nil }

// after turns a question (or a review gate) into the attempt's wait.
func (s *askStage) after(_ context.Context, m *msg, n int, end *attemptEnd) {
	if !end.res.OK {
		return // a failed attempt's question is kept in the run directory, not asked
	}
	v := m.run.Machine()
	rec := waitRecord{ID: msgstate.WaitID(m.e.ID, v.Waited+1), MessageID: m.e.ID, Chain: m.e.Chain, Routine: m.rt.Name,
		Attempt: n, Asked: s.now()}
	q, asked, err := readQuestion(m.run, n)
	switch {
	case err != nil:
		end.res.OK = false
		end.errText = fmt.Sprintf("the routine asked a question, but %s is not valid: %v. Write {\"question\": \"...\", \"options\": {\"yes\": \"...\"}, \"timeout\": \"24h\"} (timeout optional)", layout.AskFileName(n), err)
		return
	case asked:
		rec.Kind, rec.Question, rec.Options, rec.Context = msgstate.AskWait, q.Question, q.Options, q.Context
		if q.Timeout > 0 {
			rec.Deadline = rec.Asked.Add(q.Timeout)
		}
	case reviewWanted(m):
		rec.Kind = msgstate.ReviewWait
		rec.Question = fmt.Sprintf("Review the change of attempt %d of %s (routine %s): `decreectl diff %s`.", n, m.e.ID, m.rt.Name, m.e.ID)
		rec.Options = []waitOption{
			{Name: msgstate.OptionApprove, Meaning: "keep the change, queue its follow-ups, done"},
			{Name: msgstate.OptionReject, Meaning: "revert the tree to the checkpoint and dead-letter the message with the note"},
			{Name: msgstate.OptionRetry, Meaning: "run another attempt; the note goes into its failure context"},
		}
	default:
		return
	}
	if err := writeWaitRecord(m.run, rec); err != nil {
		end.res.OK = false
		end.errText = fmt.Sprintf("record the wait %s: %v", rec.ID, err)
		return
	}
	names := make([]string, len(rec.Options))
	for i, o := range rec.Options {
		names[i] = o.Name
	}
	end.res.Wait = &msgstate.Wait{Kind: rec.Kind, Question: rec.Question, Options: names, Deadline: rec.Deadline}
}

// readQuestion reads attempt n's question file, if the routine wrote one.
func readQuestion(run *store.Run, n int) (question, bool, error) {
	p, err := run.Path(layout.AskFileName(n))
	if err != nil {
		return question{}, false, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return question{}, false, nil
	}
	if err != nil {
		return question{}, true, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxQuestionBytes+1))
	if err != nil {
		return question{}, true, err
	}
	if len(data) > maxQuestionBytes {
		return question{}, true, fmt.Errorf("it is larger than %d KiB; keep the question short and put details in a file it names", maxQuestionBytes>>10)
	}
	q, err := parseQuestion(data)
	return q, true, err
}

// reviewWanted reports whether a successful attempt of m waits for a
// review: review: true in the message's frontmatter, else in the
// routine's registry entry.
func reviewWanted(m *msg) bool {
	if m.e.Message != nil {
		if v, ok := m.e.Message.Get("review"); ok {
			switch t := v.(type) {
			case bool:
				return t
			case string:
				b, err := strconv.ParseBool(t)
				return err == nil && b
			}
		}
	}
	return m.cfg != nil && m.cfg.RoutineSettingsFor(m.rt.Name, m.rt.Shared).Review
}

// waitEnv adds the ask file and the latest answer to attempt n's
// environment, and returns the run files a replica worker needs for them.
func waitEnv(run *store.Run, id string, n int, env map[string]string) []string {
	dir := path.Join(layout.Dir, layout.Runs, id)
	env["DECREE_ASK_FILE"] = path.Join(dir, layout.AskFileName(n))
	v := run.Machine()
	w, ok := v.Answer()
	if !ok {
		return nil
	}
	env["DECREE_WAIT_ID"] = w.ID
	env["DECREE_REPLY"] = w.Reply
	if rec, err := readWaitRecord(run, v.Waited); err == nil && rec.Context != "" {
		env["DECREE_ASK_CONTEXT"] = rec.Context
	}
	if w.Reply == msgstate.OptionTimedOut {
		return nil
	}
	env["DECREE_REPLY_FILE"] = path.Join(dir, layout.ReplyFileName(v.Waited))
	return []string{layout.ReplyFileName(v.Waited)}
}

var _ attemptStage = (*askStage)(nil)
