package lease

import "fmt"

// Active returns the assignment of an active lease, for calls that serve
// the work under it (a replica's file transfer). It fails with
// ErrUnknownLease or ErrLeaseEnded otherwise. The assignment returned is
// shared: callers must not modify it.
func (m *Manager) Active(token string) (AssignmentView, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[token]
	switch {
	case l == nil:
		return AssignmentView{}, fmt.Errorf("%w: the lease token is not known (the lease ended long ago, or the controller restarted)", ErrUnknownLease)
	case l.state != stateActive:
		return AssignmentView{}, fmt.Errorf("%w: %s", ErrLeaseEnded, orNote(l.endNote))
	}
	return AssignmentView{
		MessageID:      l.a.GetMessageId(),
		Attempt:        int(l.a.GetAttempt()),
		ManifestDigest: l.a.GetManifestDigest(),
		WorkerID:       l.sess.req.GetWorkerId(),
		InPlace:        l.sess.inPlace,
	}, nil
}

// AssignmentView is what Active tells about an active lease.
type AssignmentView struct {
	MessageID      string
	Attempt        int
	ManifestDigest string
	WorkerID       string
	InPlace        bool
}

func orNote(s string) string {
	if s == "" {
		return "the work under this lease is over"
	}
	return s
}
