package httpapi

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"pacer/scheduler"
	"pacer/web"
)

// uiState is what the support page (/ui) needs besides the Server's own
// fields: parsed templates, the staff accounts, the sign-in throttle and
// the cross-origin guard of its forms.
type uiState struct {
	pages    *template.Template
	users    UserStore
	lifetime time.Duration
	throttle SignInThrottle
	cop      *http.CrossOriginProtection
	static   http.Handler
}

// initUI parses the templates and sets up the support page.
func (s *Server) initUI(cfg Config) error {
	pages, err := web.Templates(uiFuncs())
	if err != nil {
		return fmt.Errorf("httpapi: %w", err)
	}
	// A missing page template stops the boot, not a request.
	for _, name := range []string{"attention", "operation", "scope", "signin", "error"} {
		if pages.Lookup(name) == nil {
			return fmt.Errorf("httpapi: the web templates lack page %q", name)
		}
	}
	if cfg.SessionLifetime < 0 {
		return fmt.Errorf("httpapi: session lifetime must not be negative")
	}
	ui := &uiState{
		pages:    pages,
		users:    cfg.Users,
		lifetime: cfg.SessionLifetime,
		throttle: cfg.Throttle,
		cop:      http.NewCrossOriginProtection(),
		static:   http.StripPrefix("/ui/static/", http.FileServerFS(web.Static())),
	}
	if ui.lifetime == 0 {
		ui.lifetime = DefaultSessionLifetime
	}
	if ui.throttle == nil {
		ui.throttle = memoryThrottle{newSignInThrottle()}
	}
	ui.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.WarnContext(r.Context(), "cross-origin form refused", "path", r.URL.EscapedPath(), "origin", r.Header.Get("Origin"), "secFetchSite", r.Header.Get("Sec-Fetch-Site"))
		s.uiRenderError(w, r, http.StatusForbidden, "Refused: cross-site request",
			"This form was sent from another site, so it was not acted on. Open the support page itself and use its forms.")
	}))
	s.ui = ui
	return nil
}

// uiGuard sets the support page's security headers on every /ui response
// and refuses state-changing requests that a browser says came from
// another origin (http.CrossOriginProtection: Sec-Fetch-Site, else Origin
// against Host). Requests without either header (not from a browser) pass.
func (s *Server) uiGuard(next http.Handler) http.Handler {
	guarded := s.ui.cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		guarded.ServeHTTP(w, r)
	})
}

// handleUIStatic serves the embedded CSS and script under /ui/static/.
func (s *Server) handleUIStatic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/ui/static/")
	if name == "" || strings.HasSuffix(name, "/") {
		s.uiNotFound(w, r)
		return
	}
	if _, err := fs.Stat(web.Static(), name); err != nil {
		s.uiNotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	s.ui.static.ServeHTTP(w, r)
}

// handleUIRoot sends / to the support page.
func (s *Server) handleUIRoot(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/ui/", http.StatusFound)
}

// uiNotFound answers an unknown /ui path with a page.
func (s *Server) uiNotFound(w http.ResponseWriter, r *http.Request) {
	s.uiRenderError(w, r, http.StatusNotFound, "Not found", "There is no page at "+r.URL.EscapedPath()+".")
}

// uiPage is what every page shows around its content.
type uiPage struct {
	Title string
	// Staff is the signed-in account; empty when the page is open.
	Staff string
	// Viewer is true when Staff may look and not act: the pages show no
	// action forms (the server refuses them anyway).
	Viewer bool
	// Open shows the "no staff accounts, open on loopback" banner.
	Open bool
	// NoAccounts is true when no staff account exists.
	NoAccounts bool
	Flash      *uiFlash
	// Error is a page-level error message.
	Error string
	// Now is the scheduler's time of the render.
	Now time.Time
	// Query is the operation ID searched for (the top bar's search box).
	Query string
	// Refresh is how often, in seconds, the page reloads itself to stay
	// current (design §14); 0 for pages that do not.
	Refresh int
}

// uiRefreshSeconds is how often the list, operation and scope pages reload
// themselves: a plain reload without JavaScript, and with it a reload that
// waits while a form is being filled in.
const uiRefreshSeconds = 30

// live returns p refreshing itself every uiRefreshSeconds.
func (p uiPage) live() uiPage {
	p.Refresh = uiRefreshSeconds
	return p
}

// uiBase returns the frame of a page: who is signed in, the flash message
// left by the previous action (which it clears), and the time.
func (s *Server) uiBase(w http.ResponseWriter, r *http.Request, title string) uiPage {
	st := staffFrom(r.Context())
	return uiPage{
		Title: title, Staff: st.Name, Viewer: st.Viewer, Open: st.Open, NoAccounts: st.NoAccounts,
		Flash: takeFlash(w, r), Now: s.svc.Now(),
	}
}

