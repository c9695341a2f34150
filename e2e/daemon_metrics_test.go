package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// TestDaemonMetrics: `decreectl daemon --metrics-listen 127.0.0.1:0`
// prints its metrics URL, and a scrape during the run shows the counters
// move as a dropped-in message is processed; a public address without TLS
// and a token is refused before anything starts.
func TestDaemonMetrics(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id" >> .decree/handled.log`)
	r := p.ctl("", "daemon", "--metrics-listen", "0.0.0.0:0")
	mustCode(t, r, 2)
	contains(t, "daemon on a public metrics address", r.stderr, "needs TLS")

	d := start(t, p.dir, "decreectl", "-C", p.dir, "daemon", "--interval", "200ms", "--metrics-listen", "127.0.0.1:0")
	var url string
	testtool.WaitFor(t, 20*time.Second, "the metrics URL", func() bool {
		select {
		case <-d.Done():
			t.Fatalf("decreectl daemon exited early:\n%s", d.Out)
		default:
		}
		if m := regexp.MustCompile(`metrics on (http://\S+)`).FindStringSubmatch(d.Out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	scrape := func() string {
		resp, err := http.Get(url)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	contains(t, "metrics before any message", scrape(), "decree_messages_queued 0")
	p.write(".decree/inbox/counted.md", "count me\n")
	testtool.WaitFor(t, 30*time.Second, "the attempt counters to move", func() bool {
		s := scrape()
		return strings.Contains(s, `decree_attempts_total{outcome="succeeded",routine="develop"} 1`) &&
			strings.Contains(s, `decree_messages_finished_total{outcome="done",reason=""} 1`)
	})
	d.Signal(syscall.SIGTERM)
	if code := d.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("daemon exit %d after SIGTERM, want 0\n%s", code, d.Out)
	}
}
