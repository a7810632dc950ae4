package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"pacer/scheduler"
)

// UserStore keeps the support page's staff accounts and their sign-in
// sessions. Package db implements it. Sessions are looked up by the
// SHA-256 of the cookie's token, so the store never holds a usable token.
type UserStore interface {
	// CountUsers returns how many staff accounts exist.
	CountUsers(ctx context.Context) (int, error)
	// CheckPassword reports whether password is name's; an unknown name is
	// false after the same work. A locked account (too many failed
	// sign-ins) is scheduler.ErrAccountLocked; any other error is for a
	// store that cannot answer.
	CheckPassword(ctx context.Context, name, password string) (bool, error)
	// CreateSession stores a session of name under tokenHash, valid until
	// expires, and drops sessions expired at now. scheduler.ErrNotFound
	// when the account does not exist.
	CreateSession(ctx context.Context, name string, tokenHash []byte, now, expires time.Time) error
	// SessionUser returns the account of the session tokenHash unexpired
	// at now and its role (scheduler.RoleViewer or RoleOperator), or
	// scheduler.ErrNotFound.
	SessionUser(ctx context.Context, tokenHash []byte, now time.Time) (name, role string, err error)
	// DeleteSession ends the session tokenHash; none is not an error.
	DeleteSession(ctx context.Context, tokenHash []byte) error
}

// DefaultSessionLifetime is how long a staff sign-in lasts when
// Config.SessionLifetime is zero.
const DefaultSessionLifetime = 12 * time.Hour

// maxSignInName bounds the account name a sign-in is checked for.
const maxSignInName = 128

// sessionCookie names the cookie carrying a staff session token.
const sessionCookie = "pacer_session"

// staffKey is the context key of the staff member a /ui request acts as.
type staffKey struct{}

// staff is who a /ui request comes from.
type staff struct {
	// Name is the signed-in account; empty when the page is open.
	Name string
	// Viewer is true for an account that may look and not act (design
	// §14): the server refuses its actions.
	Viewer bool
	// Open is true when no account exists and the request came over a
	// loopback connection to a server without an API token: the page is
	// open to it, with a banner saying so.
	Open bool
	// Proxied is true when the request says it came through a proxy: then
	// a loopback connection does not open the page.
	Proxied bool
	// NoAccounts is true when no staff account exists at all.
	NoAccounts bool
}

// staffFrom returns the staff member uiRequireStaff admitted.
func staffFrom(ctx context.Context) staff {
	st, _ := ctx.Value(staffKey{}).(staff)
	return st
}

// uiWho finds who r comes from: a valid session's account, or the open
// page of local development, or nobody.
func (s *Server) uiWho(r *http.Request) (staff, error) {
	ctx := r.Context()
	n := 0
	if s.ui.users != nil {
		var err error
		if n, err = s.ui.users.CountUsers(ctx); err != nil {
			return staff{}, err
		}
	}
	if n == 0 {
		return staff{Open: s.token == "" && loopbackConn(r) && !proxied(r), NoAccounts: true, Proxied: proxied(r)}, nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return staff{}, nil
	}
	name, role, err := s.ui.users.SessionUser(ctx, tokenHash(c.Value), s.svc.Now())
	if errors.Is(err, scheduler.ErrNotFound) {
		return staff{}, nil
	} else if err != nil {
		return staff{}, err
	}
	return staff{Name: name, Viewer: role == scheduler.RoleViewer}, nil
}

// uiRequireStaff admits a /ui request from a signed-in staff member (the
// actor of its actions is their account name) or, when no account exists,
// from a loopback connection to a server without an API token (actor
// "local"). Others are sent to the sign-in form, or told to create an
// account.
func (s *Server) uiRequireStaff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := s.uiWho(r)
		if err != nil {
			s.uiInternalError(w, r, err)
			return
		}
		switch {
		case who.Viewer && r.Method != http.MethodGet && r.Method != http.MethodHead && r.URL.Path != "/ui/signout":
			// A viewer looks and does not act: refused here, whatever the
			// page showed (design §14).
			s.log.WarnContext(r.Context(), "action refused: viewer", "user", who.Name, "path", r.URL.EscapedPath())
			s.uiRenderError(w, r, http.StatusForbidden, "Viewers cannot act",
				"The account "+who.Name+" may look at everything and act on nothing. An operator's account can do this; "+
					"ask one, or have the server's administrator run: pacer users add NAME --role operator")
		case who.Name != "":
			ctx := withActor(context.WithValue(r.Context(), staffKey{}, who), who.Name)
			next.ServeHTTP(w, r.WithContext(ctx))
		case who.Open:
			ctx := withActor(context.WithValue(r.Context(), staffKey{}, who), ActorLocal)
			next.ServeHTTP(w, r.WithContext(ctx))
		case who.NoAccounts && who.Proxied:
			s.uiRenderError(w, r, http.StatusForbidden, "No staff account yet",
				"This request came through a proxy (it carries Forwarded, X-Forwarded-For or X-Real-IP), so the page does not open without a staff account: "+
					"behind a proxy anyone could reach it. Create one on the server's machine with: pacer users add NAME")
		case who.NoAccounts:
			s.uiRenderError(w, r, http.StatusForbidden, "No staff account yet",
				"The support page needs a staff account on this server. Create one on the server's machine with: pacer users add NAME")
		default:
			target := "/ui/signin"
			if r.Method == http.MethodGet && r.URL.RequestURI() != "/ui/" {
				target += "?next=" + url.QueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
		}
	})
}

