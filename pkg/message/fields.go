package message

import (
	"fmt"
	"regexp"
)

// fieldKey is what a frontmatter key given from outside (decreectl run -v,
// the API's fields) may look like: it becomes a routine parameter, so no
// newlines, no ':' and nothing YAML would read differently.
var fieldKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)

// DerivedFields are filled in by normalisation (from the file name and
// the run directory) and can never be set from outside.
var DerivedFields = map[string]bool{"id": true, "chain": true, "seq": true, "message_file": true, "message_id": true, "message_dir": true, OutboxFileField: true}

// OutboxFileField records, on a follow-up a routine wrote to
// .decree/outbox/, the name that file had: its inbox file is named after
// its id ("<chain>-<seq>.md"), and listings show the outbox name.
const OutboxFileField = "outbox_file"

// CheckFieldKey is the one rule for a frontmatter key set from outside:
// its shape, and that decree does not derive it.
func CheckFieldKey(key string) error {
	if !fieldKey.MatchString(key) {
		return fmt.Errorf("field key %q is not allowed: keys are letters, digits, '_', '-' and '.', start with a letter or '_', and have at most 128 characters (no spaces, ':' or newlines)", key)
	}
	if DerivedFields[key] {
		return fmt.Errorf("field %s is derived by decree and cannot be set", key)
	}
	return nil
}
