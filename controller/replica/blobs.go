package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/decreehq/decree/pkg/checkpoint"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// SendBlobs streams the contents of sums, each in chunks of at most
// ChunkSize bytes, through send. Every hash must belong to the manifest
// published for the lease (checked before anything is sent). A blob's last
// chunk is sent only after its content was verified, so a receiver that
// checks `last` never accepts a corrupt blob.
func (s *Service) SendBlobs(ctx context.Context, token string, sums []string, send func(*decreev1.GetBlobsResponse) error) error {
	p, _, err := s.lookup(token)
	if err != nil {
		return err
	}
	for _, sum := range sums {
		if !checkpoint.ValidHash(sum) {
			return fmt.Errorf("%w: %q is not a SHA-256 (64 lowercase hex digits)", ErrInvalid, sum)
		}
	}
	paths := make([]string, len(sums))
	for i, sum := range sums {
		rel, ok := p.path(sum)
		if !ok {
			return fmt.Errorf("%w: %s (ask only for contents the manifest lists)", ErrForbidden, sum)
		}
		paths[i] = rel
	}
	// Small files are read and verified ahead by a few goroutines while
	// earlier ones are being sent; the order of the stream is kept.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const ahead = 16 // bounds the memory read ahead: (16+4) chunks
	type loaded struct {
		data []byte
		ok   bool
	}
	slots := make([]chan loaded, len(sums))
	for i := range slots {
		slots[i] = make(chan loaded, 1)
	}
	next := make(chan int, ahead)
	go func() {
		defer close(next)
		for i := range sums {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < 4; w++ {
		go func() {
			for i := range next {
				data, ok := s.smallFromTree(sums[i], paths[i])
				slots[i] <- loaded{data, ok}
			}
		}()
	}
	for i, sum := range sums {
		var l loaded
		select {
		case l = <-slots[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if l.ok {
			if err := send(&decreev1.GetBlobsResponse{Sha256: sum, Data: l.data, Last: true}); err != nil {
				return err
			}
			continue
		}
		if err := s.sendStored(sum, paths[i], send); err != nil {
			return err
		}
	}
	return nil
}

// sendStored sends one blob from the object store, in chunks. (Small
// blobs whose file in the tree still has the content are sent from there,
// without decompression, by SendBlobs.)
func (s *Service) sendStored(sum, rel string, send func(*decreev1.GetBlobsResponse) error) error {
	r, err := s.opts.Objects.Open(sum)
	if err != nil {
		return fmt.Errorf("%w: %s (%s): %w", ErrMissing, rel, sum, err)
	}
	defer r.Close()
	h := sha256.New()
	chunk := s.opts.ChunkSize
	cur, next := make([]byte, chunk), make([]byte, chunk)
	n, err := io.ReadFull(r, cur)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return fmt.Errorf("read blob %s of %s: %w", sum, rel, err)
	}
	var off uint64
	for {
		h.Write(cur[:n])
		m := 0
		end := err == io.ErrUnexpectedEOF || err == io.EOF
		if !end {
			m, err = io.ReadFull(r, next)
			if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
				return fmt.Errorf("read blob %s of %s: %w", sum, rel, err)
			}
			end = m == 0
		}
		if end {
			if got := hex.EncodeToString(h.Sum(nil)); got != sum {
				return fmt.Errorf("%w: the controller's stored copy of %s is corrupt (hashes to %s); run a new snapshot", checkpoint.ErrBlobMismatch, rel, got)
			}
		}
		if serr := send(&decreev1.GetBlobsResponse{Sha256: sum, Offset: off, Data: cur[:n], Last: end}); serr != nil {
			return serr
		}
		if end {
			return nil
		}
		off += uint64(n)
		cur, next, n = next, cur, m
	}
}

// smallFromTree reads rel when it is a regular file of at most one chunk
// whose content hashes to sum. The path comes from the controller's own
// snapshot, and whatever is read is only sent when it hashes to a content
// of the published manifest, so nothing else can leak even if the tree
// changed since (a symlink at rel itself is not followed).
func (s *Service) smallFromTree(sum, rel string) ([]byte, bool) {
	f, err := os.OpenFile(filepath.Join(s.opts.Root, filepath.FromSlash(rel)), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > int64(s.opts.ChunkSize) {
		return nil, false
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, false
	}
	got := sha256.Sum256(data)
	if hex.EncodeToString(got[:]) != sum {
		return nil, false
	}
	return data, true
}

// ReceiveBlobs stores the blobs a worker uploads under an active lease,
// reading requests through recv until it returns io.EOF, and returns the
// hashes stored. Each blob arrives as chunks with consecutive offsets from
// 0, the final one marked last; its SHA-256 is checked and its size held
// to MaxBlobSize before it is stored. The first bad blob ends the call with
// an error; blobs stored before it stay stored (they are complete and
// verified), the bad one leaves nothing behind, and so does a connection
// that breaks in the middle of a blob.
func (s *Service) ReceiveBlobs(recv func() (*decreev1.PutBlobsRequest, error)) ([]string, error) {
	var stored []string
	token := ""
	for {
		req, err := recv()
		if err == io.EOF {
			return stored, nil
		}
		if err != nil {
			return stored, err
		}
		if token == "" {
			token = req.GetLeaseToken()
		}
		if req.GetLeaseToken() != token {
			return stored, fmt.Errorf("%w: one upload carries two lease tokens", ErrInvalid)
		}
		if _, err := s.opts.Leases.Active(token); err != nil {
			return stored, err
		}
		sum := req.GetSha256()
		if !checkpoint.ValidHash(sum) {
			return stored, fmt.Errorf("%w: %q is not a SHA-256 (64 lowercase hex digits)", ErrInvalid, sum)
		}
		if req.GetOffset() != 0 {
			return stored, fmt.Errorf("%w: blob %s starts at offset %d, want 0", ErrInvalid, sum, req.GetOffset())
		}
		br := &blobReader{recv: recv, cur: req, token: token, sum: sum}
		if _, err := s.opts.Objects.PutReader(sum, br, s.opts.MaxBlobSize); err != nil {
			if errors.Is(err, checkpoint.ErrBlobTooLarge) {
				return stored, fmt.Errorf("%w: the controller accepts files of at most %d bytes; list the file in .decreeignore, or start the controller with a higher limit", err, s.opts.MaxBlobSize)
			}
			return stored, fmt.Errorf("upload of blob %s: %w", sum, err)
		}
		stored = append(stored, sum)
	}
}

// blobReader reads one blob's chunks from an upload stream.
type blobReader struct {
	recv  func() (*decreev1.PutBlobsRequest, error)
	cur   *decreev1.PutBlobsRequest
	pos   int    // read position in cur.Data
	off   uint64 // bytes of the blob before cur
	token string
	sum   string
	done  bool
}

func (b *blobReader) Read(p []byte) (int, error) {
	for {
		if b.pos < len(b.cur.GetData()) {
			n := copy(p, b.cur.GetData()[b.pos:])
			b.pos += n
			return n, nil
		}
		if b.cur.GetLast() || b.done {
			b.done = true
			return 0, io.EOF
		}
		b.off += uint64(len(b.cur.GetData()))
		next, err := b.recv()
		if err == io.EOF {
			return 0, fmt.Errorf("%w: the upload ended in the middle of blob %s", io.ErrUnexpectedEOF, b.sum)
		}
		if err != nil {
			return 0, fmt.Errorf("upload interrupted in the middle of blob %s: %w", b.sum, err)
		}
		switch {
		case next.GetLeaseToken() != b.token:
			return 0, fmt.Errorf("%w: one upload carries two lease tokens", ErrInvalid)
		case next.GetSha256() != b.sum:
			return 0, fmt.Errorf("%w: blob %s ended without a chunk marked last (next chunk is for %s)", ErrInvalid, b.sum, next.GetSha256())
		case next.GetOffset() != b.off:
			return 0, fmt.Errorf("%w: chunk of blob %s at offset %d, want %d", ErrInvalid, b.sum, next.GetOffset(), b.off)
		}
		b.cur, b.pos = next, 0
	}
}
