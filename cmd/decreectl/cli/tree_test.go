package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

func runTreeCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTreeCheckAndShow(t *testing.T) {
	fx := testtool.SharedFixtures(t, "monads")
	code, out, errs := runTreeCLI(t, "tree", "check", filepath.Join(fx, "AnimalTest.csv"))
	if code != 0 || !strings.Contains(out, `decision 5 "Are any of the files in the directory related to dogs?"`) || !strings.Contains(out, `No -> process 6`) {
		t.Errorf("check: %d\n%s%s", code, out, errs)
	}
	code, out, errs = runTreeCLI(t, "tree", "show", filepath.Join(fx, "sample_data.json"), "--format", "mermaid")
	if code != 0 || !strings.HasPrefix(out, "---\ntitle: Blank diagram\n---\nflowchart TD\n") || !strings.Contains(out, `-->|"Yes"|`) {
		t.Errorf("show: %d\n%s%s", code, out, errs)
	}
	if code, _, errs = runTreeCLI(t, "tree", "show", filepath.Join(fx, "sample_data.json"), "--format", "svg"); code != 2 {
		t.Errorf("bad format: %d %s", code, errs)
	}
}

// TestTreeCheckProblems: every problem is listed and the exit code is 1.
func TestTreeCheckProblems(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.tree.csv")
	if err := os.WriteFile(p, []byte("Id,Name,Line Source,Line Destination,Text Area 1,cli\n3,Process,,,,\n4,Process,,,b,CHATGPT\n5,Line,3,9,,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runTreeCLI(t, "tree", "check", p)
	for _, w := range []string{"4 problem(s)", "destination 9", "the start is ambiguous", `node 3 (row 2) "": the prompt`, `unknown CLI codename "CHATGPT"`} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}

// TestTreeCheckRoutineWithProjectSettings: a routine name resolves in
// .decree/routines/, and codenames added in config.yml are known.
func TestTreeCheckRoutineWithProjectSettings(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, ".decree", "routines"), 0o755))
	must(os.WriteFile(filepath.Join(dir, ".decree", "config.yml"), []byte("tree:\n  clis:\n    mine: my-ai <prompt>\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, ".decree", "routines", "triage.tree.csv"), []byte("Id,Name,Line Source,Line Destination,Tags,Text Area 1\n3,Process,,,MINE,Sort the bugs\n"), 0o644))
	code, out, errs := runTreeCLI(t, "-C", dir, "tree", "check", "triage")
	if code != 0 || !strings.Contains(out, `process 3 "Sort the bugs" [cli MINE`) {
		t.Errorf("check: %d\n%s%s", code, out, errs)
	}
	// Outside the project MINE is no codename, just a tag.
	code, out, errs = runTreeCLI(t, "tree", "check", filepath.Join(dir, ".decree", "routines", "triage.tree.csv"))
	if code != 0 || !strings.Contains(out, `[cli CLAUDE`) || !strings.Contains(out, "tags MINE") {
		t.Errorf("check outside the project: %d\n%s%s", code, out, errs)
	}
}

// TestTreeFetch: `tree fetch DOC -o FILE` against a server that answers
// like Lucid's REST API.
func TestTreeFetch(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testtool.SharedFixtures(t, "monads"), "sample_data.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" || r.URL.Path != "/documents/d-42/contents" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write(doc)
	}))
	defer srv.Close()
	t.Setenv("LUCIDCHART_API_KEY", "k1")
	t.Setenv("LUCID_API_URL", srv.URL)
	out := filepath.Join(t.TempDir(), "review.tree.json")
	code, stdout, errs := runTreeCLI(t, "tree", "fetch", "d-42", "-o", out)
	if code != 0 || !strings.Contains(stdout, "Blank diagram (review.tree.json): 5 nodes") {
		t.Fatalf("fetch: %d\n%s%s", code, stdout, errs)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, doc) {
		t.Error("the file differs from the document")
	}
	t.Setenv("LUCIDCHART_API_KEY", "wrong")
	if code, _, errs := runTreeCLI(t, "tree", "fetch", "d-42", "-o", out); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("bad key: %d %s", code, errs)
	}
}
