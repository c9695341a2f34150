package dashboard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

const (
	// diffPageLines and diffPageBytes bound one page of a diff.
	diffPageLines = 2000
	diffPageBytes = 512 << 10
	// diffLineShown is the longest line shown; the raw diff has the rest.
	diffLineShown = 2000
	// diffSummaryScan is how much of a diff the per-file summary reads.
	diffSummaryScan = 256 << 20
)

var diffName = regexp.MustCompile(`^changes(\.try-[0-9]{3})?\.diff$`)

// artifactReader reads a run file from an offset as an io.Reader; Close
// ends the stream.
type artifactReader struct {
	stream interface {
		Recv() (*decreev1.GetArtifactResponse, error)
	}
	cancel context.CancelFunc
	buf    []byte
}

func (s *Server) openArtifact(ctx context.Context, id, name string, offset uint64) (*artifactReader, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := s.c.GetArtifact(ctx, &decreev1.GetArtifactRequest{MessageId: id, Name: name, Offset: offset})
	if err != nil {
		cancel()
		return nil, err
	}
	return &artifactReader{stream: st, cancel: cancel}, nil
}

func (a *artifactReader) Read(p []byte) (int, error) {
	for len(a.buf) == 0 {
		resp, err := a.stream.Recv()
		if err != nil {
			return 0, err
		}
		a.buf = resp.GetData()
	}
	n := copy(p, a.buf)
	a.buf = a.buf[n:]
	return n, nil
}

func (a *artifactReader) Close() { a.cancel() }

// diffFileSum is one file of a diff's summary.
type diffFileSum struct {
	Path     string
	Add, Del int
	Binary   bool
	Offset   uint64 // where its section starts
}

// diffLine is one shown line.
type diffLine struct {
	Kind     string // add, del, ctx, hunk, meta
	Old, New int    // line numbers (0: none)
	Text     string
	Cut      bool
}

// diffSection is one file's part of a page.
type diffSection struct {
	Path      string
	Continued bool
	Lines     []diffLine
}

type diffView struct {
	ID       string
	Name     string
	Names    []string
	Files    []diffFileSum
	Partial  bool
	TotalAdd int
	TotalDel int
	Offset   uint64
	Sections []diffSection
	Next     template.URL // query of the next page, empty on the last
	Empty    bool
}

func (v diffView) title() string { return "Diff of " + v.ID }

// readLine reads one line of at most keep bytes (the rest of a longer line
// is skipped) and returns it without its newline, with the bytes consumed.
func readLine(br *bufio.Reader, keep int) (line string, cut bool, n int, err error) {
	var b []byte
	for {
		frag, e := br.ReadSlice('\n')
		n += len(frag)
		if room := keep + 1 - len(b); room > 0 {
			b = append(b, frag[:min(len(frag), room)]...)
		}
		if errors.Is(e, bufio.ErrBufferFull) {
			continue
		}
		if e != nil && n == 0 {
			return "", false, 0, e
		}
		content := n
		if n > 0 && len(frag) > 0 && frag[len(frag)-1] == '\n' {
			content--
		}
		if content > keep {
			return strings.ToValidUTF8(string(b[:keep]), "\uFFFD"), true, n, nil
		}
		return strings.ToValidUTF8(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), "\uFFFD"), false, n, nil
	}
}

// diffSummary scans a diff's headers and counts each file's added and
// removed lines, reading at most diffSummaryScan bytes.
func (s *Server) diffSummary(ctx context.Context, id, name string) ([]diffFileSum, bool, error) {
	ar, err := s.openArtifact(ctx, id, name, 0)
	if err != nil {
		return nil, false, err
	}
	defer ar.Close()
	br := bufio.NewReaderSize(ar, 64<<10)
	var (
		files []diffFileSum
		off   uint64
	)
	inHunk := false
	for off < diffSummaryScan {
		line, _, n, err := readLine(br, 512)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return files, false, nil
			}
			return nil, false, err
		}
		start := off
		off += uint64(n)
		switch {
		case strings.HasPrefix(line, "diff --git "):
			files = append(files, diffFileSum{Path: gitDiffPath(line), Offset: start})
			inHunk = false
		case len(files) == 0 && strings.HasPrefix(line, "--- "):
			files = append(files, diffFileSum{Path: strings.TrimPrefix(strings.TrimPrefix(line, "--- "), "a/"), Offset: start})
		case strings.HasPrefix(line, "@@"):
			inHunk = true
		case len(files) == 0:
		case strings.HasPrefix(line, "GIT binary patch"), strings.HasPrefix(line, "Binary files"):
			files[len(files)-1].Binary = true
		case inHunk && strings.HasPrefix(line, "+"):
			files[len(files)-1].Add++
		case inHunk && strings.HasPrefix(line, "-"):
			files[len(files)-1].Del++
		case !inHunk && strings.HasPrefix(line, "+++ "):
			if p := strings.TrimPrefix(line, "+++ "); p != "/dev/null" {
				files[len(files)-1].Path = strings.TrimPrefix(p, "b/")
			}
		}
	}
	return files, true, nil
}

