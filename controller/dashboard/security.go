package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"time"

	pauth "github.com/decreehq/decree/pkg/auth"
)

const (
	sessionCookie = "decree_session"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 1024
	// csrfField is the form field (and csrfHeader the header htmx sends)
	// carrying the CSRF token.
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// guard applies, in order: security headers, the loopback host check, the
// cross-origin check on unsafe methods, the login, and the CSRF token on
// every POST.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if s.loopback && !loopbackHost(r.Host) {
			s.fail(w, r, http.StatusMisdirectedRequest, "This dashboard answers only to a loopback host name (127.0.0.1, [::1] or localhost).")
			return
		}
		if err := s.coop.Check(r); err != nil {
			s.log.Warn("refused a cross-origin request", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"), "err", err)
			s.fail(w, r, http.StatusForbidden, "This request came from another site and was refused. Use the dashboard's own pages to act.")
			return
		}
		if strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/login" {
			s.login(w, r)
			return
		}
		sid, ok := s.session(r)
		if !ok {
			if s.needAuth {
				if r.Method == http.MethodGet && r.Header.Get("HX-Request") == "" && !strings.HasSuffix(r.URL.Path, "/stream") {
					http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				s.fail(w, r, http.StatusUnauthorized, "Log in first: this dashboard needs the controller's client token.")
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				s.fail(w, r, http.StatusForbidden, "No session: reload the page and try again.")
				return
			}
			sid = s.newSession(w)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				s.fail(w, r, http.StatusRequestEntityTooLarge, "The form could not be read ("+err.Error()+"); the dashboard takes forms up to 2 MiB: submit larger messages with `decreectl run`.")
				return
			}
			if !s.validCSRF(sid, r) {
				s.log.Warn("refused a request without a valid CSRF token", "method", r.Method, "path", r.URL.Path)
				s.fail(w, r, http.StatusForbidden, "The form's security token is missing or stale: reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(withSession(r.Context(), sid)))
	})
}

// loopbackHost reports whether a Host header names a loopback host.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return pauth.IsLoopbackHost(host)
}

// session returns the request's valid session id.
func (s *Server) session(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || len(c.Value) != 64 {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.sessions[c.Value]
	if !ok || time.Now().After(exp) {
		delete(s.sessions, c.Value)
		return "", false
	}
	return c.Value, true
}

// newSession starts a session and sets its cookie.
func (s *Server) newSession(w http.ResponseWriter) string {
	sid := randomHex(32)
	now := time.Now()
	s.mu.Lock()
	if len(s.sessions) >= maxSessions {
		for k, exp := range s.sessions {
			if now.After(exp) || len(s.sessions) >= maxSessions {
				delete(s.sessions, k)
			}
		}
	}
	s.sessions[sid] = now.Add(sessionTTL)
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL / time.Second)})
	return sid
}

// csrfToken is the session's CSRF token: an HMAC of its id under a key
// made at start, so it cannot be derived from the cookie alone.
func (s *Server) csrfToken(sid string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("csrf:" + sid))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *Server) validCSRF(sid string, r *http.Request) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue(csrfField)
	}
	want := s.csrfToken(sid)
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// login shows the login form and checks the token it posts.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	next := r.FormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		next = "/"
	}
	if !s.needAuth {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.render(w, r, http.StatusOK, "login", loginView{Next: next})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		tok := strings.TrimSpace(r.PostFormValue("token"))
		sum := sha256.Sum256([]byte(tok))
		if tok == "" || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			s.log.Warn("refused a dashboard login with a wrong token", "peer", r.RemoteAddr)
			// One wrong guess at a time, half a second each, whoever
			// sends them: guessing cannot be parallelised.
			s.loginMu.Lock()
			time.Sleep(500 * time.Millisecond)
			s.loginMu.Unlock()
			s.render(w, r, http.StatusUnauthorized, "login", loginView{Next: next, Error: "That token is not this controller's client token."})
			return
		}
		s.newSession(w)
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.fail(w, r, http.StatusMethodNotAllowed, "Use GET or POST.")
	}
}

type loginView struct {
	Next, Error string
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
