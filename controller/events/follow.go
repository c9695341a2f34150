package events

import (
	"context"
	"errors"
)

// Follow calls fn with every event appended from now on, in order, until
// ctx ends or the log closes. A follower that falls behind resumes from the
// sequence it was cut off at (replayed from the file), so none is skipped.
// Observers outside the processing loop (metrics, traces) use it.
func (l *Log) Follow(ctx context.Context, fn func(*Event)) {
	l.followFrom(ctx, l.Last()+1, fn)
}

func (l *Log) followFrom(ctx context.Context, from uint64, fn func(*Event)) {
	for ctx.Err() == nil {
		w := l.Watch(WatchOptions{From: from, Follow: true})
		for {
			e, err := w.Next(ctx)
			if err != nil {
				w.Close()
				var slow *SlowWatcherError
				if !errors.As(err, &slow) {
					return
				}
				from = slow.Resume
				break
			}
			fn(e)
		}
	}
}
