package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

// persistentWorkerID returns the id kept in <ws>/.decree/worker-id, creating
// it as "<host>-<8 hex>" when absent. On a failure to keep it, it still
// returns a fresh id together with the error.
func persistentWorkerID(ws, host string) (string, error) {
	path := layout.Path(ws, layout.WorkerID)
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return newWorkerID(host), fmt.Errorf("read %s: %w", path, err)
	}
	id := newWorkerID(host)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return id, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := fsutil.WriteFileAtomic(path, []byte(id+"\n"), 0o644); err != nil {
		return id, err
	}
	return id, nil
}

func newWorkerID(host string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	if host == "" {
		host = "worker"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// readInstanceID returns <ws>/.decree/instance-id, trimmed, or "" when the
// file does not exist.
func readInstanceID(ws string) (string, error) {
	b, err := os.ReadFile(layout.Path(ws, layout.InstanceID))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read workspace instance id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ParseLabels turns "key=value" strings (as given to --label) into a map.
// A key may not be empty or contain spaces or '='; a repeated key is an
// error.
func ParseLabels(specs []string) (map[string]string, error) {
	labels := make(map[string]string, len(specs))
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("label %q has no '='; write labels as key=value", s)
		}
		if err := checkLabelKey(k); err != nil {
			return nil, err
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("label %q is given twice; give each key once", k)
		}
		labels[k] = v
	}
	return labels, nil
}

func checkLabelKey(k string) error {
	if k == "" {
		return errors.New("a label has an empty key; write labels as key=value")
	}
	for _, r := range k {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '=' {
			return fmt.Errorf("label key %q contains a space, '=' or a control character; use a plain key such as gpu or os", k)
		}
	}
	return nil
}