// gitDiffPath takes the b/ path of a "diff --git a/x b/x" line.
func gitDiffPath(line string) string {
	rest := strings.TrimPrefix(line, "diff --git ")
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return rest
}

// diffPage renders the diff per file: a summary of every file with its
// added and removed lines, then one page of lines from the offset.
func (s *Server) diffPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	name := q.Get("name")
	if name == "" {
		name = "changes.diff"
	}
	if !diffName.MatchString(name) {
		s.fail(w, r, http.StatusBadRequest, "name: want changes.diff or changes.try-NNN.diff")
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	v := diffView{ID: id, Name: name}
	if run, err := s.c.GetRun(ctx, &decreev1.GetRunRequest{Id: id}); err == nil {
		for _, a := range run.GetRun().GetArtifacts() {
			if diffName.MatchString(a) {
				v.Names = append(v.Names, a)
			}
		}
	}
	offset, _ := strconv.ParseUint(q.Get("offset"), 10, 64)
	v.Offset = offset
	files, partial, err := s.diffSummary(ctx, id, name)
	if err != nil {
		s.failRPC(w, r, "read "+name+" of "+id, err)
		return
	}
	v.Files, v.Partial = files, partial
	for _, f := range files {
		v.TotalAdd += f.Add
		v.TotalDel += f.Del
	}
	oldN, _ := strconv.Atoi(q.Get("o"))
	newN, _ := strconv.Atoi(q.Get("n"))
	cur := q.Get("f")
	ar, err := s.openArtifact(ctx, id, name, offset)
	if err != nil {
		s.failRPC(w, r, "read "+name+" of "+id, err)
		return
	}
	defer ar.Close()
	br := bufio.NewReaderSize(ar, 64<<10)
	pos, lines, size := offset, 0, 0
	section := func(path string, cont bool) {
		v.Sections = append(v.Sections, diffSection{Path: path, Continued: cont})
	}
	continued := offset > 0 && cur != ""
	for lines < diffPageLines && size < diffPageBytes {
		line, cut, n, err := readLine(br, diffLineShown)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.failRPC(w, r, "read "+name+" of "+id, err)
			return
		}
		pos += uint64(n)
		lines++
		size += min(n, diffLineShown)
		dl := diffLine{Text: line, Cut: cut, Kind: "meta"}
		switch {
		case strings.HasPrefix(line, "diff --git "):
			cur = gitDiffPath(line)
			section(cur, false)
		case len(v.Sections) == 0 && continued:
			section(cur, true)
		case len(v.Sections) == 0:
			cur = "(header)"
			section(cur, false)
		}
		switch {
		case strings.HasPrefix(line, "@@"):
			dl.Kind = "hunk"
			oldN, newN = hunkStart(line)
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "diff --git "):
		case oldN > 0 || newN > 0:
			switch {
			case strings.HasPrefix(line, "+"):
				dl.Kind, dl.New = "add", newN
				newN++
			case strings.HasPrefix(line, "-"):
				dl.Kind, dl.Old = "del", oldN
				oldN++
			case strings.HasPrefix(line, " "), line == "":
				dl.Kind, dl.Old, dl.New = "ctx", oldN, newN
				oldN++
				newN++
			}
		}
		sec := &v.Sections[len(v.Sections)-1]
		sec.Lines = append(sec.Lines, dl)
	}
	v.Empty = offset == 0 && lines == 0
	if _, err := br.Peek(1); err == nil {
		v.Next = template.URL(fmt.Sprintf("name=%s&offset=%d&f=%s&o=%d&n=%d", name, pos, urlQueryEscape(cur), oldN, newN))
	}
	s.render(w, r, http.StatusOK, "diff", v)
}

// hunkStart reads "@@ -a,b +c,d @@" into the first old and new line.
func hunkStart(line string) (int, int) {
	var a, c int
	f := strings.Fields(line)
	if len(f) >= 3 {
		a, _ = strconv.Atoi(strings.SplitN(strings.TrimPrefix(f[1], "-"), ",", 2)[0])
		c, _ = strconv.Atoi(strings.SplitN(strings.TrimPrefix(f[2], "+"), ",", 2)[0])
	}
	return max(a, 1), max(c, 1)
}
