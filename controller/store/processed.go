package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

// Processed returns the spec file names listed in .decree/processed.md, one
// per line (blank lines and lines starting with '#' are ignored; a leading
// "- " is accepted).
func (s *Store) Processed() (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines, err := s.readProcessed()
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(lines))
	for _, l := range lines {
		if n := processedName(l); n != "" {
			set[n] = true
		}
	}
	return set, nil
}

func processedName(line string) string {
	l := strings.TrimSpace(line)
	if l == "" || strings.HasPrefix(l, "#") {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(l, "- "))
}

func (s *Store) readProcessed() ([]string, error) {
	data, err := os.ReadFile(s.path(layout.Processed))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.path(layout.Processed), err)
	}
	text := strings.TrimRight(string(data), "\n")
	if text == "" {
		return nil, nil
	}
	return strings.Split(text, "\n"), nil
}

func (s *Store) writeProcessed(lines []string) error {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := fsutil.WriteFileAtomic(s.path(layout.Processed), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("update processed.md: %w", err)
	}
	return nil
}

// MarkProcessed appends a spec file name to processed.md (once: a name
// already listed is not added again).
func (s *Store) MarkProcessed(specName string) error {
	specName = strings.TrimSpace(specName)
	if specName == "" || strings.ContainsAny(specName, "\r\n") {
		return fmt.Errorf("mark processed: %q is not a single-line spec file name", specName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lines, err := s.readProcessed()
	if err != nil {
		return err
	}
	for _, l := range lines {
		if processedName(l) == specName {
			return nil
		}
	}
	return s.writeProcessed(append(lines, specName))
}

// UnmarkProcessed removes a spec file name from processed.md (used when a
// migration is retried from scratch). Removing a name not listed is no error.
func (s *Store) UnmarkProcessed(specName string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines, err := s.readProcessed()
	if err != nil {
		return err
	}
	kept := lines[:0:0]
	for _, l := range lines {
		if processedName(l) != specName {
			kept = append(kept, l)
		}
	}
	if len(kept) == len(lines) {
		return nil
	}
	return s.writeProcessed(kept)
}
