package dashboard_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/dashboard"
	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  dashboard.Config
		want string // "" means valid
	}{
		{"loopback plain", dashboard.Config{Addr: "127.0.0.1:8080"}, ""},
		{"localhost plain", dashboard.Config{Addr: "localhost:0"}, ""},
		{"ipv6 loopback", dashboard.Config{Addr: "[::1]:0"}, ""},
		{"loopback with login", dashboard.Config{Addr: "127.0.0.1:0", TokenFile: "tok"}, ""},
		{"every interface without TLS", dashboard.Config{Addr: "0.0.0.0:8080", TokenFile: "tok"}, "without TLS"},
		{"empty host without TLS", dashboard.Config{Addr: ":8080"}, "without TLS"},
		{"host name without TLS", dashboard.Config{Addr: "decree.example.com:443", TokenFile: "tok"}, "without TLS"},
		{"TLS without token", dashboard.Config{Addr: "0.0.0.0:8443", CertFile: "c", KeyFile: "k"}, "needs a login"},
		{"TLS with token", dashboard.Config{Addr: "0.0.0.0:8443", CertFile: "c", KeyFile: "k", TokenFile: "tok"}, ""},
		{"half TLS", dashboard.Config{Addr: "127.0.0.1:0", CertFile: "c"}, "both"},
		{"no port", dashboard.Config{Addr: "127.0.0.1"}, "HOST:PORT"},
		{"bad port", dashboard.Config{Addr: "127.0.0.1:http"}, "port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// guarded builds a dashboard whose controller is never reached: the guard
// answers before any call.
func guarded(t *testing.T, opts dashboard.Options) http.Handler {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(t.TempDir(), "none.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	opts.Client = decreev1.NewControllerServiceClient(conn)
	s, err := dashboard.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Handler()
}

// TestGuardRefusesUnauthenticated: on a non-loopback listener (login
// required) nothing but the login page and the static files answers
// without a session.
func TestGuardRefusesUnauthenticated(t *testing.T) {
	h := guarded(t, dashboard.Options{Token: "the-client-token", Secure: true})
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/", http.StatusSeeOther},
		{"GET", "/messages/20260101000000-0", http.StatusSeeOther},
		{"GET", "/events/stream", http.StatusUnauthorized},
		{"GET", "/messages/20260101000000-0/log/stream", http.StatusUnauthorized},
		{"GET", "/messages/20260101000000-0/artifacts/changes.diff", http.StatusSeeOther},
		{"POST", "/messages/20260101000000-0/cancel", http.StatusUnauthorized},
		{"POST", "/submit", http.StatusUnauthorized},
		{"GET", "/login", http.StatusOK},
		{"GET", "/static/htmx.min.js", http.StatusOK},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "https://decree.example.com"+tc.path, strings.NewReader("confirm=yes"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("%s %s: %d, want %d\n%s", tc.method, tc.path, rec.Code, tc.want, rec.Body)
			}
			if rec.Code == http.StatusSeeOther && !strings.HasPrefix(rec.Header().Get("Location"), "/login?next=") {
				t.Fatalf("redirect to %q, want the login page", rec.Header().Get("Location"))
			}
			if rec.Header().Get("X-Frame-Options") != "DENY" || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Fatalf("missing framing protection: %v", rec.Header())
			}
		})
	}
}

