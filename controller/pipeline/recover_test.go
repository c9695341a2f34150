package pipeline

import (
	"testing"

	"github.com/decreehq/decree/controller/store"
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
		if phase == phaseExhausted {
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
	done, _ := mk("finished", phaseSucceeded)
	if _, err := st.MarkDone(done.File); err != nil {
		t.Fatal(err)
	}
	dead, _ := mk("failed", phaseExhausted)
	if _, err := st.DeadLetter(dead.File, store.DeadNote{Reason: "RetriesExhausted", MessageID: dead.ID}); err != nil {
		t.Fatal(err)
	}
	pending, _ := mk("pending", phaseSucceeded)
	// Success recorded only by the last attempt's status (no phase).
	plain, _ := mk("plain", "")
	if _, err := st.MarkDone(plain.File); err != nil {
		t.Fatal(err)
	}

	p := New(Deps{Store: st})
	p.recoverFiled()

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
