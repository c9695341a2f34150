package pipeline

import (
	"context"
	"testing"

	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/message"
)

// A run whose message was filed (done/ or dead/) before the controller
// stopped gets its run.json at the next start; one whose message is still
// in the inbox is left for the loop to process.
func TestRecoverFiledRuns(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name, phase string) (store.Entry, *store.Run) {
		e, err := st.CreateMessage(name, &message.Message{Body: []byte("work\n")})
		if err != nil {
			t.Fatal(err)
		}
		run, err := st.StartRun(store.RunStart{Entry: e, Routine: "develop", Trigger: "inbox", MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.BeginAttempt(); err != nil {
			t.Fatal(err)
		}
		code := 0
		if phase == "exhausted" {
			code = 1
		}
		if err := run.FinishAttempt(1, code, ""); err != nil {
			t.Fatal(err)
		}
		if err := run.Update(func(s *store.RunState) error { s.Phase = phase; return nil }); err != nil {
			t.Fatal(err)
		}
		return e, run
	}
	done, _ := mk("finished", "succeeded")
	if _, err := st.MarkDone(done.File); err != nil {
		t.Fatal(err)
	}
	dead, _ := mk("failed", "exhausted")
	if _, err := st.DeadLetter(dead.File, store.DeadNote{Reason: "RetriesExhausted", MessageID: dead.ID}); err != nil {
		t.Fatal(err)
	}
	pending, _ := mk("pending", "succeeded")
	// Success recorded only by the last attempt's status (no phase).
	plain, _ := mk("plain", "")
	if _, err := st.MarkDone(plain.File); err != nil {
		t.Fatal(err)
	}

	p := New(Deps{Store: st})
	p.settleFiled(context.Background())

	for _, tc := range []struct {
		id, outcome string
	}{{done.ID, store.OutcomeSucceeded}, {dead.ID, store.OutcomeDeadLettered}, {plain.ID, store.OutcomeSucceeded}} {
		rec, err := st.ReadRunRecord(tc.id)
		if err != nil {
			t.Fatalf("run.json of %s not written: %v", tc.id, err)
		}
		if rec.Outcome != tc.outcome {
			t.Errorf("%s outcome = %q, want %q", tc.id, rec.Outcome, tc.outcome)
		}
	}
	if _, err := st.ReadRunRecord(pending.ID); err == nil {
		t.Errorf("a run whose message is still in the inbox was finished")
	}
}

// filedSpecRun makes a spec message whose machine went through steps,
// moved to done/ as the loop's filing does, and a pipeline over the
// store.
func filedSpecRun(t *testing.T, steps ...func(msgstate.Msg) (msgstate.Msg, error)) (*store.Store, store.Entry, *store.Run, *Pipeline) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &message.Message{HasFrontmatter: true, Body: []byte("work\n")}
	m.Set("type", message.TypeSpec)
	m.Set("input_file", ".decree/migrations/01-a.spec.md")
	e, err := st.CreateMessage("a", m)
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(store.RunStart{Entry: e, Routine: "develop", Trigger: "inbox", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range append([]func(msgstate.Msg) (msgstate.Msg, error){
		func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Claim(v, 1) },
		msgstate.Checkpoint,
		func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Start(v, 1) },
		func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Finish(v, 1, true) },
		msgstate.Collect,
	}, steps...) {
		if _, err := run.Step(tr); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.MarkDone(e.File); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	return st, e, run, New(Deps{Store: st, Config: func() (*config.Config, error) { return cfg, nil }})
}

// checkFiledSpec checks that the run of a filed spec is recorded as
// succeeded and its spec marked processed.
func checkFiledSpec(t *testing.T, st *store.Store, e store.Entry) {
	t.Helper()
	rec, err := st.ReadRunRecord(e.ID)
	if err != nil || rec.Outcome != store.OutcomeSucceeded {
		t.Fatalf("run.json: %+v, %v; want succeeded", rec, err)
	}
	done, err := st.Processed()
	if err != nil || !done["01-a.spec.md"] {
		t.Errorf("processed.md = %v, %v; want the spec listed", done, err)
	}
}

// A run whose machine recorded it done, filed before run.json was written,
// is finished through the loop's own filing step at the next start: its
// record says succeeded and processed.md lists its spec.
func TestSettleFiledByMachine(t *testing.T) {
	st, e, run, p := filedSpecRun(t, msgstate.Complete)
	p.settleFiled(context.Background())
	checkFiledSpec(t, st, e)
	if h := run.State().History; len(h) == 0 {
		t.Error("state.json keeps no history of the machine's steps")
	}
}

// The loop stages a message's completion and writes it with the run's
// end, after the move to done/: a controller stopped in between leaves a
// collected machine whose message is in done/. The next start completes
// it as the loop would: done, succeeded, its spec marked processed.
func TestSettleFiledAfterStagedCompletion(t *testing.T) {
	st, e, _, p := filedSpecRun(t)
	p.settleFiled(context.Background())
	checkFiledSpec(t, st, e)
	again, err := st.OpenRun(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := again.State().Machine.State; s != msgstate.Done {
		t.Errorf("machine on disk = %s, want %s", s, msgstate.Done)
	}
}
