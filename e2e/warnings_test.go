package e2e

import (
	"strings"
	"testing"
)

// TestRunWarningsPrintedOnce: a warning of the embedded controller (here a
// failing afterEach hook) reaches `decreectl run` once, as "decree:
// warning: ...", never also as a raw slog line (time=... level=WARN ...).
func TestRunWarningsPrintedOnce(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			p := newProject(t, m, "max_retries: 1\ndefault_routine: develop\nhooks:\n  afterEach: hook\n")
			p.routine("hook", "", `echo "hook says no" >&2; exit 4`)
			p.routine("develop", "", `echo working`)
			r := p.ctl("", "run", "-m", "warned", "-p", "do it")
			mustCode(t, r, 0)
			if strings.Contains(r.stderr, "level=") || strings.Contains(r.stderr, "time=") {
				t.Errorf("raw log lines on stderr:\n%s", r.stderr)
			}
			n := 0
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.Contains(line, "afterEach hook failed") {
					n++
					if !strings.HasPrefix(line, "decree: warning: afterEach hook failed") {
						t.Errorf("warning line %q", line)
					}
				}
			}
			if n != 1 {
				t.Errorf("the afterEach warning was printed %d times, want once:\n%s", n, r.stderr)
			}
		})
	}
}
