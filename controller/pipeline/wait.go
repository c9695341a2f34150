package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
)

// Waiting for a person: the loop's side (the machine's is msgstate/wait.go,
// the question's stage_ask.go).
//
// When Next says StepWait, the loop lets the message go (errWaiting): its
// worker and lease are long released, the message stays in the inbox, and
// the scheduler leaves its chain alone (waitingChain) while other chains,
// cron and submissions go on. The waits are kept in memory with the run
// they belong to (p.waits), rebuilt from the runs' state at the start.
//
// A reply (Reply: from the API, decreectl reply, or an inbox file with
// `to:` and `option:`) is checked against the machine, its note written to
// reply-<k>.md, the answer recorded in state.json and wait-<k>.json, and
// all of it made durable before Reply returns; only then is the chain
// released for the loop, which plans from the answer. A refused reply is
// appended to replies-refused.jsonl and announced as a warning; it changes
// nothing. A deadline that passes records the reserved answer timed_out
// the same way.

// errWaiting ends drive for a message that waits for a person.
var errWaiting = errors.New("waiting for a reply")

// Errors of Reply (wrapped), mapped to gRPC codes by the API.
var (
	// ErrNotWaiting: the message is not waiting, or waits under another id.
	ErrNotWaiting = errors.New("not waiting")
	// ErrBadOption: the option is not one the wait offers.
	ErrBadOption = errors.New("unknown option")
	// ErrAnswered: the wait has its answer already.
	ErrAnswered = errors.New("already answered")
)

// waitRecord is wait-<k>.json: the question and, once given, its answer.
type waitRecord struct {
	ID        string            `json:"id"`
	MessageID string            `json:"message_id"`
	Chain     string            `json:"chain"`
	Routine   string            `json:"routine,omitempty"`
	Kind      msgstate.WaitKind `json:"kind"`
	Attempt   int               `json:"attempt"`
	Question  string            `json:"question"`
	Options   []waitOption      `json:"options"`
	Asked     time.Time         `json:"asked"`
	Deadline  time.Time         `json:"deadline,omitzero"`
	Context   string            `json:"context,omitempty"`
	Reply     *replyRecord      `json:"reply,omitempty"`
}

