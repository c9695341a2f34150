package ignore

import (
	"bytes"
	"strings"
)

// pattern is one parsed line of an ignore file.
type pattern struct {
	glob    string // wildmatch pattern, leading '/' removed
	negate  bool   // line started with '!'
	dirOnly bool   // line ended with '/'
	noSlash bool   // no '/' in the pattern: matched against the base name
}

// parsePatterns parses the contents of a .gitignore-syntax file the way git
// does: a UTF-8 byte order mark is skipped, CRLF line ends are accepted,
// blank lines and lines starting with '#' are skipped, trailing spaces are
// removed unless escaped with a backslash, a leading '!' negates, a trailing
// '/' restricts the pattern to directories, and a pattern that contains a
// '/' anywhere but at its end is anchored to the file's directory.
func parsePatterns(data []byte) []pattern {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []pattern
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		s := trimTrailingSpaces(string(line))
		if s == "" {
			continue
		}
		var p pattern
		if s[0] == '!' {
			p.negate = true
			s = s[1:]
		}
		if strings.HasSuffix(s, "/") {
			p.dirOnly = true
			s = s[:len(s)-1]
		}
		if s == "" {
			continue // "/" or "!" alone match nothing
		}
		p.noSlash = !strings.Contains(s, "/")
		s = strings.TrimPrefix(s, "/")
		p.glob = s
		out = append(out, p)
	}
	return out
}

// trimTrailingSpaces removes unescaped trailing spaces (not tabs), exactly
// as git's trim_trailing_spaces does.
func trimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i >= len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

// match reports whether the pattern, read from an ignore file in directory
// base ("" for the root, else "a/b"), matches rel (relative to the root).
func (p *pattern) match(base, rel, name string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	if p.noSlash {
		return wildmatch(p.glob, name)
	}
	if base != "" {
		if len(rel) <= len(base) || rel[len(base)] != '/' || rel[:len(base)] != base {
			return false
		}
		rel = rel[len(base)+1:]
	}
	return wildmatch(p.glob, rel)
}

// lastMatch finds the last pattern of list matching rel. It reports whether
// one matched and whether that one was a negation (re-inclusion).
func lastMatch(list []pattern, base, rel, name string, isDir bool) (matched, negate bool) {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].match(base, rel, name, isDir) {
			return true, list[i].negate
		}
	}
	return false, false
}
