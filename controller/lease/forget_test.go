package lease

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestStaleWorkersAreForgotten: 50 workers register and vanish; one keeps
// heartbeating and one holds a lease. After ForgetAfter only those two
// are listed, and a forgotten worker's heartbeat asks it to register again.
func TestStaleWorkersAreForgotten(t *testing.T) {
	m, clock := newClockedManager(t, Options{ForgetAfter: time.Minute})
	var stale []string
	for i := 0; i < 50; i++ {
		resp, err := m.Register(&decreev1.RegisterWorkerRequest{WorkerId: fmt.Sprintf("pod-%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		stale = append(stale, resp.GetSessionId())
	}
	alive, err := m.Register(&decreev1.RegisterWorkerRequest{WorkerId: "alive"})
	if err != nil {
		t.Fatal(err)
	}
	busy := streamWorker(t, m, "busy")
	res := dispatchAsync(m, "20261124120000-0", 1)
	a := busy.next(t)
	if got := len(m.Workers()); got != 52 {
		t.Fatalf("%d workers listed, want 52", got)
	}
	// Seven TTLs pass (70 s); "alive" heartbeats, "busy" renews its lease.
	for i := 0; i < 14; i++ {
		clock.Advance(testTTL / 2)
		if _, err := m.Heartbeat(alive.GetSessionId(), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Heartbeat(busy.session, []string{a.GetLeaseToken()}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, w := range m.Workers() {
		ids = append(ids, w.GetId())
	}
	if strings.Join(ids, ",") != "alive,busy" && strings.Join(ids, ",") != "busy,alive" {
		t.Fatalf("workers listed after ForgetAfter: %v, want alive and busy only", ids)
	}
	if _, err := m.Heartbeat(stale[0], nil); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("heartbeat of a forgotten worker: %v, want ErrUnknownSession (register again)", err)
	}
	if _, err := m.Complete(&decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{}}); err != nil {
		t.Fatal(err)
	}
	if d := <-res; d.err != nil {
		t.Fatal(d.err)
	}
}

func TestRegistrationLimits(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= MaxLabels; i++ {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	tests := []struct {
		name string
		req  *decreev1.RegisterWorkerRequest
		want string
	}{
		{"too many labels", &decreev1.RegisterWorkerRequest{WorkerId: "w", Labels: many}, "65 labels"},
		{"huge label value", &decreev1.RegisterWorkerRequest{WorkerId: "w", Labels: map[string]string{"k": strings.Repeat("x", 64<<10)}}, "65536 bytes"},
		{"huge label key", &decreev1.RegisterWorkerRequest{WorkerId: "w", Labels: map[string]string{strings.Repeat("k", 200): "v"}}, "label key of 200 bytes"},
		{"huge hostname", &decreev1.RegisterWorkerRequest{WorkerId: "w", Hostname: strings.Repeat("h", 5000)}, "hostname"},
	}
	m, _ := newClockedManager(t, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Register(tt.req)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Register: %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
	if len(m.Workers()) != 0 {
		t.Error("a refused registration is listed")
	}
	ok := map[string]string{}
	for i := 0; i < MaxLabels; i++ {
		ok[fmt.Sprintf("k%d", i)] = strings.Repeat("v", MaxLabelValueBytes)
	}
	if _, err := m.Register(&decreev1.RegisterWorkerRequest{WorkerId: "w", Labels: ok}); err != nil {
		t.Fatalf("registration at the limits refused: %v", err)
	}
}
