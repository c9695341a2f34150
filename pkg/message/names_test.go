package message

import (
	"errors"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/fsutil"
)

func TestKebabName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Fix Auth Types", "fix-auth-types"},
		{"fix-auth-type-errors", "fix-auth-type-errors"},
		{"  --Hello,   World!!--  ", "hello-world"},
		{"snake_case and CamelCase", "snake-case-and-camelcase"},
		{"v2.0 release", "v2-0-release"},
		{"Café crème brûlée", "cafe-creme-brulee"},
		{"Straße Ærø Łódź", "strasse-aero-lodz"},
		{"ﬁle ＡＢＣ", "file-abc"},
		{"日本語 task", "task"},
		{"日本語", ""},
		{"🚀 launch 🚀 now", "launch-now"},
		{"", ""},
		{"a/../../etc/passwd", "a-etc-passwd"},
		{strings.Repeat("abc ", 20), "abc-abc-abc-abc-abc-abc-abc-abc-abc-abc-abc-abc-ab"},
		{strings.Repeat("a", 49) + " b", strings.Repeat("a", 49)},
		{strings.Repeat("x", 60), strings.Repeat("x", 50)},
	}
	for _, tc := range tests {
		got := KebabName(tc.in)
		if got != tc.want {
			t.Errorf("KebabName(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if len(got) > MaxNameLen || strings.HasPrefix(got, "-") || strings.HasSuffix(got, "-") || strings.Contains(got, "--") {
			t.Errorf("KebabName(%q) = %q breaks the kebab rules", tc.in, got)
		}
		if got != "" && CheckName(got) != nil {
			t.Errorf("KebabName(%q) = %q is not a safe name", tc.in, got)
		}
	}
}

func TestUniqueName(t *testing.T) {
	taken := map[string]bool{"fix": true, "fix-2": true, "new": false}
	isTaken := func(n string) bool { return taken[n] }
	if got := UniqueName("new", isTaken); got != "new" {
		t.Errorf("free name changed to %q", got)
	}
	if got := UniqueName("fix", isTaken); got != "fix-3" {
		t.Errorf("got %q, want fix-3", got)
	}
	long := strings.Repeat("a", 50)
	if got := UniqueName(long, func(n string) bool { return n == long }); got != strings.Repeat("a", 48)+"-2" {
		t.Errorf("long name: %q", got)
	}
	// Shortening must not leave a double dash.
	dashy := strings.Repeat("a", 47) + "-bcd"
	if got := UniqueName(dashy, func(n string) bool { return n == dashy }); got != strings.Repeat("a", 47)+"-2" {
		t.Errorf("dashy name: %q", got)
	}
}

func TestCheckName(t *testing.T) {
	good := []string{"fix-types", "2025022514320000-1.md", "a.b"}
	bad := []string{"", "a/b", `a\b`, "..", "a..b", "a\x00b", "a\nb", "\x1b[31m"}
	for _, n := range good {
		if err := CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
	for _, n := range bad {
		if err := CheckName(n); !errors.Is(err, fsutil.ErrUnsafePath) {
			t.Errorf("CheckName(%q) = %v, want ErrUnsafePath", n, err)
		}
	}
}
