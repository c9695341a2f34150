package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxFormBytes bounds a posted form (a submitted message body included).
const maxFormBytes = 2 << 20

// callTimeout bounds one unary call made for a page.
const callTimeout = 15 * time.Second

// pages holds one template set per page, each with the shared layout.
type pages struct {
	sets map[string]*template.Template
}

var funcs = template.FuncMap{
	"ts":       fmtTime,
	"ago":      ago,
	"dur":      fmtDur,
	"span":     span,
	"state":    stateName,
	"bytes":    fmtBytes,
	"esc":      url.PathEscape,
	"q":        url.QueryEscape,
	"add":      func(a, b int) int { return a + b },
	"add64":    func(a, b uint64) uint64 { return a + b },
	"outcome":  outcomeName,
	"kind":     kindName,
	"isLive":   func(st decreev1.MessageState) bool { return st == decreev1.MessageState_MESSAGE_STATE_RUNNING },
	"canStop":  canCancel,
	"canRetry": func(st decreev1.MessageState) bool { return st == decreev1.MessageState_MESSAGE_STATE_DEAD },
	"format":   formatName,
	"firstLine": func(s string) string {
		line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
		return line
	},
	"states":  func() []string { return []string{"queued", "running", "interrupted", "done", "dead"} },
	"params":  customParams,
	"canUndo": func(st decreev1.MessageState) bool { return st == decreev1.MessageState_MESSAGE_STATE_DONE },
}

func loadPages() (*pages, error) {
	names, err := fs.Glob(assets, "templates/pages/*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, n := range names {
		t, err := template.New("").Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", n, err)
		}
		p.sets[strings.TrimSuffix(path.Base(n), ".html")] = t
	}
	return p, nil
}

// view is what every page template gets: the page's own data and what the
// layout needs.
type view struct {
	Title string
	Nav   string
	CSRF  string
	Auth  bool
	Data  any
}

// render executes a page (its "layout" template, or with fragment its
// "live" template only) into a buffer first, so a template error never
// leaves half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, page string, data any) {
	s.renderPart(w, r, code, page, "layout", data)
}

func (s *Server) renderPart(w http.ResponseWriter, r *http.Request, code int, page, part string, data any) {
	t := s.pages.sets[page]
	if t == nil {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	v := view{Title: page, Nav: page, Auth: s.needAuth, Data: data}
	if sid, ok := sessionFrom(r.Context()); ok {
		v.CSRF = s.csrfToken(sid)
	}
	if tv, ok := data.(interface{ title() string }); ok {
		v.Title = tv.title()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, part, v); err != nil {
		s.log.Error("dashboard template", "page", page, "err", err)
		http.Error(w, "the page could not be rendered; see the controller's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

type errorView struct {
	Code    int
	Message string
}

func (e errorView) title() string { return http.StatusText(e.Code) }

// fail shows an error page (or, to htmx, the message alone).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		fmt.Fprint(w, msg)
		return
	}
	s.render(w, r, code, "error", errorView{Code: code, Message: msg})
}

// failRPC shows a failed call with the HTTP code matching its gRPC code.
func (s *Server) failRPC(w http.ResponseWriter, r *http.Request, what string, err error) {
	st, _ := status.FromError(err)
	code := http.StatusBadGateway
	switch st.Code() {
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.InvalidArgument, codes.OutOfRange:
		code = http.StatusBadRequest
	case codes.FailedPrecondition, codes.AlreadyExists:
		code = http.StatusConflict
	case codes.DeadlineExceeded:
		code = http.StatusGatewayTimeout
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
	}
	s.fail(w, r, code, fmt.Sprintf("%s: %s", what, st.Message()))
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", staticHandler(static)))
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /live/overview", s.overviewLive)
	m.HandleFunc("GET /events/stream", s.eventsStream)
	m.HandleFunc("GET /messages", s.messageList)
	m.HandleFunc("GET /messages/{id}", s.message)
	m.HandleFunc("GET /messages/{id}/log", s.logPage)
	m.HandleFunc("GET /messages/{id}/log/stream", s.logStream)
	m.HandleFunc("GET /messages/{id}/diff", s.diffPage)
	m.HandleFunc("GET /messages/{id}/artifacts/{name}", s.artifact)
	m.HandleFunc("GET /messages/{id}/body", s.body)
	m.HandleFunc("POST /messages/{id}/{action}", s.messageAction)
	m.HandleFunc("GET /dead", s.deadLetters)
	m.HandleFunc("GET /cron", s.cronPage)
	m.HandleFunc("GET /routines", s.routinesPage)
	m.HandleFunc("POST /routines/check", s.runChecks)
	m.HandleFunc("GET /submit", s.submitForm)
	m.HandleFunc("POST /submit", s.submit)
	m.HandleFunc("POST /logout", s.logout)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "No such page.")
	})
	s.mux = m
}

// staticHandler serves the embedded assets with a long cache lifetime
// (their names change with their versions only through a new build, so
// a day is enough).
func staticHandler(fsys fs.FS) http.Handler {
	h := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if sid, ok := sessionFrom(r.Context()); ok {
		s.mu.Lock()
		delete(s.sessions, sid)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

type ctxKey struct{}

func withSession(ctx context.Context, sid string) context.Context {
	return context.WithValue(ctx, ctxKey{}, sid)
}

func sessionFrom(ctx context.Context) (string, bool) {
	sid, ok := ctx.Value(ctxKey{}).(string)
	return sid, ok
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func fmtTime(t *timestamppb.Timestamp) string {
	if t == nil || !t.IsValid() || t.AsTime().IsZero() {
		return "—"
	}
	return t.AsTime().Local().Format("2006-01-02 15:04:05")
}

func ago(t *timestamppb.Timestamp) string {
	if t == nil || !t.IsValid() {
		return ""
	}
	return span(time.Since(t.AsTime()))
}

// span writes a duration the way people read it: 3s, 4m10s, 2h5m, 3d4h.
func span(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var out string
	switch {
	case d < time.Second:
		out = fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		out = fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		out = fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		out = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		out = fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	if neg {
		return "in " + out
	}
	return out
}

// fmtDur is the span between two timestamps; an unfinished one runs to now.
func fmtDur(a, b *timestamppb.Timestamp) string {
	if a == nil || !a.IsValid() || a.AsTime().IsZero() {
		return "—"
	}
	end := time.Now()
	if b != nil && b.IsValid() && !b.AsTime().IsZero() {
		end = b.AsTime()
	}
	return span(end.Sub(a.AsTime()))
}

func fmtBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func stateName(st decreev1.MessageState) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "MESSAGE_STATE_"))
}

func outcomeName(o decreev1.RunOutcome) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(o.String(), "RUN_OUTCOME_"), "_", " "))
}

func kindName(k decreev1.EventKind) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k.String(), "EVENT_KIND_"), "_", " "))
}

func canCancel(st decreev1.MessageState) bool {
	switch st {
	case decreev1.MessageState_MESSAGE_STATE_QUEUED, decreev1.MessageState_MESSAGE_STATE_RUNNING, decreev1.MessageState_MESSAGE_STATE_INTERRUPTED:
		return true
	}
	return false
}

// callCtx bounds a unary call made for a request.
func callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), callTimeout)
}