// signInView is the sign-in page.
type signInView struct {
	uiPage
	Name string
	Next string
}

// handleUISignInForm answers GET /ui/signin.
func (s *Server) handleUISignInForm(w http.ResponseWriter, r *http.Request) {
	who, err := s.uiWho(r)
	if err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	if who.Name != "" {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	v := signInView{uiPage: s.uiBase(w, r, "Sign in"), Next: safeNext(r.URL.Query().Get("next"))}
	v.Open, v.NoAccounts = who.Open, who.NoAccounts
	s.uiRender(w, r, http.StatusOK, "signin", &v)
}

// handleUISignIn answers POST /ui/signin: it checks the name and password
// (failures are rate-limited per account name and per client address),
// starts a session and goes on to the page asked for.
func (s *Server) handleUISignIn(w http.ResponseWriter, r *http.Request) {
	if !s.uiParseForm(w, r) {
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if len(name) > maxSignInName { // no account has such a name; keep throttle keys small
		name = name[:maxSignInName]
	}
	password := r.PostForm.Get("password")
	v := signInView{uiPage: s.uiBase(w, r, "Sign in"), Name: name, Next: safeNext(r.PostForm.Get("next"))}
	if s.ui.users == nil {
		v.NoAccounts = true
		v.Error = "No staff account exists on this server. Create one with: pacer users add NAME"
		s.uiRender(w, r, http.StatusUnauthorized, "signin", &v)
		return
	}
	now := s.svc.Now()
	keys := []string{"user:" + name, "client:" + clientIP(r)}
	wait, err := s.ui.throttle.Reserve(r.Context(), now, SignInWindow, throttleKeys(keys))
	if err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	if wait > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(wait))
		v.Error = "Too many failed sign-ins. Try again in " + roughDuration(wait) + "."
		s.log.WarnContext(r.Context(), "sign-in refused: too many failures", "user", name, "client", clientIP(r))
		s.uiRender(w, r, http.StatusTooManyRequests, "signin", &v)
		return
	}
	ok, err := s.ui.users.CheckPassword(r.Context(), name, password)
	if errors.Is(err, scheduler.ErrAccountLocked) {
		s.log.WarnContext(r.Context(), "sign-in refused: account locked", "user", name, "client", clientIP(r))
		v.Error = fmt.Sprintf("This account is locked after %d failed sign-ins in a row. The server's administrator unlocks it with: pacer users unlock %s", scheduler.MaxFailedSignIns, name)
		s.uiRender(w, r, http.StatusForbidden, "signin", &v)
		return
	}
	if err != nil {
		if rerr := s.ui.throttle.Release(r.Context(), now, keys); rerr != nil {
			s.log.WarnContext(r.Context(), "give back a sign-in reservation", "err", rerr)
		}
		s.uiInternalError(w, r, err)
		return
	}
	if !ok { // the failure was counted when it was reserved
		s.log.WarnContext(r.Context(), "sign-in failed", "user", name, "client", clientIP(r))
		v.Error = "The name or the password is wrong."
		s.uiRender(w, r, http.StatusUnauthorized, "signin", &v)
		return
	}
	if err := s.ui.throttle.Succeed(r.Context(), now, keys[0], keys[1:]); err != nil {
		s.log.WarnContext(r.Context(), "forget failed sign-ins after a success", "user", name, "err", err)
	}
	token, err := newSessionToken()
	if err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	if err := s.ui.users.CreateSession(r.Context(), name, tokenHash(token), now, now.Add(s.ui.lifetime)); err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "signed in", "user", name)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: "/ui", MaxAge: int(s.ui.lifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r),
	})
	s.uiRedirect(w, r, v.Next, flashOK, "Signed in as "+name+".")
}

// handleUISignOut answers POST /ui/signout: it ends the session.
func (s *Server) handleUISignOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" && s.ui.users != nil {
		if err := s.ui.users.DeleteSession(r.Context(), tokenHash(c.Value)); err != nil {
			s.uiInternalError(w, r, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/ui", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r),
	})
	s.uiRedirect(w, r, "/ui/signin", flashOK, "Signed out.")
}

// newSessionToken returns 256 random bits, URL-safe.
func newSessionToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// tokenHash is what the store keeps of a session token.
func tokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// secureRequest reports whether r came over TLS, directly or through a
// proxy that says so. (A forged header only makes the cookie stricter.)
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// safeNext returns next when it is a path on the support page, else the
// landing page: a sign-in never redirects off the site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// clientIP is the address of the connection's peer (forwarding headers
// are not trusted: anyone can set them).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// loopbackConn reports whether r came over a loopback connection: both the
// local address it arrived on and its peer are loopback addresses.
func loopbackConn(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	isLoopback := func(hostport string) bool {
		host, _, err := net.SplitHostPort(hostport)
		if err != nil {
			return false
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	return isLoopback(local.String()) && isLoopback(r.RemoteAddr)
}
