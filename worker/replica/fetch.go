package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// blobJob is a verified-or-to-verify content ready to be written to dests.
type blobJob struct {
	sum   string
	data  []byte // small blob, not yet hashed
	tmp   string // large blob, already verified, in the replica's tmp dir
	dests []dest
}

// fetch downloads the blobs sums (each needed at need[sum]) in batches and
// writes them with a pool of writers.
func (w *writer) fetch(ctx context.Context, c Client, token string, sums []string, need map[string][]dest, st *Synced) error {
	if len(sums) == 0 {
		return nil
	}
	sort.Strings(sums) // deterministic batches
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan blobJob, 2*w.r.opts.Workers)
	var wg sync.WaitGroup
	for i := 0; i < w.r.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					if j.tmp != "" {
						os.Remove(j.tmp)
					}
					continue
				}
				if err := w.writeJob(j); err != nil {
					cancel(err)
				}
			}
		}()
	}
	var recvErr error
	for start := 0; start < len(sums) && recvErr == nil; {
		end, bytes := start, int64(0)
		for end < len(sums) && (end == start || (bytes+need[sums[end]][0].e.Size <= w.r.opts.BatchBytes && end-start < 8192)) {
			bytes += need[sums[end]][0].e.Size
			end++
		}
		recvErr = w.receive(ctx, c, token, sums[start:end], need, jobs, st)
		start = end
	}
	close(jobs)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return recvErr
}

// receive runs one GetBlobs call and hands each blob to the writers.
func (w *writer) receive(ctx context.Context, c Client, token string, sums []string, need map[string][]dest, jobs chan<- blobJob, st *Synced) error {
	stream, err := c.GetBlobs(ctx, &decreev1.GetBlobsRequest{LeaseToken: token, Sha256: sums})
	if err != nil {
		return fmt.Errorf("replica sync: fetch contents: %w", err)
	}
	pending := make(map[string]bool, len(sums))
	for _, s := range sums {
		pending[s] = true
	}
	var (
		cur  string
		off  uint64
		tmp  *os.File
		h    hash.Hash
		want int64
	)
	abort := func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			tmp = nil
		}
	}
	defer abort()
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				return cause
			}
			return fmt.Errorf("replica sync: fetch contents: %w", err)
		}
		sum, data := msg.GetSha256(), msg.GetData()
		st.FetchedBytes += int64(len(data))
		if cur == "" {
			if !pending[sum] || msg.GetOffset() != 0 {
				return fmt.Errorf("replica sync: the controller sent blob %s at offset %d, which was not asked for", sum, msg.GetOffset())
			}
			want = need[sum][0].e.Size
			if msg.GetLast() { // a blob in one chunk
				delete(pending, sum)
				st.FetchedBlobs++
				select {
				case jobs <- blobJob{sum: sum, data: data, dests: need[sum]}:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				continue
			}
			cur, off = sum, 0
			if tmp, err = os.CreateTemp(filepath.Join(w.r.dir, "tmp"), "fetch-*"); err != nil {
				return fmt.Errorf("replica sync: %w", err)
			}
			h = sha256.New()
		} else if sum != cur || msg.GetOffset() != off {
			return fmt.Errorf("replica sync: blob %s: chunk at offset %d out of order (want %s at %d)", sum, msg.GetOffset(), cur, off)
		}
		if int64(off)+int64(len(data)) > want {
			return fmt.Errorf("replica sync: blob %s is longer than the %d bytes the manifest says", sum, want)
		}
		if _, err := tmp.Write(data); err != nil {
			return fmt.Errorf("replica sync: write %s: %w", tmp.Name(), err)
		}
		h.Write(data)
		off += uint64(len(data))
		if !msg.GetLast() {
			continue
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != cur {
			return fmt.Errorf("replica sync: blob %s arrived corrupt (hashes to %s); try again", cur, got)
		}
		name := tmp.Name()
		if err := tmp.Close(); err != nil {
			return fmt.Errorf("replica sync: %w", err)
		}
		tmp = nil
		delete(pending, cur)
		st.FetchedBlobs++
		select {
		case jobs <- blobJob{sum: cur, tmp: name, dests: need[cur]}:
		case <-ctx.Done():
			os.Remove(name)
			return context.Cause(ctx)
		}
		cur = ""
	}
	if cur != "" || len(pending) > 0 {
		return fmt.Errorf("replica sync: the controller's blob stream ended with %d content(s) missing", len(pending))
	}
	return nil
}

