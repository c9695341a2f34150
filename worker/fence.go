package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/supervisor"
)

// How the worker fences an attempt (see pkg/supervisor):
//
//   - It runs nothing under a lease before the controller has renewed that
//     lease once (a heartbeat is sent at once for it): an assignment that
//     waited in a stopped worker's socket while the controller gave the
//     work to someone else is refused then, not run.
//   - Every process runs under a supervisor that follows the lease's
//     deadline: the send time of the last heartbeat the controller
//     answered plus the lease TTL. That is never later than the
//     controller's own expiry, so when the controller counts the attempt
//     lost, its processes are already being killed, even when this worker
//     is stopped or hung and cannot act.
//   - Supervisors hold the worker's process lock (lockFile) until their
//     trees are gone; a restarted worker with the same id waits for it, so
//     it never reports "nothing running" while its previous process's
//     routines still die.

// fenceKey carries the attempt's fence from runJob to the executor.
type fenceKey struct{}

func withFence(ctx context.Context, f *supervisor.Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// fenceFrom returns the fence runJob attached to ctx, or nil.
func fenceFrom(ctx context.Context) *supervisor.Fence {
	f, _ := ctx.Value(fenceKey{}).(*supervisor.Fence)
	return f
}

// confirm waits until the controller has renewed token once after it was
// delivered (kicking a heartbeat for it) and returns the attempt's lease.
// It fails when ctx ends (the lease was stopped) or when no renewal comes
// within the lease TTL: the controller has then given the work up.
func (w *worker) confirm(ctx context.Context, token string) (*supervisor.Lease, error) {
	ttl := time.Duration(w.leaseTTL.Load())
	if ttl <= 0 {
		return nil, nil // an executor outside any session: no lease to follow
	}
	renewed := w.leases.confirmed(token)
	select {
	case w.kick <- struct{}{}:
	default: // a heartbeat is due anyway
	}
	t := time.NewTimer(ttl)
	defer t.Stop()
	select {
	case <-renewed:
	case <-ctx.Done():
		return nil, fmt.Errorf("the lease was stopped before the work started: %w", context.Cause(ctx))
	case <-t.C:
		return nil, fmt.Errorf("the controller did not renew the lease within %s of its delivery; the work was not started", ttl)
	}
	return w.leases.fence(token, ttl), nil
}

// lockFile is the worker's process lock in its workspace, one per worker id.
func lockFile(ws, id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(ws, layout.Dir, "worker-"+hex.EncodeToString(sum[:6])+".lock")
}

// holdLock takes the worker's process lock: exclusively first, waiting
// while supervisors of a previous process with this id still run, then
// shared, the way every supervisor of this process keeps it.
func holdLock(ws, id string, log *slog.Logger) (*os.File, error) {
	path := lockFile(ws, id)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the worker lock %s: %w", path, err)
	}
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		log.Warn("waiting for the lock of worker "+id+": the routines of its previous process are being stopped, or another worker process with this id runs in this workspace (give each worker its own --id)", "lock", path)
		err = flockRetry(fd, unix.LOCK_EX)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	} else if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := flockRetry(fd, unix.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
