package checkpoint

import (
	"bytes"
	"strconv"
)

// contextLines is the number of unchanged lines around each change, as in
// diff -u and git diff.
const contextLines = 3

// splitLines splits data into lines that keep their "\n"; a last line
// without one is kept as is.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	n := bytes.Count(data, []byte{'\n'})
	lines := make([]string, 0, n+1)
	s := string(data)
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			lines = append(lines, s[start:i+1])
			start = i + 1
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// writeHunks writes the unified-diff hunks turning old into new.
func writeHunks(w *bytes.Buffer, old, new []byte) {
	a, b := splitLines(old), splitLines(new)
	edits := diffLines(a, b)
	for i := 0; i < len(edits); {
		// Group edits whose unchanged gap is small enough to share context.
		j := i
		for j+1 < len(edits) && edits[j+1].Start-edits[j].End <= 2*contextLines {
			j++
		}
		first, last := edits[i], edits[j]
		oldStart := max(0, first.Start-contextLines)
		oldEnd := min(len(a), last.End+contextLines)
		newStart := first.ReplStart - (first.Start - oldStart)
		newEnd := last.ReplEnd + (oldEnd - last.End)
		w.WriteString("@@ -")
		writeRange(w, oldStart, oldEnd-oldStart)
		w.WriteString(" +")
		writeRange(w, newStart, newEnd-newStart)
		w.WriteString(" @@\n")
		pos := oldStart
		for k := i; k <= j; k++ {
			e := edits[k]
			for ; pos < e.Start; pos++ {
				writeLine(w, ' ', a[pos])
			}
			for _, l := range a[e.Start:e.End] {
				writeLine(w, '-', l)
			}
			for _, l := range b[e.ReplStart:e.ReplEnd] {
				writeLine(w, '+', l)
			}
			pos = e.End
		}
		for ; pos < oldEnd; pos++ {
			writeLine(w, ' ', a[pos])
		}
		i = j + 1
	}
}

func writeRange(w *bytes.Buffer, start, count int) {
	if count == 0 {
		// An empty range names the line before it.
		w.WriteString(strconv.Itoa(start))
		w.WriteString(",0")
		return
	}
	w.WriteString(strconv.Itoa(start + 1))
	if count != 1 {
		w.WriteByte(',')
		w.WriteString(strconv.Itoa(count))
	}
}

func writeLine(w *bytes.Buffer, op byte, line string) {
	w.WriteByte(op)
	w.WriteString(line)
	if len(line) == 0 || line[len(line)-1] != '\n' {
		w.WriteString("\n\\ No newline at end of file\n")
	}
}
