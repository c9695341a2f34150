package message

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Streaming
//
// A message body may be tens of megabytes, and nothing that decree does
// with a message needs the body in memory: it reads and rewrites the
// frontmatter and copies the body, byte for byte, from file to file.
// ReadHead reads a message up to its body and hands the body over as a
// reader; RenderTo writes a frontmatter followed by a body read from a
// reader. Parse and Render are these two applied to byte slices, so the
// streamed and the in-memory forms follow one set of rules.

// MaxFrontmatterBytes bounds the frontmatter block ReadHead holds in
// memory. A block that is not closed within it is an error: the fields
// are metadata, large content belongs in the body.
const MaxFrontmatterBytes = 1 << 20

// Head is a message read up to the start of its body.
type Head struct {
	// Message holds the frontmatter; its Body is nil.
	Message *Message
	// Body reads the body, byte for byte, from where the frontmatter
	// ended.
	Body io.Reader
	// Offset is the number of bytes before the body (the frontmatter
	// block with its delimiters and a skipped byte-order mark).
	Offset int64
}

// ReadHead reads the frontmatter of a message from r (see the package
// documentation for the format) and returns it with a reader of the rest,
// the body. At most MaxFrontmatterBytes of frontmatter are held; errors
// are *ParseError values, or the read error of r.
func ReadHead(r io.Reader) (*Head, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	m, n, err := readHead(br, MaxFrontmatterBytes)
	if err != nil {
		return nil, err
	}
	return &Head{Message: m, Body: br, Offset: n}, nil
}

// readHead consumes the frontmatter block of br, when there is one, and
// returns the message without body and the number of bytes consumed.
// Without a block nothing is consumed. limit < 0 means no limit.
func readHead(br *bufio.Reader, limit int) (*Message, int64, error) {
	peek, err := br.Peek(len(bom) + 5)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, 0, err
	}
	skip := 0
	if bytes.HasPrefix(peek, bom) {
		if _, ok := delimiterLine(peek[len(bom):]); ok {
			skip = len(bom)
		}
	}
	n, ok := delimiterLine(peek[skip:])
	if !ok {
		return &Message{}, 0, nil
	}
	consumed := int64(skip + n)
	if _, err := br.Discard(skip + n); err != nil {
		return nil, 0, err
	}
	var yaml []byte
	lineStart := true
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && lineStart {
			if m, ok := delimiterLine(line); ok && m == len(line) {
				consumed += int64(m)
				fields, derr := decodeFrontmatter(yaml, 1)
				if derr != nil {
					return nil, 0, derr
				}
				return &Message{Fields: fields, HasFrontmatter: true}, consumed, nil
			}
		}
		consumed += int64(len(line))
		yaml = append(yaml, line...)
		if limit >= 0 && len(yaml) > limit {
			return nil, 0, &ParseError{Line: 1, Msg: fmt.Sprintf(`the frontmatter block opened here is not closed within its first %d KiB; close it with a line containing only "---" and put large content in the body`, limit>>10)}
		}
		switch {
		case err == nil:
			lineStart = true
		case errors.Is(err, bufio.ErrBufferFull):
			lineStart = false
		case errors.Is(err, io.EOF):
			return nil, 0, &ParseError{Line: 1, Msg: `the frontmatter block opened here is never closed; add a line containing only "---" after it`}
		default:
			return nil, 0, err
		}
	}
}

// RenderTo writes the message to w as Render does, with the body read
// from body instead of m.Body, and returns the number of bytes written.
// The body is copied byte for byte through a small buffer.
func (m *Message) RenderTo(w io.Writer, body io.Reader) (int64, error) {
	br := bufio.NewReaderSize(body, 32<<10)
	needBlock := m.HasFrontmatter || len(m.Fields) > 0
	if !needBlock {
		// A body that itself starts with a "---" line gets an empty block
		// in front, so it is not read back as frontmatter.
		peek, err := br.Peek(len(bom) + 5)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if _, ok := delimiterLine(bytes.TrimPrefix(peek, bom)); ok {
			needBlock = true
		}
	}
	var written int64
	if needBlock {
		var head bytes.Buffer
		head.WriteString("---\n")
		head.Write(encodeFields(m.Fields))
		head.WriteString("---\n")
		n, err := w.Write(head.Bytes())
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	n, err := br.WriteTo(w)
	return written + n, err
}

// ReadHeadFile reads the frontmatter of the message file at path (see
// ReadHead); the body is not read. A file that cannot be read gives its
// *fs.PathError, a frontmatter that does not parse a *ParseError.
func ReadHeadFile(path string) (*Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := ReadHead(f)
	if err != nil {
		return nil, err
	}
	return h.Message, nil
}