// uiRender executes the page template name into a buffer, then writes it
// with status; a template failure is a logged 500.
func (s *Server) uiRender(w http.ResponseWriter, r *http.Request, status int, name string, v any) {
	var buf bytes.Buffer
	if err := s.ui.pages.ExecuteTemplate(&buf, name, v); err != nil {
		s.log.ErrorContext(r.Context(), "render page", "page", name, "path", r.URL.EscapedPath(), "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("internal error; the server log has the details\n"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorView is the page of a request that went wrong.
type errorView struct {
	uiPage
	Status  int
	Message string
}

// uiRenderError answers with an error page.
func (s *Server) uiRenderError(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	v := errorView{uiPage: s.uiBase(w, r, title), Status: status, Message: message}
	s.uiRender(w, r, status, "error", &v)
}

// uiInternalError logs err and answers with a generic error page.
func (s *Server) uiInternalError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
	if p, _ := problemFor(err); p.Type == ProblemTypeStoreUnavailable {
		w.Header().Set("Retry-After", storeRetryAfter)
		s.uiRenderError(w, r, p.Status, "The database does not accept writes",
			"Nothing was changed: the database does not accept writes now (disk full, or its file is read-only). Try again once that is fixed.")
		return
	}
	s.uiRenderError(w, r, http.StatusInternalServerError, "Something went wrong",
		"The server could not answer this request. The server log has the details.")
}

// uiParseForm reads a form body of at most the server's body limit; it
// answers the request itself and returns false when the body is unusable.
func (s *Server) uiParseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
	if err := r.ParseForm(); err != nil {
		s.uiRenderError(w, r, http.StatusBadRequest, "Bad request", "The form could not be read. Go back and send it again.")
		return false
	}
	return true
}

// Flash kinds.
const (
	flashOK    = "ok"
	flashError = "error"
)

// flashCookie carries the message of the last action to the page it
// redirects to (POST, redirect, GET).
const flashCookie = "pacer_flash"

// uiFlash is a one-time message about what the last action did.
type uiFlash struct {
	Kind    string
	Message string
}

// uiRedirect answers a form with a redirect (303) to path, leaving a flash
// message for the page there.
func (s *Server) uiRedirect(w http.ResponseWriter, r *http.Request, path, kind, message string) {
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(kind + "\n" + message)),
		Path: "/ui", MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r),
	})
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// takeFlash returns the flash message r carries, if any, and clears it.
func takeFlash(w http.ResponseWriter, r *http.Request) *uiFlash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r)})
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(b) > 2000 {
		return nil
	}
	kind, msg, ok := strings.Cut(string(b), "\n")
	if !ok || (kind != flashOK && kind != flashError) || msg == "" {
		return nil
	}
	return &uiFlash{Kind: kind, Message: msg}
}

// uiTime is a time as pages show it: UTC text (always there), an ISO value
// a script turns into the viewer's local time, and how far from now.
type uiTime struct {
	Zero bool
	ISO  string
	UTC  string
	Rel  string
}

// uiField is one form field's ID prefix and value, for templates.
type uiField struct{ ID, Value string }

// uiFuncs are the template functions of the support page.
func uiFuncs() template.FuncMap {
	return template.FuncMap{
		"when": func(t, now time.Time) uiTime {
			if t.IsZero() {
				return uiTime{Zero: true}
			}
			t = scheduler.ClampTime(t.UTC()) // as the API shows a stored extreme
			return uiTime{ISO: t.Format(time.RFC3339Nano), UTC: t.Format("2006-01-02 15:04:05") + " UTC", Rel: relative(t, now)}
		},
		"opPath":      operationUIPath,
		"scopePath":   scopeUIPath,
		"dur":         roughDuration,
		"count":       groupThousands,
		"plural":      pluralWord,
		"reasonLabel": reasonLabel,
		"statusText":  statusText,
		"reasonOf": func(op scheduler.Operation) string {
			if op.HoldReason != "" {
				return string(op.HoldReason)
			}
			return string(op.FailureReason)
		},
		"field": func(id, value string) uiField { return uiField{ID: id, Value: value} },
		"cap":   capitalize,
		// resolutions are the three answers to an unknown outcome, in the
		// words API and CLI use (design §14).
		"resolutions": func() []scheduler.Resolution { return scheduler.Resolutions },
		"path":        breakablePath,
	}
}

// breakablePath is a request path, redacted, escaped and with line-break
// opportunities after each '/' and '&', so long paths wrap at their seams.
func breakablePath(p string) template.HTML {
	parts := strings.Split(redactPath(p), "/")
	for i, part := range parts {
		parts[i] = strings.ReplaceAll(template.HTMLEscapeString(part), "&amp;", "&amp;<wbr>")
	}
	return template.HTML(strings.Join(parts, "/<wbr>")) // every part is escaped above
}

// operationUIPath is the support page of an operation; '/' in the ID is
// escaped so the ID stays one path segment.
func operationUIPath(id string) string { return "/ui/operations/" + url.PathEscape(id) }

// scopeUIPath is the support page of a scope.
func scopeUIPath(name string) string { return "/ui/scopes/" + url.PathEscape(name) }

// relative says how far t is from now in words: "in 4m 10s", "3h ago".
func relative(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return "in " + roughDuration(d)
	}
	return roughDuration(-d) + " ago"
}

// roughDuration writes d with its two largest units: "4m 10s", "2d 3h".
func roughDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	d = d.Round(time.Second)
	units := []struct {
		n    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	var parts []string
	for _, u := range units {
		if d >= u.n {
			parts = append(parts, fmt.Sprintf("%d%s", d/u.n, u.name))
			d %= u.n
		} else if len(parts) > 0 {
			break
		}
		if len(parts) == 2 {
			break
		}
	}
	return strings.Join(parts, " ")
}

// groupThousands writes n with thousands separators: 100,000.
func groupThousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + groupThousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
