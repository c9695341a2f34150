package interact

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFuzzyFilterPicksRoutine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		keys  []string
		want  string
		shows string // text the filtered list must show
	}{
		{name: "letters of one name only", keys: []string{"fxt"}, want: "fix-types", shows: "fxt"},
		{name: "not a substring", keys: []string{"dvlp"}, want: "develop", shows: "dvlp"},
		{name: "prefix", keys: []string{"ref"}, want: "refactor", shows: "ref"},
		{name: "typed one key at a time", keys: []string{"d", "o", "c"}, want: "deploy-docs", shows: "doc"},
		{name: "backspace widens again", keys: []string{"fxz", keyBackspace, keyBackspace, keyBackspace, "dvl"}, want: "develop", shows: "dvl"},
		{name: "arrow down from the default", keys: []string{keyDown}, want: "deploy-docs"},
		{name: "arrow down then up", keys: []string{keyDown, keyDown, keyUp}, want: "deploy-docs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pt := startAsk(t, Options{Routines: sampleRoutines(), DefaultRoutine: "develop"})
			pt.send(tc.keys...)
			if tc.shows != "" {
				pt.waitFor(tc.shows)
			}
			pt.send(keyEnter)
			pt.waitFor("Message name")
			pt.send("x", keyEnter, keyEnter) // name, no input file
			for range paramsOf(tc.want) {
				pt.send(keyEnter)
			}
			pt.send("body", keyEnter, keyEnter)
			if got := pt.answers().Routine; got != tc.want {
				t.Errorf("routine = %q, want %q", got, tc.want)
			}
		})
	}
}

func paramsOf(routine string) []Param {
	for _, r := range sampleRoutines() {
		if r.Name == routine {
			return r.Params
		}
	}
	return nil
}

func TestDefaultRoutineHighlighted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, def, want string
	}{
		{"configured default", "fix-types", "fix-types"},
		{"last entry", "refactor", "refactor"},
		{"no default picks the first", "", "develop"},
		{"unknown default picks the first", "gone", "develop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pt := startAsk(t, Options{Routines: sampleRoutines(), DefaultRoutine: tc.def})
			pt.send(keyEnter)
			pt.waitFor("Routine: " + tc.want)
			pt.send("n", keyEnter, keyEnter)
			for range paramsOf(tc.want) {
				pt.send(keyEnter)
			}
			pt.send("b", keyEnter, keyEnter)
			if got := pt.answers().Routine; got != tc.want {
				t.Errorf("routine = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMessageNameRequiredAndKebab(t *testing.T) {
	t.Parallel()
	pt := startAsk(t, Options{Routines: sampleRoutines()[1:2]})
	pt.send(keyEnter)
	pt.waitFor("Message name")
	pt.send(keyEnter)
	pt.waitFor("A message name is required")
	pt.send("!!!", keyEnter)
	pt.waitFor("has no letters or digits")
	pt.send(strings.Repeat(keyBackspace, 3), "Fix Auth Types", keyEnter)
	pt.waitFor("Message name: fix-auth-types")
	pt.send(keyEnter, "b", keyEnter, keyEnter)
	if got := pt.answers().Name; got != "fix-auth-types" {
		t.Errorf("name = %q, want fix-auth-types", got)
	}
}

func TestInputFileAndBody(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		input    []string // keys at the input-file prompt
		body     []string // keys at the body prompt
		wantFile string
		wantBody string
		spec     bool
	}{
		{name: "input skipped, two body lines", input: []string{keyEnter},
			body: []string{"line one", keyEnter, "  indented two", keyEnter, keyEnter}, wantBody: "line one\n  indented two"},
		{name: "body ended by Ctrl-D", input: []string{keyEnter},
			body: []string{"first", keyEnter, "last", keyCtrlD}, wantBody: "first\nlast"},
		{name: "spec file, body skipped", input: []string{"specs/01-add-auth.spec.md", keyEnter},
			body: []string{keyEnter}, wantFile: "specs/01-add-auth.spec.md", spec: true},
		{name: "plain file with a body", input: []string{"  notes/todo.md ", keyEnter},
			body: []string{"see notes", keyEnter, keyEnter}, wantFile: "notes/todo.md", wantBody: "see notes"},
		{name: "pasted paragraphs keep their blank line", input: []string{keyEnter},
			body: []string{"\x1b[200~para one\n\npara two\x1b[201~", keyEnter, keyEnter}, wantBody: "para one\n\npara two"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pt := startAsk(t, Options{Routines: []Routine{{Name: "only"}}})
			pt.send(keyEnter, "name", keyEnter)
			pt.waitFor("Input file")
			pt.send(tc.input...)
			pt.waitFor("Message body")
			pt.send(tc.body...)
			a := pt.answers()
			if a.InputFile != tc.wantFile || a.Body != tc.wantBody || a.IsSpec() != tc.spec {
				t.Errorf("got file %q body %q spec %v, want file %q body %q spec %v",
					a.InputFile, a.Body, a.IsSpec(), tc.wantFile, tc.wantBody, tc.spec)
			}
		})
	}
}

func TestBodyRequiredWithoutInputFile(t *testing.T) {
	t.Parallel()
	pt := startAsk(t, Options{Routines: []Routine{{Name: "only"}}})
	pt.send(keyEnter, "name", keyEnter, keyEnter)
	pt.waitFor("Message body (required)")
	pt.send(keyEnter)
	pt.waitFor("A body is required")
	pt.send("   ", keyEnter) // blank is not a body either
	pt.send(keyCtrlD)
	pt.waitFor("A body is required")
	if !pt.running() {
		t.Fatal("Ask returned although no body was given")
	}
	pt.send("now real", keyEnter, keyEnter)
	if got := pt.answers().Body; got != "now real" {
		t.Errorf("body = %q, want %q", got, "now real")
	}
}

func TestCustomParameters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		keys []string // at the strict prompt, then the lang prompt
		want map[string]string
	}{
		{name: "Enter keeps both defaults", keys: []string{keyEnter, keyEnter}, want: map[string]string{}},
		{name: "typed value replaces the default", keys: []string{"true", keyEnter, keyEnter}, want: map[string]string{"strict": "true"}},
		{name: "edit the default in place", keys: []string{keyEnter, keyLeft, "la", keyEnter}, want: map[string]string{"lang": "glao"}},
		{name: "cleared means default", keys: []string{keyBackspace, keyEnter, "rust", keyEnter}, want: map[string]string{"lang": "rust"}},
		{name: "typing the default is the default", keys: []string{"false", keyEnter, "go", keyEnter}, want: map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pt := startAsk(t, Options{Routines: sampleRoutines(), DefaultRoutine: "fix-types"})
			pt.send(keyEnter, "n", keyEnter, keyEnter)
			pt.waitFor("strict (routine default: false)")
			pt.send(tc.keys...)
			pt.waitFor("Message body")
			pt.send("b", keyEnter, keyEnter)
			a := pt.answers()
			if !maps.Equal(a.Custom, tc.want) {
				t.Errorf("custom = %v, want %v", a.Custom, tc.want)
			}
		})
	}
}

