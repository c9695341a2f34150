package ignore

// This file implements git's wildmatch (wildmatch.c) with the WM_PATHNAME
// flag, the glob dialect of .gitignore files: '*' and '?' never match '/',
// "**" between slashes (or at either end) matches any number of directories,
// '[...]' classes support ranges, '!'/'^' negation, backslash escapes and
// POSIX [:name:] classes, and a backslash escapes any character.

type wmResult int

const (
	wmMatch wmResult = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

// wildmatch reports whether text matches pattern under git's rules.
func wildmatch(pattern, text string) bool {
	return dowild(pattern, text) == wmMatch
}

func isGlobSpecial(c byte) bool {
	return c == '*' || c == '?' || c == '[' || c == '\\'
}

func dowild(p, text string) wmResult {
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pch := p[pi]
		if ti >= len(text) && pch != '*' {
			return wmAbortAll
		}
		var tch byte
		if ti < len(text) {
			tch = text[ti]
		}
		switch pch {
		case '\\':
			// A backslash makes the next character literal.
			pi++
			if pi >= len(p) {
				return wmNoMatch
			}
			if tch != p[pi] {
				return wmNoMatch
			}
		case '?':
			if tch == '/' {
				return wmNoMatch
			}
		case '*':
			matchSlash := false
			pi++
			if pi < len(p) && p[pi] == '*' {
				prev := pi - 2
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if (prev < 0 || p[prev] == '/') &&
					(pi == len(p) || p[pi] == '/' || (p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == '/')) {
					// "**/" may match nothing at all: try the rest directly.
					if pi < len(p) && p[pi] == '/' && dowild(p[pi+1:], text[ti:]) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				}
			}
			if pi == len(p) {
				// Trailing "**" matches everything; a trailing "*" only
				// what has no further slash.
				if !matchSlash && indexByte(text[ti:], '/') >= 0 {
					return wmAbortToStarStar
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// A single star followed by a slash matches up to the next
				// slash of the text.
				s := indexByte(text[ti:], '/')
				if s < 0 {
					return wmAbortAll
				}
				ti += s
				// The slash itself is consumed by the loop (pi stays on '/').
				continue
			}
			for {
				if ti >= len(text) {
					break
				}
				if !isGlobSpecial(p[pi]) {
					// Skip quickly to the next occurrence of the literal.
					want := p[pi]
					for ti < len(text) && (matchSlash || text[ti] != '/') && text[ti] != want {
						ti++
					}
					if ti >= len(text) {
						return wmAbortAll
					}
					if text[ti] != want {
						// Stopped at a slash: an enclosing "**" may still
						// find a match further on.
						return wmAbortToStarStar
					}
				}
				m := dowild(p[pi:], text[ti:])
				if m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && text[ti] == '/' {
					return wmAbortToStarStar
				}
				ti++
			}
			return wmAbortAll
		case '[':
			pi++
			if pi >= len(p) {
				return wmAbortAll
			}
			pch = p[pi]
			if pch == '^' {
				pch = '!'
			}
			negated := pch == '!'
			if negated {
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
			}
			var prev byte
			matched := false
			for {
				if pi >= len(p) {
					return wmAbortAll
				}
				pch = p[pi]
				switch {
				case pch == '\\':
					pi++
					if pi >= len(p) {
						return wmAbortAll
					}
					pch = p[pi]
					if tch == pch {
						matched = true
					}
				case pch == '-' && prev != 0 && pi+1 < len(p) && p[pi+1] != ']':
					pi++
					pch = p[pi]
					if pch == '\\' {
						pi++
						if pi >= len(p) {
							return wmAbortAll
						}
						pch = p[pi]
					}
					if tch <= pch && tch >= prev {
						matched = true
					}
					pch = 0 // a range cannot start another range
				case pch == '[' && pi+1 < len(p) && p[pi+1] == ':':
					start := pi + 2
					end := start
					for end < len(p) && p[end] != ']' {
						end++
					}
					if end >= len(p) {
						return wmAbortAll
					}
					if end-1 < start || p[end-1] != ':' {
						// No ":]": a plain '[' in the set.
						if tch == '[' {
							matched = true
						}
						pch = '['
						break
					}
					ok, known := posixClass(p[start:end-1], tch)
					if !known {
						return wmAbortAll
					}
					if ok {
						matched = true
					}
					pi = end
					pch = 0
				default:
					if tch == pch {
						matched = true
					}
				}
				prev = pch
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
				if p[pi] == ']' {
					break
				}
			}
			if matched == negated || tch == '/' {
				return wmNoMatch
			}
		default:
			if tch != pch {
				return wmNoMatch
			}
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func posixClass(name string, c byte) (match, known bool) {
	isUpper := c >= 'A' && c <= 'Z'
	isLower := c >= 'a' && c <= 'z'
	isDigit := c >= '0' && c <= '9'
	isAlpha := isUpper || isLower
	isSpace := c == ' ' || (c >= '\t' && c <= '\r')
	isCntrl := c < 0x20 || c == 0x7f
	isPrint := c >= 0x20 && c < 0x7f
	switch name {
	case "alnum":
		return isAlpha || isDigit, true
	case "alpha":
		return isAlpha, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return isCntrl, true
	case "digit":
		return isDigit, true
	case "graph":
		return isPrint && c != ' ', true
	case "lower":
		return isLower, true
	case "print":
		return isPrint, true
	case "punct":
		return isPrint && c != ' ' && !isAlpha && !isDigit, true
	case "space":
		return isSpace, true
	case "upper":
		return isUpper, true
	case "xdigit":
		return isDigit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
