package interact

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSaveLastRunGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		golden string
		a      Answers
	}{
		{"last-run.yml", Answers{Routine: "develop", Name: "fix-auth-types", InputFile: "specs/01-add-auth.spec.md",
			Custom: map[string]string{"target_branch": "main"}, Body: "never saved"}},
		{"last-run-minimal.yml", Answers{Routine: "refactor", Name: "tidy-up", Custom: map[string]string{}, Body: "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir() // no .decree yet: SaveLastRun creates it
			if err := SaveLastRun(root, &tc.a); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(root, ".decree", "last-run.yml"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("last-run.yml =\n%s\nwant\n%s", got, want)
			}
			if strings.Contains(string(got), "never saved") {
				t.Error("the body was saved; it must always be entered fresh")
			}
			lr, err := LoadLastRun(root)
			if err != nil {
				t.Fatal(err)
			}
			if lr.Routine != tc.a.Routine || lr.MessageName != tc.a.Name || lr.InputFile != tc.a.InputFile ||
				len(lr.Custom) != len(tc.a.Custom) || (len(lr.Custom) > 0 && !maps.Equal(lr.Custom, tc.a.Custom)) {
				t.Errorf("round trip = %+v, from %+v", lr, tc.a)
			}
		})
	}
}

func TestSaveLastRunLeavesNoTemporaryFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for i := range 3 {
		if err := SaveLastRun(root, &Answers{Routine: "r", Name: strings.Repeat("n", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, ".decree"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "last-run.yml" {
		t.Errorf(".decree holds %v, want only last-run.yml", entries)
	}
	lr, err := LoadLastRun(root)
	if err != nil || lr.MessageName != "nnn" {
		t.Errorf("last write did not win: %+v, %v", lr, err)
	}
}

func TestLoadLastRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		content *string // nil: no file
		want    *LastRun
		wantErr string
	}{
		{name: "missing file", content: nil, want: nil},
		{name: "empty file", content: ptr(""), want: &LastRun{}},
		{name: "scalars of other types read as text", content: ptr("routine: r\nmessage_name: 2024\ncustom:\n  retries: 3\n  strict: true\n"),
			want: &LastRun{Routine: "r", MessageName: "2024", Custom: map[string]string{"retries": "3", "strict": "true"}}},
		{name: "unknown keys from a newer version are ignored", content: ptr("routine: r\nmessage_name: n\nfuture: 1\n"),
			want: &LastRun{Routine: "r", MessageName: "n"}},
		{name: "broken YAML", content: ptr("routine: [unclosed\n"), wantErr: "last-run.yml"},
		{name: "custom not a map", content: ptr("custom: [a, b]\n"), wantErr: "fix or delete the file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if tc.content != nil {
				if err := os.MkdirAll(filepath.Join(root, ".decree"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, LastRunFile), []byte(*tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := LoadLastRun(root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if got != nil && (got.Routine != tc.want.Routine || got.MessageName != tc.want.MessageName ||
				got.InputFile != tc.want.InputFile || !maps.Equal(got.Custom, tc.want.Custom)) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestLoadLastRunUnreadable(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// A directory where the file should be cannot be read as a file.
	if err := os.MkdirAll(filepath.Join(root, LastRunFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadLastRun(root); err == nil || !strings.Contains(err.Error(), "last-run.yml") {
		t.Errorf("err = %v", err)
	}
	if err := SaveLastRun(root, &Answers{Routine: "r", Name: "n"}); err == nil {
		t.Error("saving over a directory succeeded")
	}
}

// Input that is not a terminal (a pipe, a file): the same prompts work, and
// the end of the input ends the body like Ctrl-D.
func TestNonTerminalInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		input    string
		want     *Answers
		wantEOF  bool
		wantText string
	}{
		{name: "body ended by end of input", input: "\r" + "Quick Fix\r" + "\r" + "\r" + "do it\rnow",
			want: &Answers{Routine: "develop", Name: "quick-fix", Custom: map[string]string{}, Body: "do it\nnow"}},
		{name: "input ends before the name", input: "\r", wantEOF: true, wantText: "message name"},
		{name: "input ends with no body", input: "\rname\r\r\r", wantEOF: true, wantText: "message body"},
		{name: "input ends with a blank body", input: "\rname\r\r\r   ", wantEOF: true, wantText: "message body"},
		{name: "spec file and end of input", input: "\rname\ra.spec.md\r\r",
			want: &Answers{Routine: "develop", Name: "name", InputFile: "a.spec.md", Custom: map[string]string{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, out, err := askPipe(t, Options{Routines: sampleRoutines()}, strings.NewReader(tc.input))
			if tc.wantEOF {
				if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), tc.wantText) {
					t.Fatalf("err = %v, want unexpected EOF at the %s", err, tc.wantText)
				}
				return
			}
			if err != nil {
				t.Fatalf("Ask: %v\noutput:\n%s", err, out)
			}
			if !sameAnswers(*a, *tc.want) {
				t.Errorf("answers = %+v, want %+v", *a, *tc.want)
			}
		})
	}
}

func TestContextCancelStopsAsk(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe() // never written: Ask waits for keys
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Ask(ctx, Options{Routines: sampleRoutines(), In: r, Out: io.Discard})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Ask ignored the cancelled context")
	}
}