func TestRecallFromLastRun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	prev := &Answers{Routine: "fix-types", Name: "fix-auth-types", InputFile: "specs/01-add-auth.spec.md",
		Custom: map[string]string{"lang": "rust"}, Body: "old body that must not come back"}
	if err := SaveLastRun(root, prev); err != nil {
		t.Fatal(err)
	}

	t.Run("Enter accepts every recalled value", func(t *testing.T) {
		t.Parallel()
		pt := startAsk(t, Options{Routines: sampleRoutines(), DefaultRoutine: "develop", ProjectRoot: root})
		pt.send(keyEnter)
		pt.waitFor("fix-auth-types") // the name prompt shows the recalled name
		pt.send(keyEnter)
		pt.waitFor("specs/01-add-auth.spec.md")
		pt.send(keyEnter, keyEnter) // input file, strict (default)
		pt.waitFor("lang (routine default: go)")
		pt.waitFor("rust")
		pt.send(keyEnter)
		pt.waitFor("Message body (optional")
		pt.send(keyEnter)
		a := pt.answers()
		want := Answers{Routine: "fix-types", Name: "fix-auth-types", InputFile: "specs/01-add-auth.spec.md",
			Custom: map[string]string{"lang": "rust"}}
		if !sameAnswers(*a, want) {
			t.Errorf("answers = %+v, want %+v", *a, want)
		}
		if strings.Contains(pt.screen(), "old body") {
			t.Error("the previous body was shown; it must never be pre-filled")
		}
	})

	t.Run("typing overrides recalled values", func(t *testing.T) {
		t.Parallel()
		pt := startAsk(t, Options{Routines: sampleRoutines(), ProjectRoot: root})
		pt.send(keyEnter)
		pt.waitFor("fix-auth-types")
		pt.send("Second Try", keyEnter)
		pt.waitFor("specs/01-add-auth.spec.md")
		pt.send(keyBackspace, keyEnter) // clear the input file: skipped
		pt.send(keyEnter)               // strict
		pt.waitFor("rust")
		pt.send("go", keyEnter) // back to the default: no longer custom
		pt.waitFor("Message body (required)")
		pt.send("fresh", keyEnter, keyEnter)
		a := pt.answers()
		want := Answers{Routine: "fix-types", Name: "second-try", Custom: map[string]string{}, Body: "fresh"}
		if !sameAnswers(*a, want) {
			t.Errorf("answers = %+v, want %+v", *a, want)
		}
	})

	t.Run("another routine takes no recalled custom values", func(t *testing.T) {
		t.Parallel()
		pt := startAsk(t, Options{Routines: sampleRoutines(), ProjectRoot: root})
		pt.send("dvlp", keyEnter, keyEnter, keyEnter)
		pt.waitFor("target_branch (routine default: main)")
		pt.send(keyEnter)
		pt.waitFor("Message body")
		pt.send(keyEnter)
		a := pt.answers()
		if a.Routine != "develop" || len(a.Custom) != 0 || a.Name != "fix-auth-types" {
			t.Errorf("answers = %+v", *a)
		}
	})
}

