package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
)

// writeDiffFiles streams the diff from manifest to the current tree into
// the run file name, atomically, and makes each of links the same file
// (a hard link; a copy where links are not possible). When an earlier file
// of same (the diffs of earlier attempts) has the same content, name
// becomes a hard link to it: an attempt that leaves the tree as the one
// before did costs no second copy of a large diff.
func (p *Pipeline) writeDiffFiles(ctx context.Context, run *store.Run, manifest *checkpoint.Manifest, name string, same []string, links ...string) (*checkpoint.Manifest, error) {
	dst, err := run.Path(name)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".decree-diff.tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, h)}
	// No fsync here: the run's next Commit makes the diff durable.
	var tree *checkpoint.Manifest
	if l := p.runLane(run); l != nil {
		tree, err = p.diffLane(ctx, l, manifest, cw)
	} else {
		tree, err = p.d.Checkpoints.DiffTo(ctx, p.d.Store.Root(), manifest, cw)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		src := tmp.Name()
		if prev := sameContent(run, same, cw.n, h.Sum(nil)); prev != "" {
			src = prev
		}
		err = linkOrRename(src, tmp.Name(), dst)
	}
	if err != nil {
		return nil, fmt.Errorf("diff the tree against the checkpoint into %s: %w", name, err)
	}
	if err := run.Written(name); err != nil {
		return nil, err
	}
	for _, l := range links {
		lp, err := run.Path(l)
		if err != nil {
			return nil, err
		}
		// The link shares name's inode: the run directory's fsync at the
		// next Commit makes its entry durable, no fsync of its own.
		if err := linkOver(dst, lp); err != nil {
			return nil, fmt.Errorf("write %s: %w", l, err)
		}
	}
	return tree, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// sameContent returns the path of the first run file among names with
// this size and SHA-256, or "".
func sameContent(run *store.Run, names []string, size int64, sum []byte) string {
	for _, name := range names {
		p, err := run.Path(name)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(p); err != nil || fi.Size() != size {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err == nil && bytes.Equal(h.Sum(nil), sum) {
			return p
		}
	}
	return ""
}

// linkOrRename puts src at dst: renamed when src is the new temporary
// file tmp, else hard-linked (src is an earlier file of equal content).
func linkOrRename(src, tmp, dst string) error {
	if src == tmp {
		return os.Rename(tmp, dst)
	}
	return linkOver(src, dst)
}

// linkOver makes dst name the same file as src, replacing dst atomically.
func linkOver(src, dst string) error {
	tmp := filepath.Join(filepath.Dir(dst), ".decree-link.tmp-"+filepath.Base(dst))
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyFile(src, tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// diffFiles lists the paths a diff touches, from its "diff --git" lines,
// reading the diff as a stream (it may be large).
func diffFiles(p string) []string {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var out []string
	prefix := []byte("diff --git a/")
	atStart := true
	for {
		line, err := r.ReadSlice('\n')
		if atStart && bytes.HasPrefix(line, prefix) {
			rest := bytes.TrimSuffix(line[len(prefix):], []byte("\n"))
			if i := bytes.Index(rest, []byte(" b/")); i >= 0 {
				out = append(out, string(rest[:i]))
			}
		}
		atStart = err == nil // a line longer than the buffer continues
		if err != nil && err != bufio.ErrBufferFull {
			return out
		}
	}
}