// writeJob writes one blob to all its destinations.
func (w *writer) writeJob(j blobJob) error {
	if j.tmp == "" {
		sum := sha256.Sum256(j.data)
		if hex.EncodeToString(sum[:]) != j.sum {
			return fmt.Errorf("replica sync: blob %s arrived corrupt (hashes to %x); try again", j.sum, sum)
		}
		for _, d := range j.dests {
			if err := w.writeData(d, j.data, sum); err != nil {
				return err
			}
		}
		return nil
	}
	first := j.dests[0]
	abs, err := w.prepare(first.rel)
	if err != nil {
		os.Remove(j.tmp)
		return err
	}
	err = os.Chmod(j.tmp, first.e.Mode.Perm())
	if err == nil {
		err = os.Rename(j.tmp, abs)
	}
	if err != nil {
		os.Remove(j.tmp)
		return fmt.Errorf("replica sync: write %s: %w", first.rel, err)
	}
	var sum [32]byte
	hex.Decode(sum[:], []byte(j.sum))
	w.record(first.rel, abs, sum)
	for _, d := range j.dests[1:] {
		if err := w.copyFile(abs, d); err != nil {
			return err
		}
	}
	return nil
}

// writeData writes verified content to d. A path that does not exist yet
// is created and written directly: the replica is not authoritative, and a
// file left half-written by a crash has stat data no cache entry vouches
// for, so the next scan rehashes it and the next sync replaces it. An
// existing file is replaced through a temporary file and a rename, so a
// hard link to its old content (a staged local source) stays intact.
func (w *writer) writeData(d dest, data []byte, sum [32]byte) error {
	abs, err := w.prepare(d.rel)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, d.e.Mode.Perm())
	if err == nil {
		_, err = f.Write(data)
		var fi os.FileInfo
		if err == nil {
			fi, err = f.Stat()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(abs)
			return fmt.Errorf("replica sync: write %s: %w", d.rel, err)
		}
		w.wrote(written{rel: d.rel, sum: sum, key: keyOf(fi)})
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("replica sync: write %s: %w", d.rel, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".decree-sync-*")
	if err != nil {
		return fmt.Errorf("replica sync: write %s: %w", d.rel, err)
	}
	_, err = tmp.Write(data)
	return w.commit(tmp, err, d, abs, sum)
}

// copyFile copies src to d atomically, checking the content's hash.
func (w *writer) copyFile(src string, d dest) error {
	abs, err := w.prepare(d.rel)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("replica sync: copy to %s: %w", d.rel, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".decree-sync-*")
	if err != nil {
		return fmt.Errorf("replica sync: write %s: %w", d.rel, err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, h), in)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	if err == nil && hex.EncodeToString(sum[:]) != d.e.SHA256 {
		err = errors.New("the local copy changed while it was read")
	}
	return w.commit(tmp, err, d, abs, sum)
}

// commit finishes a temporary file whose content was written with error
// err: it sets the mode, closes it and renames it over abs, or removes it.
func (w *writer) commit(tmp *os.File, err error, d dest, abs string, sum [32]byte) error {
	if err == nil {
		err = tmp.Chmod(d.e.Mode.Perm())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), abs)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("replica sync: write %s: %w", d.rel, err)
	}
	w.record(d.rel, abs, sum)
	return nil
}

func (w *writer) record(rel, abs string, sum [32]byte) {
	fi, err := os.Lstat(abs)
	if err != nil {
		return
	}
	w.wrote(written{rel: rel, sum: sum, key: keyOf(fi)})
}
