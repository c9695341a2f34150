package merge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/decreehq/decree/pkg/checkpoint"
)

// both merges a path that ours and theirs both changed from base, to
// different results. It returns the merged state, or the reason it
// conflicts; an error only when the store cannot give a content.
func both(st *checkpoint.Store, p string, b, o, t state) (state, string, error) {
	sym := func(s state) bool { return s.ok && s.e.Mode == checkpoint.ModeSymlink }
	switch {
	case !b.ok && o.ok && t.ok:
		if o.e.SHA256 == t.e.SHA256 && sym(o) == sym(t) {
			return state{}, "both added with different modes", nil
		}
		return state{}, "both added with different content", nil
	case !o.ok:
		return state{}, "deleted here, changed by the chain", nil
	case !t.ok:
		return state{}, "changed here, deleted by the chain", nil
	case sym(b) || sym(o) || sym(t):
		switch {
		case sym(o) && sym(t):
			return state{}, "symlink changed differently on both sides", nil
		case sym(b):
			return state{}, "symlink changed differently on both sides (one made it a file)", nil
		default:
			return state{}, "file changed on both sides (one made it a symlink)", nil
		}
	}
	// Three regular files: permission bits and content merge separately.
	perm, ok := pick(b.perm, o.perm, t.perm)
	if !ok {
		return state{}, fmt.Sprintf("mode changed differently (%03o here, %03o by the chain)", uint32(o.perm), uint32(t.perm)), nil
	}
	out := state{ok: true, e: o.e, perm: perm}
	switch {
	case o.e.SHA256 == t.e.SHA256 || t.e.SHA256 == b.e.SHA256:
	case o.e.SHA256 == b.e.SHA256:
		out.e = t.e
	default:
		data, reason, err := content3(st, p, b.e, o.e, t.e)
		if err != nil || reason != "" {
			return state{}, reason, err
		}
		sum := sha256.Sum256(data)
		out.e.SHA256, out.e.Size = hex.EncodeToString(sum[:]), int64(len(data))
		if err := st.Put(out.e.SHA256, data); err != nil {
			return state{}, "", fmt.Errorf("merge %s: store the merged content: %w", p, err)
		}
	}
	out.e.Mode = checkpoint.ModeOf(perm)
	return out, "", nil
}

// pick is the three-way merge of one value: the side that changed it.
func pick(b, o, t fs.FileMode) (fs.FileMode, bool) {
	switch {
	case o == b || o == t:
		return t, true
	case t == b:
		return o, true
	}
	return 0, false
}

// content3 merges the text of three files, or says why it cannot.
func content3(st *checkpoint.Store, p string, b, o, t checkpoint.Entry) ([]byte, string, error) {
	const binary = "binary file changed on both sides"
	for _, e := range []checkpoint.Entry{b, o, t} {
		if e.Size > checkpoint.StreamThreshold {
			return nil, binary + fmt.Sprintf(" (over %d MiB: not merged line by line)", checkpoint.StreamThreshold>>20), nil
		}
	}
	var data [3][]byte
	for i, e := range []checkpoint.Entry{b, o, t} {
		d, err := st.Get(e.SHA256)
		if err != nil {
			return nil, "", fmt.Errorf("merge %s: %w", p, err)
		}
		data[i] = d
	}
	for _, d := range data {
		if bytes.IndexByte(d, 0) >= 0 {
			return nil, binary, nil
		}
	}
	merged, spans := text3(data[0], data[1], data[2])
	if len(spans) > 0 {
		return nil, describeSpans(spans), nil
	}
	return merged, "", nil
}
