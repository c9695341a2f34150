package message

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/decreehq/decree/pkg/fsutil"
	"golang.org/x/text/unicode/norm"
)

// MaxNameLen is the longest message name KebabName and UniqueName produce.
const MaxNameLen = 50

// special spells out letters that do not decompose into an ASCII letter plus
// accents.
var special = map[rune]string{
	'ß': "ss", 'æ': "ae", 'Æ': "ae", 'œ': "oe", 'Œ': "oe", 'ø': "o", 'Ø': "o",
	'đ': "d", 'Đ': "d", 'ł': "l", 'Ł': "l", 'þ': "th", 'Þ': "th", 'ð': "d", 'Ð': "d",
	'ı': "i",
}

// KebabName turns free text into a message name: lower-case ASCII letters
// and digits separated by single '-', no leading or trailing '-', at most
// MaxNameLen characters (a cut never leaves a trailing '-').
//
// Letters with accents lose them ("Café" -> "cafe"); a few letters are
// spelled out ("ß" -> "ss", "æ" -> "ae", "ø" -> "o", "ł" -> "l"); every
// other non-ASCII character (CJK, emoji, ...) counts as a separator. The
// result is "" when nothing usable remains; callers fall back to another
// name then.
func KebabName(s string) string {
	var b strings.Builder
	dash := false
	emit := func(r rune) {
		if dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		dash = false
		b.WriteRune(r)
	}
	for _, r := range norm.NFKD.String(s) {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			emit(unicode.ToLower(r))
		case unicode.Is(unicode.Mn, r):
			// combining accent left by the decomposition: drop
		case special[r] != "":
			for _, c := range special[r] {
				emit(c)
			}
		default:
			dash = true
		}
	}
	return cutName(b.String(), MaxNameLen)
}

// cutName shortens a kebab name to at most max bytes without a trailing '-'.
func cutName(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.TrimRight(s[:max], "-")
}

// UniqueName returns base when it is free, else base-2, base-3, ... the first
// one taken reports free. The base is shortened when needed so the result
// stays within MaxNameLen.
func UniqueName(base string, taken func(name string) bool) string {
	if !taken(base) {
		return base
	}
	for i := 2; ; i++ {
		suffix := "-" + strconv.Itoa(i)
		name := cutName(base, MaxNameLen-len(suffix)) + suffix
		if !taken(name) {
			return name
		}
	}
}

// CheckName rejects a message name that could escape its directory: empty,
// containing '/', '\', "..", NUL or a control character.
func CheckName(name string) error {
	return fsutil.CheckName("message", name)
}