// TestGuardLoopbackHost: a loopback dashboard without login answers only
// to loopback host names, so a DNS-rebinding page cannot use it.
func TestGuardLoopbackHost(t *testing.T) {
	h := guarded(t, dashboard.Options{Loopback: true})
	for host, want := range map[string]int{
		"attacker.example:8080": http.StatusMisdirectedRequest,
		"10.0.0.1:8080":         http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest("GET", "http://"+host+"/static/style.css", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} {
		req := httptest.NewRequest("GET", "http://"+host+"/static/style.css", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, rec.Code)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "decree test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// TestLoginOverTLS runs decree-controller with a TLS dashboard and a
// token: nothing answers before a login, a wrong token is refused, and
// the session cookie is HttpOnly, SameSite=Strict and Secure.
func TestLoginOverTLS(t *testing.T) {
	cert, key, pool := selfSigned(t)
	tokFile := filepath.Join(t.TempDir(), "client.token")
	const token = "dashboard-test-token-0123456789abcdef"
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, "--http-tls-cert", cert, "--http-tls-key", key, "--http-token-file", tokFile)
	if !strings.HasPrefix(e.url, "https://") {
		t.Fatalf("dashboard URL %s, want https", e.url)
	}
	e.http.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	id := e.submit("slow")
	e.waitState(id, decreev1.MessageState_MESSAGE_STATE_RUNNING, 30*time.Second)

	if code, _ := e.get("/"); code != http.StatusSeeOther {
		t.Fatalf("GET / without login: %d, want a redirect to the login", code)
	}
	if code, _ := e.get("/events/stream"); code != http.StatusUnauthorized {
		t.Fatalf("GET /events/stream without login: %d, want 401", code)
	}
	if code, _ := e.post("/messages/"+id+"/cancel", url.Values{"confirm": {"yes"}}); code != http.StatusUnauthorized {
		t.Fatalf("cancel without login: %d, want 401", code)
	}
	if code, body := e.post("/login", url.Values{"token": {"wrong"}}); code != http.StatusUnauthorized || !strings.Contains(body, "not this controller") {
		t.Fatalf("login with a wrong token: %d, want 401 with a message\n%s", code, body)
	}
	resp, err := e.http.PostForm(e.url+"/login", url.Values{"token": {token}, "next": {"/cron"}})
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/cron" {
		t.Fatalf("login: %v %v", err, resp)
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "decree_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v: want HttpOnly, Secure, SameSite=Strict", session)
	}
	code, page := e.get("/messages/" + id)
	if code != http.StatusOK || !strings.Contains(page, "first line of the slow routine") {
		t.Fatalf("message page after login: %d\n%.3000s", code, page)
	}
	if code, _ := e.post("/messages/"+id+"/cancel", url.Values{"confirm": {"yes"}}); code != http.StatusForbidden {
		t.Fatalf("cancel without a CSRF token: %d, want 403", code)
	}
	if st := e.state(id); st != decreev1.MessageState_MESSAGE_STATE_RUNNING {
		t.Fatalf("refused posts changed the message: %s", st)
	}
	code, res := e.post("/messages/"+id+"/cancel", url.Values{"confirm": {"yes"}, "csrf": {csrf(t, page)}})
	if code != http.StatusOK || !strings.Contains(res, "Cancelled "+id) {
		t.Fatalf("cancel with the CSRF token: %d\n%.3000s", code, res)
	}
	e.waitState(id, decreev1.MessageState_MESSAGE_STATE_DEAD, 30*time.Second)
}

