package routine

import (
	"regexp"
	"strings"
)

// splitLines splits text into lines, dropping a trailing "\r" from each so
// that a script with CRLF endings is still read correctly (the shell driver
// refuses to run such a script, but listing and describing it works).
func splitLines(src []byte) []string {
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// ShellDescription extracts a shell routine's description: the contiguous
// lines starting with '#' from line 1, or from line 2 when line 1 is a
// shebang. "# " is stripped from each line and a lone "#" becomes an empty
// line; trailing empty lines are dropped.
func ShellDescription(src []byte) string {
	lines := splitLines(src)
	if len(lines) > 0 && strings.HasPrefix(lines[0], "#!") {
		lines = lines[1:]
	}
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") {
			break
		}
		switch {
		case l == "#":
			out = append(out, "")
		case strings.HasPrefix(l, "# "):
			out = append(out, l[2:])
		default:
			out = append(out, l)
		}
	}
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n")
}

var shellAssign = regexp.MustCompile(`^([a-z_][a-z0-9_]*)=`)

// ShellParams returns every variable a shell routine declares in its header,
// standard ones included, in file order: names of lines matching
// ^[a-z_][a-z0-9_]*= up to the first line that is not a comment, blank,
// shebang, `set` builtin or such an assignment. A name assigned twice is
// reported once, with its first default.
func ShellParams(src []byte) []Param {
	var out []Param
	seen := map[string]bool{}
	for _, l := range splitLines(src) {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
			continue
		case t == "set" || strings.HasPrefix(t, "set ") || strings.HasPrefix(t, "set\t"):
			continue
		}
		m := shellAssign.FindStringSubmatch(l)
		if m == nil {
			break
		}
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		def, ok := shellDefault(name, l[len(m[0]):])
		out = append(out, Param{Name: name, Default: def, HasDefault: ok})
	}
	return out
}

// shellDefault works out the default of `name=VALUE` from the text after
// '='. It understands a literal word (unquoted, 'single' or "double" quoted
// without expansions) and "${name:-default}" with a literal default. Any
// other value (command substitution, other variables) is unknown.
func shellDefault(name, rest string) (string, bool) {
	word, tail := shellWord(rest)
	tail = strings.TrimLeft(tail, " \t")
	if tail != "" && !strings.HasPrefix(tail, "#") {
		return "", false
	}
	// "${name:-X}" or ${name:-X}
	inner := word
	if len(inner) >= 2 && inner[0] == '"' && inner[len(inner)-1] == '"' {
		inner = inner[1 : len(inner)-1]
	}
	prefix := "${" + name + ":-"
	if strings.HasPrefix(inner, prefix) && strings.HasSuffix(inner, "}") {
		def := inner[len(prefix) : len(inner)-1]
		if !strings.ContainsAny(def, "$`\"'}\\") {
			return def, true
		}
		return "", false
	}
	return shellLiteral(word)
}

// shellWord splits off the first shell word of s (quotes kept), returning
// it and the remaining text.
func shellWord(s string) (word, tail string) {
	i := 0
	for i < len(s) {
		c := s[i]
		switch c {
		case ' ', '\t', ';', '&', '|', '<', '>', '(', ')':
			return s[:i], s[i:]
		case '\\':
			i += 2
			continue
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return s, ""
			}
			i += j + 2
			continue
		case '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
			continue
		case '$':
			// ${...} may contain spaces; skip to the matching brace.
			if i+1 < len(s) && s[i+1] == '{' {
				if j := strings.IndexByte(s[i:], '}'); j >= 0 {
					i += j + 1
					continue
				}
			}
		}
		i++
	}
	if i > len(s) {
		i = len(s)
	}
	return s[:i], s[i:]
}

// shellLiteral removes quotes from a word that has no expansions.
func shellLiteral(word string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(word); i++ {
		c := word[i]
		switch c {
		case '$', '`':
			return "", false
		case '\\':
			if i+1 < len(word) {
				i++
				b.WriteByte(word[i])
			}
		case '\'':
			j := strings.IndexByte(word[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(word[i+1 : i+1+j])
			i += j + 1
		case '"':
			j := i + 1
			for ; j < len(word) && word[j] != '"'; j++ {
				switch word[j] {
				case '$', '`':
					return "", false
				case '\\':
					if j+1 < len(word) && strings.IndexByte("$`\"\\", word[j+1]) >= 0 {
						j++
					}
				}
				b.WriteByte(word[j])
			}
			i = j
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}
