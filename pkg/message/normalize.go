package message

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Message types.
const (
	TypeSpec = "spec"
	TypeTask = "task"
)

// NormalizeInput says where a message came from.
type NormalizeInput struct {
	// FileName is the inbox file name, such as "2025022514320000-1.md" or
	// "fix-types.md". A "<chain>-<seq>.md" name supplies chain and seq.
	FileName string
	// Chain is used when neither the frontmatter nor the file name has one.
	Chain string
	// Seq is used when neither the frontmatter nor the file name has one.
	Seq int
}

// ChainFromFileName returns the chain and seq a "<chain>-<seq>.md" file name
// carries.
func ChainFromFileName(name string) (chain string, seq int, ok bool) {
	base := path.Base(name)
	if !strings.HasSuffix(base, ".md") {
		return "", 0, false
	}
	return SplitID(strings.TrimSuffix(base, ".md"))
}

// SplitID returns the chain and seq of a message id "<chain>-<seq>".
// It is called for every name of a long queue, so it parses by hand
// (the same language as the pattern ^[0-9]{16}-[0-9]{1,9}$).
func SplitID(id string) (chain string, seq int, ok bool) {
	if len(id) < 18 || len(id) > 26 || id[16] != '-' {
		return "", 0, false
	}
	for i := 17; i < len(id); i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return "", 0, false
		}
		seq = seq*10 + int(c-'0')
	}
	if !ValidChain(id[:16]) {
		return "", 0, false
	}
	return id[:16], seq, true
}

// IDLess orders message ids by chain, then by numeric seq ("c-2" before
// "c-10"); ids that do not parse compare as strings.
func IDLess(a, b string) bool {
	ac, as, aok := SplitID(a)
	bc, bs, bok := SplitID(b)
	if !aok || !bok {
		return a < b
	}
	if ac != bc {
		return ac < bc
	}
	return as < bs
}

// Normalize fills the standard fields of m: chain and seq (from the
// frontmatter, else a "<chain>-<seq>.md" file name, else in), id
// ("<chain>-<seq>") and type ("spec" when input_file ends in ".spec.md",
// else "task"; an explicit spec or task is kept). Values present in the
// frontmatter win, but they must agree with the file name and with each
// other; a disagreement is an error that says which values clash.
//
// The fields are reordered: id, chain, seq, type, routine, input_file, then
// every other field in its original order. chain and seq are written as
// integers, id and type as strings.
func Normalize(m *Message, in NormalizeInput) error {
	fileChain, fileSeq, fromFile := ChainFromFileName(in.FileName)
	what := "message"
	if in.FileName != "" {
		what = "message " + in.FileName
	}

	chain := ""
	if v, ok := m.Get("chain"); ok && v != nil {
		chain = ParamValue(v)
		if !ValidChain(chain) {
			return fmt.Errorf("%s: chain %q is not a chain id (16 digits: YYYYMMDDHHMMSS and a 2-digit counter); fix or remove the chain field", what, chain)
		}
		if fromFile && chain != fileChain {
			return fmt.Errorf("%s: frontmatter chain %s disagrees with the file name's chain %s; make them match or remove the chain field", what, chain, fileChain)
		}
	} else if fromFile {
		chain = fileChain
	} else {
		chain = in.Chain
		if !ValidChain(chain) {
			return fmt.Errorf("%s: no chain id in the frontmatter or the file name, and the given chain %q is not valid", what, chain)
		}
	}

	seq := 0
	if v, ok := m.Get("seq"); ok && v != nil {
		n, ok := asSeq(v)
		if !ok {
			return fmt.Errorf("%s: seq %q is not a non-negative whole number; fix or remove the seq field", what, ParamValue(v))
		}
		if fromFile && n != fileSeq {
			return fmt.Errorf("%s: frontmatter seq %d disagrees with the file name's seq %d; make them match or remove the seq field", what, n, fileSeq)
		}
		seq = n
	} else if fromFile {
		seq = fileSeq
	} else {
		if in.Seq < 0 {
			return fmt.Errorf("%s: seq %d is negative", what, in.Seq)
		}
		seq = in.Seq
	}

	id := chain + "-" + strconv.Itoa(seq)
	if v, ok := m.Get("id"); ok && v != nil && ParamValue(v) != id {
		return fmt.Errorf("%s: frontmatter id %q disagrees with chain %s and seq %d (expected %s); fix or remove the id field", what, ParamValue(v), chain, seq, id)
	}

	typ := TypeTask
	if strings.HasSuffix(m.InputFile(), ".spec.md") {
		typ = TypeSpec
	}
	if v, ok := m.Get("type"); ok && v != nil {
		switch t := ParamValue(v); t {
		case TypeSpec, TypeTask:
			typ = t
		default:
			return fmt.Errorf("%s: type: got %q, allowed: spec, task", what, t)
		}
	}

	chainNum, _ := strconv.Atoi(chain) // 16 digits always fit an int64
	head := []Field{
		{Key: "id", Value: id},
		{Key: "chain", Value: chainNum},
		{Key: "seq", Value: seq},
		{Key: "type", Value: typ},
	}
	for _, k := range []string{"routine", "input_file"} {
		if v, ok := m.Get(k); ok {
			head = append(head, Field{Key: k, Value: v})
		}
	}
	for _, f := range m.Fields {
		switch f.Key {
		case "id", "chain", "seq", "type", "routine", "input_file":
			continue
		}
		head = append(head, f)
	}
	m.Fields = head
	m.HasFrontmatter = true
	return nil
}
