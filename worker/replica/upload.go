package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Uploaded says what Upload sent.
type Uploaded struct {
	Blobs int
	Bytes int64
}

// Upload sends the contents of after that base does not have (by hash)
// with PutBlobs, reading them from the replica and checking each against
// the hash the scan found; a file that changed since the scan or is
// larger than MaxBlobSize fails the upload with an error saying so.
func (r *Replica) Upload(ctx context.Context, c Client, token string, base, after *checkpoint.Manifest) (Uploaded, error) {
	var up Uploaded
	have := make(map[string]bool, len(base.Files))
	for _, e := range base.Files {
		have[e.SHA256] = true
	}
	src := map[string]string{}
	for _, p := range after.Paths() {
		e := after.Files[p]
		if e.Mode == checkpoint.ModeSymlink || e.Size == 0 || have[e.SHA256] || src[e.SHA256] != "" {
			continue
		}
		if e.Size > r.opts.MaxBlobSize {
			return up, fmt.Errorf("replica upload: %s is %d bytes, more than the %d bytes a blob may have; list it in .decreeignore", p, e.Size, r.opts.MaxBlobSize)
		}
		src[e.SHA256] = p
	}
	if len(src) == 0 {
		return up, nil
	}
	sums := make([]string, 0, len(src))
	for s := range src {
		sums = append(sums, s)
	}
	sort.Strings(sums)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // an aborted stream leaves nothing on the controller
	stream, err := c.PutBlobs(ctx)
	if err != nil {
		return up, fmt.Errorf("replica upload: %w", err)
	}
	buf := make([]byte, r.opts.ChunkSize)
	next := make([]byte, r.opts.ChunkSize)
	for _, sum := range sums {
		n, err := r.sendFile(stream, token, sum, src[sum], buf, next)
		if err != nil {
			return up, err
		}
		up.Blobs++
		up.Bytes += n
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return up, fmt.Errorf("replica upload: the controller refused the contents: %w", err)
	}
	if len(resp.GetStored()) != len(sums) {
		return up, fmt.Errorf("replica upload: the controller stored %d of %d contents", len(resp.GetStored()), len(sums))
	}
	return up, nil
}

// sendFile streams one file as chunks; the last chunk goes only after the
// content was checked against sum.
func (r *Replica) sendFile(stream interface {
	Send(*decreev1.PutBlobsRequest) error
}, token, sum, rel string, cur, next []byte) (int64, error) {
	f, err := fsutil.OpenFileNoFollow(filepath.Join(r.root, filepath.FromSlash(rel)))
	if err != nil {
		return 0, fmt.Errorf("replica upload: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	read := func(b []byte) (int, bool, error) {
		n, err := io.ReadFull(f, b)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, true, nil
		}
		return n, false, err
	}
	n, eof, err := read(cur)
	if err != nil {
		return 0, fmt.Errorf("replica upload: read %s: %w", rel, err)
	}
	var off uint64
	for {
		h.Write(cur[:n])
		last := eof
		m := 0
		if !eof {
			if m, eof, err = read(next); err != nil {
				return 0, fmt.Errorf("replica upload: read %s: %w", rel, err)
			}
			last = eof && m == 0
		}
		if last && hex.EncodeToString(h.Sum(nil)) != sum {
			return 0, fmt.Errorf("replica upload: %s changed after the scan (a process still writing?); the attempt's result cannot be sent", rel)
		}
		if err := stream.Send(&decreev1.PutBlobsRequest{LeaseToken: token, Sha256: sum, Offset: off, Data: cur[:n], Last: last}); err != nil {
			return 0, fmt.Errorf("replica upload: send %s: %w", rel, err)
		}
		off += uint64(n)
		if last {
			return int64(off), nil
		}
		cur, next, n = next, cur, m
	}
}
