package logbook

// Ending a log happens in the background. When its attempt ends, a log
// over the size limit is cut to exactly its tail (a copy of the limit's
// bytes into a new file, renamed over the log), then synced and closed:
// for the default 64 MiB limit that is some 40-60 ms, which used to sit
// between the routine's end and the run's outcome, under the lease
// manager's lock. It now overlaps what follows (the checkpoint, filing,
// the next message or the controller's shutdown).
//
// What stays true:
//   - Nothing is lost or mixed: until the cut is installed the log is the
//     uncut file, whose logical offsets and bytes are the same; a reader
//     or follower sees either file whole (the cut is a rename).
//   - An Append to a log being ended (a usage note written after the
//     attempt) waits for the end, then appends to the cut file.
//   - Whoever renames or reuses an attempt's logs waits first
//     (WaitAttempt: the loop before it sets an interrupted attempt's logs
//     aside), and the controller waits for every log (Wait) before it
//     exits, so a log is cut and on disk when the controller is gone.
//   - A controller killed during a cut leaves the uncut log and a
//     temporary file in the run directory. The run stays in the store's
//     open-run registry until its logs are ended (store.SetLogsEnded),
//     so the next start still sweeps that directory and removes the file.

// closeLocked marks lf closed, so that no one appends to it or trims it
// any more, and ends it in the background.
func (b *Book) closeLocked(k Key, lf *logFile) {
	if lf.closed {
		return // closed while an Append waited for a cut
	}
	lf.closed = true
	delete(b.files, k)
	done := make(chan struct{})
	b.ending[k] = done
	max := b.maxBytes()
	go func() {
		b.end(k, lf, max)
		b.mu.Lock()
		if b.ending[k] == done {
			delete(b.ending, k)
		}
		b.mu.Unlock()
		close(done)
	}()
}

// end cuts lf to its last max bytes when it holds more (max 0: no limit),
// then syncs and closes it. lf is no longer in the book's files, so only
// this goroutine uses it (a background trim in flight sees it closed and
// gives up).
func (b *Book) end(k Key, lf *logFile, max uint64) {
	if max > 0 && uint64(lf.fileSize-lf.header) > max {
		if err := b.truncate(k, lf, max); err != nil {
			b.logTruncateError(k, err)
		}
	}
	_ = lf.f.Sync()
	_ = lf.f.Close()
}

// waitEndingLocked waits, releasing the lock meanwhile, until k is no
// longer being ended.
func (b *Book) waitEndingLocked(k Key) {
	for {
		ch := b.ending[k]
		if ch == nil {
			return
		}
		b.mu.Unlock()
		<-ch
		b.mu.Lock()
	}
}

// Wait returns once every log whose attempt ended is cut, synced and
// closed. The controller calls it before it exits.
func (b *Book) Wait() { b.waitFor(func(Key) bool { return true }) }

// WaitAttempt returns once the logs of messageID's attempt are cut,
// synced and closed (at once when none is being ended).
func (b *Book) WaitAttempt(messageID string, attempt int) {
	b.waitFor(func(k Key) bool { return k.MessageID == messageID && k.Attempt == attempt })
}

// WaitMessage returns once the logs of every attempt of messageID are cut,
// synced and closed.
func (b *Book) WaitMessage(messageID string) {
	b.waitFor(func(k Key) bool { return k.MessageID == messageID })
}

func (b *Book) waitFor(match func(Key) bool) {
	for {
		var ch chan struct{}
		b.mu.Lock()
		for k, c := range b.ending {
			if match(k) {
				ch = c
				break
			}
		}
		b.mu.Unlock()
		if ch == nil {
			return
		}
		<-ch
	}
}
