package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// Log records for people. Without --verbose, decreectl prints what its
// embedded controller and worker log as "decree: warning: TEXT (key=value
// ...)" and "decree: error: ...", never as raw slog lines
// ("time=... level=WARN msg=..."). Many warnings are also warning events,
// which run and process print as "decree: warning: TEXT" when they follow
// the chain: the log line comes first (the controller logs before it
// records the event), and shownWarnings lets the event printer skip a text
// the log already showed, so each warning appears once.

// shownWarnings remembers warning texts printed from the log, until the
// event with the same text comes along.
type shownWarnings struct {
	mu   sync.Mutex
	seen map[string]int
}

func (s *shownWarnings) add(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	if len(s.seen) > 1000 { // events that never came: forget them
		clear(s.seen)
	}
	s.seen[text]++
}

// take reports whether text was shown from the log, and forgets it once.
func (s *shownWarnings) take(text string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[text] == 0 {
		return false
	}
	if s.seen[text]--; s.seen[text] == 0 {
		delete(s.seen, text)
	}
	return true
}

// lineHandler is the slog.Handler of those lines.
type lineHandler struct {
	w     io.Writer
	mu    *sync.Mutex
	level slog.Leveler
	shown *shownWarnings
	attrs []slog.Attr
	group string
}

func newLineHandler(w io.Writer, level slog.Leveler, shown *shownWarnings) *lineHandler {
	return &lineHandler{w: w, mu: &sync.Mutex{}, level: level, shown: shown}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("decree: ")
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	var kv []string
	add := func(a slog.Attr) {
		if a.Key == "part" || a.Equal(slog.Attr{}) { // which half of decreectl said it is no news
			return
		}
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		kv = append(kv, fmt.Sprintf("%s=%v", key, a.Value.Resolve()))
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	if len(kv) > 0 {
		b.WriteString(" (" + strings.Join(kv, ", ") + ")")
	}
	b.WriteString("\n")
	if r.Level >= slog.LevelWarn && r.Level < slog.LevelError && h.shown != nil {
		h.shown.add(r.Message)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}
