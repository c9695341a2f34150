package checkpoint

import (
	"bufio"
	"context"
	"fmt"
	"io"
)

// DiffManifestsTo writes the diff from before to after reading both sides
// from the store (no tree on disk), in the same format as DiffTo: what a
// parallel chain's lane changed, or a merge, both of which exist only as
// manifests. Changes with a side over StreamThreshold stream from the
// store as DiffTo's do, so memory stays bounded. A nil manifest is an
// empty tree. Every content of both manifests must be in the store (a
// missing one is an error wrapping ErrMissingBlob); permission bits
// beyond git's 644/755 modes are not in diffs, as with DiffTo.
func (c *Checkpointer) DiffManifestsTo(ctx context.Context, before, after *Manifest, w io.Writer) error {
	if before == nil {
		before = &Manifest{}
	}
	if after == nil {
		after = &Manifest{}
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	// Root "" makes side read both sides from the store; the large ones
	// stream from it through writeLargeDiff.
	if err := c.diffManifestsTo(ctx, "", before, after, bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}
