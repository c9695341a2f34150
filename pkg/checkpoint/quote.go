package checkpoint

import (
	"strconv"
	"strings"
)

// needsQuote reports whether git would quote this name (core.quotePath is
// true by default): a double quote, a backslash, a control character or any
// byte outside ASCII.
func needsQuote(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return true
		}
	}
	return false
}

// quoteName returns name as git writes it in diff headers: unchanged when
// it needs no quoting, otherwise in double quotes with C escapes and octal
// escapes for other bytes.
func quoteName(name string) string {
	if !needsQuote(name) {
		return name
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				b.WriteByte('\\')
				o := strconv.FormatInt(int64(c), 8)
				b.WriteString(strings.Repeat("0", 3-len(o)) + o)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// headerName is a/ or b/ prefixed name as used on "---"/"+++" lines: quoted
// if needed, otherwise followed by a tab when it contains a space, as git
// does, so that GNU patch finds where the name ends.
func headerName(prefix, name string) string {
	full := prefix + name
	if needsQuote(full) {
		return quoteName(full)
	}
	if strings.ContainsRune(full, ' ') {
		return full + "\t"
	}
	return full
}
