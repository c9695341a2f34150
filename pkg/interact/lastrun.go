package interact

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"go.yaml.in/yaml/v3"
)

// LastRunFile is the path of the recall file, relative to the project root.
const LastRunFile = layout.Dir + "/" + layout.LastRun

// LastRun is the content of .decree/last-run.yml: the answers of the last
// successful interactive run, offered as defaults by the next one. The body
// is deliberately absent: it is always entered fresh.
type LastRun struct {
	Routine     string            `yaml:"routine"`
	MessageName string            `yaml:"message_name"`
	InputFile   string            `yaml:"input_file,omitempty"`
	Custom      map[string]string `yaml:"custom,omitempty"`
}

// LoadLastRun reads projectRoot/.decree/last-run.yml. It returns (nil, nil)
// when the file does not exist, and an error naming the file when it cannot
// be read or parsed.
func LoadLastRun(projectRoot string) (*LastRun, error) {
	path := filepath.Join(projectRoot, LastRunFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var lr LastRun
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&lr); err != nil {
		if errors.Is(err, io.EOF) {
			return &LastRun{}, nil // an empty file holds no answers
		}
		return nil, fmt.Errorf("parse %s: %w (fix or delete the file; it only holds the defaults of the next interactive run)", path, err)
	}
	return &lr, nil
}

// SaveLastRun records a's routine, name, input file and custom parameters in
// projectRoot/.decree/last-run.yml, crash-safely (a reader sees the old or
// the new file, never a mix). The body is not recorded. The caller calls it
// only after the run it started from a succeeded.
func SaveLastRun(projectRoot string, a *Answers) error {
	if a == nil {
		return errors.New("save last interactive run: no answers given")
	}
	lr := LastRun{Routine: a.Routine, MessageName: a.Name, InputFile: a.InputFile}
	if len(a.Custom) > 0 {
		lr.Custom = make(map[string]string, len(a.Custom))
		for k, v := range a.Custom {
			lr.Custom[k] = v
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&lr); err != nil {
		return fmt.Errorf("save last interactive run: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("save last interactive run: encode: %w", err)
	}
	dir := filepath.Join(projectRoot, filepath.Dir(LastRunFile))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save last interactive run: create %s: %w", dir, err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(projectRoot, LastRunFile), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("save last interactive run: %w", err)
	}
	return nil
}
