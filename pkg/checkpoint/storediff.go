package checkpoint

import (
	"bufio"
	"context"
	"io"
)

// DiffManifestsTo writes the diff from before to after reading both sides
// from the store (no tree on disk), in DiffTo's format.
func (c *Checkpointer) DiffManifestsTo(ctx context.Context, before, after *Manifest, w io.Writer) error {
	bw := bufio.NewWriter(w)
	if err := c.diffManifestsTo(ctx, "", before, after, bw); err != nil {
		return err
	}
	return bw.Flush()
}
