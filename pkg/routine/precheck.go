package routine

import "bytes"

// PreCheckEnv is the environment variable set to "true" when a routine is
// run for its readiness check instead of its work. A routine that
// implements a pre-check tests it first and exits: 0 when it is ready to
// run, non-zero with the reason on its output when it is not. A pre-check
// must not change the project.
const PreCheckEnv = "DECREE_PRE_CHECK"

// HasPreCheck reports whether the routine implements a pre-check: its file
// mentions DECREE_PRE_CHECK. A routine that does not would do its real
// work when run for a check, so decree never runs it as one and counts it
// as ready.
func (r Routine) HasPreCheck() (bool, error) {
	b, err := r.read()
	if err != nil {
		return false, err
	}
	return bytes.Contains(b, []byte(PreCheckEnv)), nil
}
