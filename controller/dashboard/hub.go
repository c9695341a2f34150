package dashboard

import (
	"context"
	"log/slog"
	"sync"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// hub follows the controller's events once for the whole dashboard (one
// WatchEvents stream, however many pages are open) and signals each
// subscriber when something happens.
type hub struct {
	c   decreev1.ControllerServiceClient
	log *slog.Logger

	mu      sync.Mutex
	subs    map[chan string]struct{}
	cancel  context.CancelFunc
	stopped bool
}

func newHub(c decreev1.ControllerServiceClient, log *slog.Logger) *hub {
	return &hub{c: c, log: log, subs: map[chan string]struct{}{}}
}

// subscribe returns a channel signalled (without blocking the hub: a
// pending signal absorbs later ones) on every event, and starts following
// events on the first subscription.
func (h *hub) subscribe() (<-chan string, func()) {
	ch := make(chan string, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	if h.cancel == nil && !h.stopped {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		go h.follow(ctx)
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *hub) close() {
	h.mu.Lock()
	h.stopped = true
	if h.cancel != nil {
		h.cancel()
	}
	h.mu.Unlock()
}

func (h *hub) broadcast(kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- kind:
		default:
		}
	}
}

// follow watches every event from the oldest kept one (history is read
// once and not signalled), then live ones, reconnecting after a cut-off
// or a controller restart from the sequence after the last one seen.
func (h *hub) follow(ctx context.Context) {
	var from uint64
	live := false
	for ctx.Err() == nil {
		stream, err := h.c.WatchEvents(ctx, &decreev1.WatchEventsRequest{FromSequence: from, Follow: true})
		if err == nil {
			for {
				resp, err := stream.Recv()
				if err != nil {
					h.log.Debug("dashboard: event stream ended; reconnecting", "err", err)
					break
				}
				ev := resp.GetEvent()
				from = ev.GetSequence() + 1
				if !live && time.Since(ev.GetTime().AsTime()) > 2*time.Second {
					continue // history replayed at start: not news
				}
				live = true
				h.broadcast(kindName(ev.GetKind()))
			}
		}
		live = true
		// Something may have happened while disconnected.
		h.broadcast("reconnected")
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
