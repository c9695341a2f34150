package e2e

import (
	"io/fs"
	"os"
	"testing"
)

// TestFailedRoutineLeavesExactPermissions: a routine that makes a 644 file
// 700, a 644 file 600 and a 750 file 644, edits them and fails every
// attempt leaves each file, after decree's revert, with exactly the
// permission bits it had (not only git's exec bit), in both modes.
func TestFailedRoutineLeavesExactPermissions(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			p := newProject(t, m, baseConfig)
			want := map[string]fs.FileMode{"plain.txt": 0o644, "secret.txt": 0o644, "tool.sh": 0o750, "private.key": 0o600}
			for name, perm := range want {
				p.write(name, name+"\n")
				if err := os.Chmod(p.path(name), perm); err != nil {
					t.Fatal(err)
				}
			}
			p.routine("develop", "", `chmod 700 plain.txt
chmod 600 secret.txt
chmod 644 tool.sh
chmod 640 private.key
echo changed >> plain.txt
echo "failing on attempt $DECREE_ATTEMPT" >&2
exit 1`)
			r := p.ctl("", "run", "-m", "perms", "-p", "change modes")
			mustCode(t, r, 1)
			contains(t, "stderr", r.stderr, "dead-lettered")
			for name, perm := range want {
				fi, err := os.Stat(p.path(name))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != perm {
					t.Errorf("%s: permission %04o after the revert, want %04o", name, fi.Mode().Perm(), perm)
				}
			}
			if got := p.read("plain.txt"); got != "plain.txt\n" {
				t.Errorf("plain.txt not reverted: %q", got)
			}
		})
	}
}
