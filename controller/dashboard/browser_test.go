package dashboard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// browsers are the Chromium builds the browser tests accept, in order:
// Debian's chromium-headless-shell (what .ci/run installs) first.
var browsers = []string{"chromium-headless-shell", "chromium", "chrome-headless-shell", "google-chrome"}

// newBrowser starts a headless Chromium (skipping the test when there is
// none, failing with DECREE_REQUIRE_TOOLS=1) and returns its tab's context.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, b := range browsers {
		if p, err := exec.LookPath(b); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		testtool.Unavailable(t, "a Chromium browser (apt-get install chromium-headless-shell)", errors.New("none of "+strings.Join(browsers, ", ")+" is on PATH"))
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI and containers
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1200, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// do runs steps with a deadline, failing the test with what was being done.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
		t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, body)
	}
}

// text reads an element's visible text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// waitJS polls a JavaScript condition until it holds.
func waitJS(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if _, err := chromedp.Run(c, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(35*time.Second))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
		t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, body)
	}
}

// screenshot saves the viewport as PNG in the test's temporary directory,
// or for the README's pictures (readme) under DECREE_SCREENSHOTS when set
// (`DECREE_SCREENSHOTS=docs go test -run TestBrowser ./controller/dashboard/`
// makes docs/dashboard-*.png), and checks it is a picture of the expected
// width.
func screenshot(t *testing.T, ctx context.Context, name string, width int, readme bool) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if got := img.Bounds().Dx(); got != width {
		t.Fatalf("screenshot %s is %d pixels wide, want %d", name, got, width)
	}
	dir := os.Getenv("DECREE_SCREENSHOTS")
	if dir == "" || !readme {
		dir = t.TempDir()
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(testtool.ModuleRoot(), dir)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// noOverflow checks the page fits a phone's width.
func noOverflow(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	over, err := chromedp.Run(c, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if over > 0 {
		t.Fatalf("%s is %d pixels wider than a 390-pixel phone screen", page, over)
	}
}

var queuedID = regexp.MustCompile(`Queued ([0-9]+-[0-9]+)`)

// TestBrowser drives the dashboard in headless Chromium against a real
// decree-controller and decree-worker: submit through the form (the
// routine picker swaps in the routine's parameters), follow a log line
// as it appears, cancel and requeue with confirmation, a refused
// cross-origin post, a phone-width layout, and the README's screenshots.
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	e := startEnv(t)

	// Submit through the form, choosing the routine and its parameter.
	do(t, ctx, "open the submit form",
		chromedp.Navigate(e.url+"/submit"),
		chromedp.WaitVisible(chromedp.ID("routine")),
		chromedp.SetValue(chromedp.ID("routine"), "edit"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("routine").dispatchEvent(new Event("change", {bubbles: true}))`),
		chromedp.WaitVisible(chromedp.ID("param-lines")), // swapped in by htmx
		chromedp.SetValue(chromedp.ID("param-lines"), "40"),
		chromedp.SendKeys(chromedp.ID("body"), "Write forty notes."),
		chromedp.Click(chromedp.ID("submit")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	)
	if q := text(t, ctx, "#question"); !strings.Contains(q, "routine edit") {
		t.Fatalf("confirmation asks %q", q)
	}
	do(t, ctx, "confirm the submission", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("result")))
	m := queuedID.FindStringSubmatch(text(t, ctx, "#result"))
	if m == nil {
		t.Fatalf("result %q names no queued message", text(t, ctx, "#result"))
	}
	edited := m[1]
	e.waitState(edited, decreev1.MessageState_MESSAGE_STATE_DONE, 60*time.Second)
	do(t, ctx, "open the finished message",
		chromedp.Navigate(e.url+"/messages/"+edited),
		chromedp.WaitVisible(chromedp.ID("h-diff")),
	)
	if files := text(t, ctx, "table.files"); !strings.Contains(files, "notes.txt") || !strings.Contains(files, "+40") {
		t.Fatalf("the message's diff summary: %q", files)
	}
	do(t, ctx, "open its diff", chromedp.Navigate(e.url+"/messages/"+edited+"/diff"), chromedp.WaitVisible(chromedp.CSS("table.diff")))
	screenshot(t, ctx, "dashboard-diff.png", 1200, true)

	// The overview follows events: a message submitted while it is open
	// appears without a reload.
	do(t, ctx, "open the overview", chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.ID("h-queue")))
	waitJS(t, ctx, "the event stream to connect", `document.querySelector("[sse-connect]").getAttribute("data-live") === "open"`)
	slow := e.submit("slow", "label", "browser")
	waitJS(t, ctx, "the running message on the overview", fmt.Sprintf(`document.getElementById("live").innerText.includes(%q)`, slow))
	e.waitState(slow, decreev1.MessageState_MESSAGE_STATE_RUNNING, 30*time.Second)
	waitJS(t, ctx, "the overview to show it running", `document.querySelector(".card .big") !== null`)
	screenshot(t, ctx, "dashboard-overview.png", 1200, true)

	// A log line appears while the page is open.
	do(t, ctx, "open the running message", chromedp.Navigate(e.url+"/messages/"+slow), chromedp.WaitVisible(chromedp.ID("live-log")))
	waitJS(t, ctx, "the first log line", `document.getElementById("live-log").textContent.includes("first line of the slow routine (label browser)")`)
	waitJS(t, ctx, "the log stream to open", `document.getElementById("live-log-state").textContent.includes("Following")`)
	if strings.Contains(text(t, ctx, "#live-log"), "after the gate") {
		t.Fatal("the second line is there before the routine printed it")
	}
	if err := os.WriteFile(filepath.Join(e.project, ".gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the live log line", `document.getElementById("live-log").textContent.includes("after the gate: a live line")`)
	screenshot(t, ctx, "dashboard-live-log.png", 1200, false)

	// A page of another origin cannot post an action, even with a guessed
	// token: its auto-submitted form is refused and nothing changes.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/messages/%s/cancel"><input name="confirm" value="yes"><input name="csrf" value="%s"></form><script>document.getElementById("f").submit()</script>`,
			html.EscapeString(e.url), slow, strings.Repeat("0", 64))
	}))
	defer evil.Close()
	do(t, ctx, "open the other origin's page", chromedp.Navigate(evil.URL))
	waitJS(t, ctx, "the refusal", fmt.Sprintf(`location.href.startsWith(%q) && document.body.innerText.includes("refused")`, e.url))
	if st := e.state(slow); st != decreev1.MessageState_MESSAGE_STATE_RUNNING {
		t.Fatalf("after the cross-origin post the message is %s, want running", st)
	}

	// Cancel, with confirmation, and see the result.
	do(t, ctx, "cancel",
		chromedp.Navigate(e.url+"/messages/"+slow),
		chromedp.WaitVisible(chromedp.ID("cancel")),
		chromedp.Click(chromedp.ID("cancel")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	)
	if st := e.state(slow); st != decreev1.MessageState_MESSAGE_STATE_RUNNING {
		t.Fatalf("the message is %s before the confirmation", st)
	}
	do(t, ctx, "confirm the cancel", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("result")))
	if r := text(t, ctx, "#result"); r != "Cancelled "+slow {
		t.Fatalf("cancel result %q", r)
	}
	if st := e.state(slow); st != decreev1.MessageState_MESSAGE_STATE_DEAD {
		t.Fatalf("after the cancel the message is %s, want dead", st)
	}

	// Requeue it from the dead letters page.
	do(t, ctx, "requeue",
		chromedp.Navigate(e.url+"/dead"),
		chromedp.WaitVisible(chromedp.CSS("td.note")),
		chromedp.Click(chromedp.CSS(`form[action="/messages/`+slow+`/requeue"] button`)),
		chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm")),
		chromedp.WaitVisible(chromedp.ID("result")),
	)
	if r := text(t, ctx, "#result"); r != "Requeued "+slow {
		t.Fatalf("requeue result %q", r)
	}
	if st := e.state(slow); st == decreev1.MessageState_MESSAGE_STATE_DEAD {
		t.Fatal("the requeued message is still dead")
	}

	// Phone width: no page is wider than the screen, and every field of
	// the submit form has a label.
	do(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, p := range []string{"/", "/messages/" + slow, "/messages/" + edited + "/diff", "/routines", "/submit"} {
		do(t, ctx, "open "+p+" on a phone", chromedp.Navigate(e.url+p), chromedp.WaitVisible(chromedp.ID("main")))
		noOverflow(t, ctx, p)
	}
	unlabelled, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("input:not([type=hidden]), select, textarea")].filter(e => !e.labels || e.labels.length === 0).length`))
	if err != nil || unlabelled != 0 {
		t.Fatalf("%d fields of the submit form have no label (%v)", unlabelled, err)
	}
}
