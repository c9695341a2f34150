package message

import "testing"

func TestCheckFieldKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"target_branch", true},
		{"routine", true},
		{"a.b-c", true},
		{"_x", true},
		{"1abc", false},
		{"a b", false},
		{"a:b", false},
		{"a\nb", false},
		{"", false},
		{"chain", false},
		{"seq", false},
		{"message_dir", false},
	} {
		if err := CheckFieldKey(tc.key); (err == nil) != tc.ok {
			t.Errorf("CheckFieldKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
		}
	}
}
