package lease

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/logbook"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// connect registers a worker and holds its assignment stream open until the
// test ends.
func connect(t *testing.T, m *Manager, id string, labels map[string]string, drivers ...string) {
	t.Helper()
	req := &decreev1.RegisterWorkerRequest{WorkerId: id, Labels: labels}
	for _, d := range drivers {
		req.Drivers = append(req.Drivers, &decreev1.DriverInfo{Name: d})
	}
	resp, err := m.Register(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Stream(ctx, resp.GetSessionId(), func(*decreev1.Assignment) error { return nil })
	}()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); ; {
		for _, w := range m.Workers() {
			if w.GetId() == id && w.GetConnected() {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s did not start streaming", id)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestUnmatchedAndWaitConnected(t *testing.T) {
	dir := t.TempDir()
	book := logbook.New(func(k logbook.Key) (string, error) { return filepath.Join(dir, k.Stream), nil })
	m, err := New(Options{Logs: book, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)

	if why, connected := m.Unmatched(Requirements{Driver: "shell"}); connected || why != "no worker is connected" {
		t.Errorf("no workers: Unmatched = %q, %v", why, connected)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := m.WaitConnected(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitConnected with no worker = %v, want the context's deadline", err)
	}

	waited := make(chan error, 1)
	go func() { waited <- m.WaitConnected(context.Background()) }()
	connect(t, m, "w1", map[string]string{"zone": "a"}, "shell", "notebook")
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("WaitConnected = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitConnected did not return when a worker connected")
	}

	tests := []struct {
		name string
		req  Requirements
		want string // "" means a worker matches
	}{
		{"offered driver", Requirements{Driver: "shell"}, ""},
		{"any driver", Requirements{}, ""},
		{"matching labels", Requirements{Driver: "notebook", Labels: map[string]string{"zone": "a"}}, ""},
		{"in-place is not judged here", Requirements{Driver: "shell", InPlace: true}, ""},
		{"missing driver", Requirements{Driver: "tree"}, `no connected worker offers driver "tree" (they offer: notebook, shell)`},
		{"missing labels", Requirements{Driver: "shell", Labels: map[string]string{"gpu": "yes", "zone": "a"}}, `no connected worker with driver "shell" has the labels gpu=yes, zone=a`},
		{"labels without driver", Requirements{Labels: map[string]string{"zone": "b"}}, "no connected worker has the labels zone=b"},
	}
	for _, tt := range tests {
		why, connected := m.Unmatched(tt.req)
		if why != tt.want || !connected {
			t.Errorf("%s: Unmatched = %q, %v; want %q, true", tt.name, why, connected, tt.want)
		}
	}
	connect(t, m, "w2", nil, "tree")
	if why, _ := m.Unmatched(Requirements{Driver: "tree"}); why != "" {
		t.Errorf("after a tree worker joined: %q", why)
	}
	if why, _ := m.Unmatched(Requirements{Driver: "tree", Labels: map[string]string{"zone": "a"}}); !strings.Contains(why, `driver "tree" has the labels zone=a`) {
		t.Errorf("driver on one worker, labels on another: %q", why)
	}
}