func sameAnswers(a, b Answers) bool {
	return a.Routine == b.Routine && a.Name == b.Name && a.InputFile == b.InputFile &&
		a.Body == b.Body && maps.Equal(a.Custom, b.Custom)
}

func TestRecallSkipsRemovedRoutine(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := SaveLastRun(root, &Answers{Routine: "deleted-since", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	pt := startAsk(t, Options{Routines: sampleRoutines(), DefaultRoutine: "refactor", ProjectRoot: root})
	pt.send(keyEnter)
	pt.waitFor("Routine: refactor")
	pt.send(keyEnter, keyEnter, "b", keyEnter, keyEnter)
	if a := pt.answers(); a.Routine != "refactor" || a.Name != "n" {
		t.Errorf("answers = %+v", *a)
	}
}

func TestCorruptLastRunIsIgnored(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".decree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, LastRunFile), []byte("routine: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pt := startAsk(t, Options{Routines: sampleRoutines(), ProjectRoot: root})
	pt.send(keyEnter, "n", keyEnter, keyEnter, keyEnter, "b", keyEnter, keyEnter)
	if a := pt.answers(); a.Routine != "develop" || a.Name != "n" {
		t.Errorf("answers = %+v", *a)
	}
}

func TestAbort(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		before []string
		waitAt string
		key    string
	}{
		{"Esc in the selector", nil, "Routine", keyEsc},
		{"Ctrl-C in the selector while filtering", []string{"de"}, "de", keyCtrlC},
		{"Esc at the name", []string{keyEnter}, "Message name", keyEsc},
		{"Ctrl-C in the body", []string{keyEnter, "n", keyEnter, keyEnter, keyEnter, "some", keyEnter}, "some", keyCtrlC},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pt := startAsk(t, Options{Routines: sampleRoutines()})
			pt.send(tc.before...)
			pt.waitFor(tc.waitAt)
			pt.send(tc.key)
			a, err := pt.result()
			if !errors.Is(err, ErrAborted) || a != nil {
				t.Fatalf("got %v, %v; want ErrAborted", a, err)
			}
		})
	}
}

func TestCheckInputFile(t *testing.T) {
	t.Parallel()
	check := func(p string) error {
		if p != "exists.md" {
			return errors.New("no such file: " + p)
		}
		return nil
	}
	pt := startAsk(t, Options{Routines: []Routine{{Name: "only"}}, CheckInputFile: check})
	pt.send(keyEnter, "n", keyEnter, "missing.md", keyEnter)
	pt.waitFor("no such file: missing.md")
	pt.send(strings.Repeat(keyBackspace, len("missing.md")), "exists.md", keyEnter, keyEnter)
	if a := pt.answers(); a.InputFile != "exists.md" {
		t.Errorf("input file = %q", a.InputFile)
	}
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	if _, _, err := askPipe(t, Options{}, strings.NewReader("")); err == nil || !strings.Contains(err.Error(), ".decree/routines") {
		t.Errorf("no routines: err = %v", err)
	}
}

func TestNoMatchKeepsAsking(t *testing.T) {
	t.Parallel()
	pt := startAsk(t, Options{Routines: sampleRoutines(), DefaultRoutine: "refactor"})
	pt.send("zzq")
	pt.waitFor(`No routine matches "zzq"`)
	pt.send(keyEnter) // nothing to pick: ignored
	pt.send(keyBackspace, keyBackspace, keyBackspace, keyEnter)
	pt.waitFor("Routine: ")
	pt.send("n", keyEnter, keyEnter, keyEnter, "b", keyEnter, keyEnter) // develop asks for target_branch
	if got := pt.answers().Routine; got != "develop" {
		// After clearing the filter the cursor is back at the top of the
		// full list (the filter moved it there), not at the default.
		t.Errorf("routine = %q, want develop", got)
	}
}
