package lease

import (
	"fmt"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Limits on what a registration may hold, so that a worker (or many
// registrations under new ids) cannot make the controller keep unbounded
// data, and `decreectl workers` stays readable.
const (
	// MaxLabels is the number of labels a worker may advertise.
	MaxLabels = 64
	// MaxLabelKeyBytes and MaxLabelValueBytes bound one label.
	MaxLabelKeyBytes   = 128
	MaxLabelValueBytes = 1024
	// MaxDrivers is the number of drivers a worker may list.
	MaxDrivers = 64
	// MaxFieldBytes bounds the workspace path, host name and each driver
	// name of a registration.
	MaxFieldBytes = 4096
)

// DefaultForgetAfter is how long a worker that stopped heartbeating stays
// listed (Options.ForgetAfter).
const DefaultForgetAfter = 10 * time.Minute

// checkRegistration enforces the limits above with errors that say which
// one was exceeded.
func checkRegistration(req *decreev1.RegisterWorkerRequest) error {
	id := req.GetWorkerId()
	if n := len(req.GetLabels()); n > MaxLabels {
		return fmt.Errorf("%w: worker %s has %d labels; at most %d are accepted", ErrInvalid, id, n, MaxLabels)
	}
	for k, v := range req.GetLabels() {
		if k == "" || len(k) > MaxLabelKeyBytes {
			return fmt.Errorf("%w: worker %s has a label key of %d bytes; keys must be 1 to %d bytes", ErrInvalid, id, len(k), MaxLabelKeyBytes)
		}
		if len(v) > MaxLabelValueBytes {
			return fmt.Errorf("%w: worker %s: label %q has a value of %d bytes; at most %d are accepted", ErrInvalid, id, k, len(v), MaxLabelValueBytes)
		}
	}
	if n := len(req.GetDrivers()); n > MaxDrivers {
		return fmt.Errorf("%w: worker %s lists %d drivers; at most %d are accepted", ErrInvalid, id, n, MaxDrivers)
	}
	for _, d := range req.GetDrivers() {
		if len(d.GetName()) > MaxFieldBytes {
			return fmt.Errorf("%w: worker %s lists a driver name of %d bytes; at most %d are accepted", ErrInvalid, id, len(d.GetName()), MaxFieldBytes)
		}
	}
	for what, v := range map[string]string{"workspace": req.GetWorkspace(), "hostname": req.GetHostname()} {
		if len(v) > MaxFieldBytes {
			return fmt.Errorf("%w: worker %s: %s of %d bytes; at most %d are accepted", ErrInvalid, id, what, len(v), MaxFieldBytes)
		}
	}
	return nil
}

// forgetLocked drops the sessions of workers not heard from for
// ForgetAfter: no heartbeat, no stream opened, and no lease still active
// or waiting to be sent. Their registrations are gone from Workers and
// their memory is freed; a worker that comes back registers again.
func (m *Manager) forgetLocked(now time.Time) {
	for id, s := range m.sessions {
		if now.Sub(s.lastSeen) <= m.opts.ForgetAfter || m.holdsWorkLocked(s) {
			continue
		}
		m.log.Info("forgot a worker not heard from", "worker", s.req.GetWorkerId(), "session", id, "last_seen", s.lastSeen, "forget_after", m.opts.ForgetAfter)
		s.streamGen++
		broadcast(&s.changed)
		delete(m.sessions, id)
	}
}

// holdsWorkLocked reports whether s still holds a lease that is not over.
func (m *Manager) holdsWorkLocked(s *session) bool {
	if s.current != nil && s.current.state != stateEnded {
		return true
	}
	for _, l := range s.outbox {
		if l.state != stateEnded {
			return true
		}
	}
	return false
}