// TestActionsAndCrossOrigin: over plain loopback HTTP, actions ask first,
// then act; a post from another origin or without the CSRF token changes
// nothing.
func TestActionsAndCrossOrigin(t *testing.T) {
	e := startEnv(t)
	id := e.submit("slow")
	e.waitState(id, decreev1.MessageState_MESSAGE_STATE_RUNNING, 30*time.Second)
	_, page := e.get("/messages/" + id)
	tok := csrf(t, page)

	req, _ := http.NewRequest(http.MethodPost, e.url+"/messages/"+id+"/cancel", strings.NewReader(url.Values{"confirm": {"yes"}, "csrf": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://127.0.0.1:1")
	req.Header.Set("Sec-Fetch-Site", "same-site")
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin cancel: %d, want 403", resp.StatusCode)
	}
	if code, _ := e.post("/messages/"+id+"/cancel", url.Values{"confirm": {"yes"}, "csrf": {strings.Repeat("0", 64)}}); code != http.StatusForbidden {
		t.Fatalf("cancel with a wrong CSRF token: %d, want 403", code)
	}
	code, confirm := e.post("/messages/"+id+"/cancel", url.Values{"csrf": {tok}})
	if code != http.StatusOK || !strings.Contains(confirm, "Yes, cancel") {
		t.Fatalf("cancel without confirm=yes: %d, want the confirmation page\n%.2000s", code, confirm)
	}
	if st := e.state(id); st != decreev1.MessageState_MESSAGE_STATE_RUNNING {
		t.Fatalf("message is %s before the confirmation, want running", st)
	}
	code, res := e.post("/messages/"+id+"/cancel", url.Values{"csrf": {tok}, "confirm": {"yes"}, "reason": {"stopped by the test"}})
	if code != http.StatusOK || !strings.Contains(res, "Cancelled "+id) || !strings.Contains(res, "stopped by the test") {
		t.Fatalf("confirmed cancel: %d\n%.3000s", code, res)
	}
	code, res = e.post("/messages/"+id+"/requeue", url.Values{"csrf": {tok}, "confirm": {"yes"}})
	if code != http.StatusOK || !strings.Contains(res, "Requeued "+id) {
		t.Fatalf("requeue: %d\n%.3000s", code, res)
	}
	code, res = e.post("/submit", url.Values{"csrf": {tok}, "confirm": {"yes"}, "routine": {"edit"}, "body": {strings.Repeat("x", 3<<20)}})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(res, "decreectl run") {
		t.Fatalf("a 3 MiB submission: %d, want 413 pointing to decreectl run\n%.2000s", code, res)
	}
	code, res = e.post("/messages/"+id+"/revert", url.Values{"csrf": {tok}, "confirm": {"yes"}})
	if code != http.StatusConflict {
		t.Fatalf("revert of a message that is not done: %d, want 409\n%.2000s", code, res)
	}
}

var rowRE = regexp.MustCompile(`<tr class="(add|del|ctx|hunk|meta)">`)

// TestLargeDiffPaged: a 100,000-line diff shows its per-file summary and
// one page of lines at a time, and the controller never holds it whole.
func TestLargeDiffPaged(t *testing.T) {
	e := startEnv(t)
	id := e.submit("edit", "lines", "100000")
	e.waitState(id, decreev1.MessageState_MESSAGE_STATE_DONE, 60*time.Second)
	code, page := e.get("/messages/" + id + "/diff")
	if code != http.StatusOK {
		t.Fatalf("diff page: %d\n%.2000s", code, page)
	}
	if !strings.Contains(page, "+100001") || !strings.Contains(page, ">notes.txt<") || !strings.Contains(page, ">README.md<") {
		t.Fatalf("the summary lacks the files or the total of added lines\n%.4000s", page)
	}
	rows := len(rowRE.FindAllString(page, -1))
	if rows == 0 || rows > 2000 || len(page) > 1<<20 {
		t.Fatalf("first page: %d rows, %d bytes; want at most 2000 rows and 1 MiB", rows, len(page))
	}
	next := regexp.MustCompile(`href="\?(name=[^"]+)" rel="next"`).FindStringSubmatch(page)
	if next == nil {
		t.Fatal("no link to the next page")
	}
	code, page2 := e.get("/messages/" + id + "/diff?" + strings.ReplaceAll(next[1], "&amp;", "&"))
	if code != http.StatusOK || !strings.Contains(page2, "(continued)") || !strings.Contains(page2, "note line 1990") {
		t.Fatalf("second page: %d\n%.3000s", code, page2)
	}
	code, raw := e.get("/messages/" + id + "/artifacts/changes.diff")
	if code != http.StatusOK || !strings.HasSuffix(raw, "+note line 100000\n") || strings.Count(raw, "\n+note line ") != 100000 {
		t.Fatalf("raw diff: %d, %d bytes, ends %q", code, len(raw), raw[max(0, len(raw)-40):])
	}
	if kib := e.peakRSSKiB(); kib > 150<<10 {
		t.Fatalf("controller peak RSS %d KiB, want under 150 MiB", kib)
	}
}

// TestDaemonServesDashboard: `decreectl daemon --http` serves the
// dashboard on loopback, and refuses a non-loopback address without TLS
// before starting anything.
func TestDaemonServesDashboard(t *testing.T) {
	bin := testtool.Binaries(t)
	project := testtool.InitProject(t)
	out, err := exec.Command(filepath.Join(bin, "decreectl"), "-C", project, "daemon", "--http", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without TLS") {
		t.Fatalf("daemon --http 0.0.0.0:0: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(bin, "decreectl"), "-C", project, "daemon", "--http", "127.0.0.1:0")
	cmd.Env = testtool.CleanEnv()
	p := testtool.Start(t, "decreectl daemon", cmd)
	var base string
	testtool.WaitFor(t, 30*time.Second, "the daemon's dashboard address", func() bool {
		if m := dashLine.FindStringSubmatch(p.Out.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	var (
		code int
		b    []byte
	)
	testtool.WaitFor(t, 30*time.Second, "the overview to show the daemon and its local worker", func() bool {
		resp, err := http.Get(base)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ = io.ReadAll(resp.Body)
		code = resp.StatusCode
		return code == http.StatusOK && strings.Contains(string(b), "A daemon serves the project") && strings.Contains(string(b), "(in place)")
	})
	if code != http.StatusOK {
		t.Fatalf("overview: %d\n%s", code, b)
	}
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("daemon exited %d\n%s", code, p.Out)
	}
}

// TestLargeLogPaged: a 200 MB log opens on its last page, pages back to
// its first line, and neither the page nor the controller holds it whole.
func TestLargeLogPaged(t *testing.T) {
	e := startEnv(t)
	e.setConfig("max_log_bytes: 300000000")
	id := e.submit("big")
	e.waitState(id, decreev1.MessageState_MESSAGE_STATE_DONE, 3*time.Minute)
	code, page := e.get("/messages/" + id + "/log")
	if code != http.StatusOK || !strings.Contains(page, "THE LAST LINE OF THE BIG LOG") || strings.Contains(page, "FIRST LINE OF THE BIG LOG") {
		t.Fatalf("last page: %d, %d bytes\n%.1000s", code, len(page), page)
	}
	if len(page) > 512<<10 {
		t.Fatalf("last page is %d bytes, want at most 512 KiB", len(page))
	}
	if !strings.Contains(page, `rel="prev"`) || !strings.Contains(page, "of 2000000") {
		t.Fatalf("the last page lacks the earlier link or the size\n%s", page[:strings.Index(page, "<pre")])
	}
	code, first := e.get("/messages/" + id + "/log?attempt=1&offset=0")
	if code != http.StatusOK || !strings.Contains(first, "FIRST LINE OF THE BIG LOG") || len(first) > 512<<10 {
		t.Fatalf("first page: %d, %d bytes", code, len(first))
	}
	code, msg := e.get("/messages/" + id)
	if code != http.StatusOK || len(msg) > 512<<10 {
		t.Fatalf("message page: %d, %d bytes", code, len(msg))
	}
	if kib := e.peakRSSKiB(); kib > 150<<10 {
		t.Fatalf("controller peak RSS %d KiB, want under 150 MiB", kib)
	}
}

// TestRoutinesAndPreChecks: the routines page shows each routine's
// pre-check once the button ran them.
func TestRoutinesAndPreChecks(t *testing.T) {
	e := startEnv(t)
	_, page := e.get("/routines")
	if !strings.Contains(page, "not checked") || !strings.Contains(page, "<code>label</code>") {
		t.Fatalf("routines page before the checks:\n%.4000s", page)
	}
	code, _ := e.post("/routines/check", url.Values{"csrf": {csrf(t, page)}})
	if code != http.StatusSeeOther {
		t.Fatalf("run checks: %d, want a redirect", code)
	}
	_, page = e.get("/routines")
	if !strings.Contains(page, "the stand-in tool is missing") || !strings.Contains(page, `<span class="ok">ready</span>`) {
		t.Fatalf("routines page after the checks:\n%.6000s", page)
	}
	for _, p := range []string{"/cron", "/dead", "/messages", "/submit?routine=slow"} {
		if code, body := e.get(p); code != http.StatusOK {
			t.Errorf("GET %s: %d\n%.1000s", p, code, body)
		}
	}
	if _, body := e.get("/submit?routine=slow"); !strings.Contains(body, `name="param.label"`) {
		t.Errorf("the submit form lacks slow's parameter label")
	}
	// Without JavaScript, choosing a routine posts the form back to show
	// its parameters; nothing is queued.
	code, body := e.post("/submit", url.Values{"csrf": {csrf(t, page)}, "routine": {"slow"}, "show": {"params"}, "body": {"kept"}})
	if code != http.StatusOK || !strings.Contains(body, `name="param.label"`) || !strings.Contains(body, ">kept</textarea>") || strings.Contains(body, "Confirm") {
		t.Errorf("show parameters without JavaScript: %d\n%.3000s", code, body)
	}
	if st, err := e.client.GetStatus(context.Background(), &decreev1.GetStatusRequest{}); err != nil || st.GetQueued() != 0 || st.GetDone() != 0 {
		t.Errorf("showing parameters queued something: %v %v", st, err)
	}
}

var followRE = regexp.MustCompile(`<a href="/messages/([0-9]+-1)">[0-9]+-1</a> follow-up`)

// TestMessageHistory: a message page names the follow-ups it queued; a
// done message is reverted through the dashboard; a dead one shows its
// failure context and note; cron files show their next fire.
func TestMessageHistory(t *testing.T) {
	e := startEnv(t)
	cron := "---\ncron: \"0 3 * * *\"\nroutine: edit\n---\nNightly notes.\n"
	if err := os.WriteFile(filepath.Join(e.project, ".decree", "cron", "nightly.md"), []byte(cron), 0o644); err != nil {
		t.Fatal(err)
	}
	root := e.submit("chain")
	e.waitState(root, decreev1.MessageState_MESSAGE_STATE_DONE, 60*time.Second)
	_, page := e.get("/messages/" + root)
	m := followRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the root's page names no follow-up\n%s", page[strings.Index(page, "<main"):])
	}
	follow := m[1]
	e.waitState(follow, decreev1.MessageState_MESSAGE_STATE_DONE, 60*time.Second)
	e.waitIdle()
	// The loop holds the finished chain a moment after its last message
	// is done (the chain's end); the revert says so, and a retry goes on.
	var (
		code int
		res  string
	)
	testtool.WaitFor(t, 30*time.Second, "the loop to let go of the chain", func() bool {
		code, res = e.post("/messages/"+follow+"/revert", url.Values{"csrf": {csrf(t, page)}, "confirm": {"yes"}})
		return !(code == http.StatusConflict && strings.Contains(res, "is running; revert when the project is idle"))
	})
	if code != http.StatusOK || !strings.Contains(res, "Reverted "+follow) || !strings.Contains(res, "notes.txt") {
		t.Fatalf("revert: %d\n%.3000s", code, res)
	}
	if _, err := os.Stat(filepath.Join(e.project, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("notes.txt is still there after the revert: %v", err)
	}

	dead := e.submit("fail")
	e.waitState(dead, decreev1.MessageState_MESSAGE_STATE_DEAD, 60*time.Second)
	_, page = e.get("/messages/" + dead)
	for _, want := range []string{"Failure context", "boom: the stand-in failed", "Dead-lettered:", "Requeue…"} {
		if !strings.Contains(page, want) {
			t.Errorf("the dead message's page lacks %q", want)
		}
	}
	_, page = e.get("/dead")
	if !strings.Contains(page, dead) || !strings.Contains(page, `class="note"`) {
		t.Errorf("the dead letters page lacks %s with its note\n%.4000s", dead, page)
	}
	testtool.WaitFor(t, 30*time.Second, "the cron file on the cron page", func() bool {
		_, page = e.get("/cron")
		return strings.Contains(page, "nightly.md") && strings.Contains(page, "0 3 * * *")
	})
	if strings.Contains(page, `class="bad"`) {
		t.Errorf("the cron page reports a problem\n%.4000s", page)
	}
	if _, ov := e.get("/"); !strings.Contains(ov, "nightly.md") {
		t.Errorf("the overview lacks the cron file")
	}
}