// replyRecord is the answer of a wait.
type replyRecord struct {
	Option    string    `json:"option"`
	Note      string    `json:"note_file,omitempty"`
	At        time.Time `json:"at"`
	Via       string    `json:"via,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
}

// waitNumber is k of a wait id <message id>-w<k>.
func waitNumber(id string) int {
	i := strings.LastIndex(id, "-w")
	if i < 0 {
		return 0
	}
	k, _ := strconv.Atoi(id[i+2:])
	return k
}

func writeWaitRecord(run *store.Run, rec waitRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return run.WriteFile(layout.WaitFileName(waitNumber(rec.ID)), append(data, '\n'))
}

func readWaitRecord(run *store.Run, k int) (waitRecord, error) {
	var rec waitRecord
	p, err := run.Path(layout.WaitFileName(k))
	if err != nil {
		return rec, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(data, &rec)
}

// WaitInfo is a message waiting for a person, for listings.
type WaitInfo struct {
	ID        string
	MessageID string
	Chain     string
	Routine   string
	Kind      string
	Attempt   int
	Question  string
	Options   []WaitOption
	Asked     time.Time
	Deadline  time.Time
}

// WaitOption is an option of a wait with what it means.
type WaitOption struct{ Name, Meaning string }

// parked is a wait the loop let go of.
type parked struct {
	rec   waitRecord
	file  string
	run   *store.Run
	timer *time.Timer
}

// waits are the messages waiting for a person, by message id.
type waits struct {
	mu     sync.Mutex // serialises replies, time-outs and parking
	once   sync.Once
	byID   map[string]*parked
	chains map[string]int
}

// waitingChain reports whether chain has a message waiting for a person
// (the scheduler leaves such chains alone).
func (p *Pipeline) waitingChain(chain string) bool {
	p.loadWaits()
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	return p.w.chains[chain] > 0
}

// excluded is the scheduler's Exclude: chains of pending migrations not
// yet started and chains waiting for a person.
func (p *Pipeline) excluded(chain string) bool {
	return p.heldChain(chain) || p.waitingChain(chain)
}

// park registers a waiting message and lets it go: the first time in
// this controller it announces the wait and runs the onWait hook.
func (p *Pipeline) park(ctx context.Context, m *msg, announce bool) error {
	v := m.run.Machine()
	if !v.Pending() {
		return fmt.Errorf("park %s: it does not wait", m.e.ID)
	}
	// The wait is durable before anyone is told about it.
	if err := m.run.Commit(); err != nil {
		return err
	}
	rec, err := readWaitRecord(m.run, waitNumber(v.Wait.ID))
	if err != nil || rec.ID != v.Wait.ID {
		// The record is written before the wait; rebuild a lost one.
		rec = waitRecord{ID: v.Wait.ID, MessageID: m.e.ID, Chain: m.e.Chain, Kind: v.Wait.Kind, Attempt: v.Wait.Attempt,
			Question: v.Wait.Question, Deadline: v.Wait.Deadline, Asked: time.Now()}
		for _, o := range v.Wait.Options {
			rec.Options = append(rec.Options, waitOption{Name: o})
		}
	}
	p.loadWaits()
	p.w.mu.Lock()
	_, known := p.w.byID[m.e.ID]
	if !known {
		p.addWaitLocked(&parked{rec: rec, file: m.e.File, run: m.run})
	}
	p.w.mu.Unlock()
	if announce && !known {
		p.emit(ctx, &events.Event{Kind: events.Waiting, MessageID: m.e.ID, Chain: m.e.Chain, Attempt: rec.Attempt,
			WaitID: rec.ID, Until: rec.Deadline, Routine: rec.Routine, Text: rec.Question})
		if m.cfg != nil && m.cfg.Hooks.OnWait != "" {
			if msg := p.runWaitHook(ctx, m, rec); msg != "" {
				p.warn(ctx, m.e.ID, "onWait hook failed: "+msg)
			}
		}
	}
	if !known && !rec.Deadline.IsZero() && !rec.Deadline.After(time.Now()) {
		p.timeOut(ctx, m.e.ID, rec.ID) // no timer was armed for a deadline already past
	}
	return errWaiting
}

// runWaitHook runs onWait with the wait in its environment.
func (p *Pipeline) runWaitHook(ctx context.Context, m *msg, rec waitRecord) string {
	env := map[string]string{"DECREE_HOOK": "onWait", "DECREE_TRIGGER": trigger(m.e),
		"DECREE_WAIT_ID": rec.ID, "DECREE_WAIT_KIND": string(rec.Kind), "DECREE_QUESTION": rec.Question,
		"DECREE_OPTIONS": strings.Join(optionNames(rec.Options), ","), "DECREE_REPLY_COMMAND": replyCommand(rec.ID)}
	if !rec.Deadline.IsZero() {
		env["DECREE_DEADLINE"] = rec.Deadline.UTC().Format(time.RFC3339)
	}
	return p.runHook(ctx, m.cfg, "onWait", m.cfg.Hooks.OnWait, &m.e, m.run, env, rec.Attempt)
}

func optionNames(opts []waitOption) []string {
	out := make([]string, len(opts))
	for i, o := range opts {
		out[i] = o.Name
	}
	return out
}

// replyCommand is the command that answers wait id.
func replyCommand(id string) string { return "decreectl reply " + id + " OPTION [-m NOTE]" }

// addWaitLocked registers w and arms its deadline. p.w.mu is held.
func (p *Pipeline) addWaitLocked(w *parked) {
	p.w.byID[w.rec.MessageID] = w
	p.w.chains[w.rec.Chain]++
	if !w.rec.Deadline.IsZero() && w.rec.Deadline.After(time.Now()) {
		id, wid := w.rec.MessageID, w.rec.ID
		w.timer = time.AfterFunc(time.Until(w.rec.Deadline), func() { p.timeOut(context.Background(), id, wid) })
	}
}

// dropWaitLocked forgets the wait of message id. p.w.mu is held.
func (p *Pipeline) dropWaitLocked(id string) {
	w, ok := p.w.byID[id]
	if !ok {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(p.w.byID, id)
	if p.w.chains[w.rec.Chain]--; p.w.chains[w.rec.Chain] <= 0 {
		delete(p.w.chains, w.rec.Chain)
	}
}

// forgetWait drops the wait of a message cancelled or filed meanwhile.
func (p *Pipeline) forgetWait(id string) {
	p.loadWaits()
	p.w.mu.Lock()
	p.dropWaitLocked(id)
	p.w.mu.Unlock()
}

// loadWaits finds, once, the messages that were waiting when the
// controller last stopped.
func (p *Pipeline) loadWaits() {
	p.w.once.Do(func() {
		// Deadlines that passed while no controller ran are recorded
		// before anything asks about the waits.
		var expired []waitRecord
		defer func() {
			for _, rec := range expired {
				p.timeOut(context.Background(), rec.MessageID, rec.ID)
			}
		}()
		p.w.mu.Lock()
		defer p.w.mu.Unlock()
		p.w.byID, p.w.chains = map[string]*parked{}, map[string]int{}
		for _, id := range p.d.Store.UnfinishedRuns() {
			run, err := p.d.Store.OpenRun(id)
			if err != nil {
				continue
			}
			v := run.Machine()
			if !v.Pending() || !p.inInbox(run.State().File) {
				continue
			}
			rec, err := readWaitRecord(run, waitNumber(v.Wait.ID))
			if err != nil || rec.ID != v.Wait.ID {
				rec = waitRecord{ID: v.Wait.ID, MessageID: id, Kind: v.Wait.Kind, Attempt: v.Wait.Attempt, Question: v.Wait.Question, Deadline: v.Wait.Deadline}
				rec.Chain, _, _ = strings.Cut(id, "-")
				for _, o := range v.Wait.Options {
					rec.Options = append(rec.Options, waitOption{Name: o})
				}
			}
			p.addWaitLocked(&parked{rec: rec, file: run.State().File, run: run})
			if !rec.Deadline.IsZero() && !rec.Deadline.After(time.Now()) {
				expired = append(expired, rec)
			}
		}
	})
}

// Waits lists the messages waiting for a person, oldest first.
func (p *Pipeline) Waits() []WaitInfo {
	p.loadWaits()
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	out := make([]WaitInfo, 0, len(p.w.byID))
	for _, w := range p.w.byID {
		out = append(out, waitInfo(w.rec))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Asked.Equal(out[j].Asked) {
			return out[i].Asked.Before(out[j].Asked)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func waitInfo(rec waitRecord) WaitInfo {
	wi := WaitInfo{ID: rec.ID, MessageID: rec.MessageID, Chain: rec.Chain, Routine: rec.Routine, Kind: string(rec.Kind),
		Attempt: rec.Attempt, Question: rec.Question, Asked: rec.Asked, Deadline: rec.Deadline}
	for _, o := range rec.Options {
		wi.Options = append(wi.Options, WaitOption(o))
	}
	return wi
}

// timeOut records that wait wid of message id got no reply in time.
func (p *Pipeline) timeOut(ctx context.Context, id, wid string) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	w, ok := p.w.byID[id]
	if !ok || w.rec.ID != wid {
		return
	}
	run, rec := w.run, w.rec
	rec.Reply = &replyRecord{Option: msgstate.OptionTimedOut, At: time.Now(), Via: "deadline"}
	why := fmt.Sprintf("no reply came to wait %s by its deadline %s", wid, rec.Deadline.UTC().Format(time.RFC3339))
	text := fmt.Sprintf("# No reply\n\nAttempt %d of %s waited for a reply that did not come: %s. Its question was:\n\n%s\n\nThis attempt sees DECREE_REPLY=%s.\n",
		rec.Attempt, id, why, rec.Question, msgstate.OptionTimedOut)
	discardHeld(run, rec.Attempt)
	err := writeWaitRecord(run, rec)
	if err == nil {
		err = run.WriteFile(layout.FailureContextFile, []byte(text))
	}
	if err == nil {
		err = run.Update(func(st *store.RunState) error {
			if n := rec.Attempt; n >= 1 && n <= len(st.Attempts) {
				st.Attempts[n-1].Status, st.Attempts[n-1].Error = store.AttemptFailed, why
			}
			return nil
		})
	}
	if err == nil {
		_, err = run.Step(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.TimeOut(v, wid) })
	}
	if err == nil {
		err = run.Commit()
	}
	if err != nil {
		p.log.Error("record a wait's time-out; trying again in a minute", "wait", wid, "err", err)
		w.timer = time.AfterFunc(time.Minute, func() { p.timeOut(context.Background(), id, wid) })
		return
	}
	p.dropWaitLocked(id)
	p.emit(ctx, &events.Event{Kind: events.TimedOut, MessageID: id, Chain: rec.Chain, Attempt: rec.Attempt, WaitID: wid, Until: rec.Deadline, Text: why})
	p.Wake()
}

// ExitWaiting is the exit code of a process job (and of `decreectl run`
// and `process`) that ended with messages waiting for a reply.
const ExitWaiting = 3

// onlyWaiting reports whether every chain of chains still queued waits
// for a person.
func (p *Pipeline) onlyWaiting(chains map[string]bool) bool {
	for c := range chains {
		if !p.chainDone(c) && !p.waitingChain(c) {
			return false
		}
	}
	return true
}

// IsWaiting reports whether message id waits for a person.
func (p *Pipeline) IsWaiting(id string) bool {
	p.loadWaits()
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	_, ok := p.w.byID[id]
	return ok
}
