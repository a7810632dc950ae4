package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// actorKey is the context key of the actor a request acts as.
type actorKey struct{}

// withActor returns ctx carrying actor.
func withActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// actorFrom returns the actor set by authenticate ("local" when none was).
func actorFrom(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return ActorLocal
}

// authenticate guards /v1: it admits a request that carries the API token
// and records the actor manual actions are attributed to. It is the seam
// for other principals (staff sessions): whatever identifies the caller
// sets the actor here, and handlers only ever read actorFrom.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, p := s.principal(r)
		if p != nil {
			if p.challenge != "" {
				w.Header().Set("WWW-Authenticate", p.challenge)
			}
			s.writeProblem(w, r, p.Problem)
			return
		}
		next.ServeHTTP(w, r.WithContext(withActor(r.Context(), actor)))
	})
}

// authProblem is a refused authentication with its WWW-Authenticate value.
type authProblem struct {
	Problem
	challenge string
}

// principal returns the actor r acts as, or the problem refusing it.
func (s *Server) principal(r *http.Request) (string, *authProblem) {
	if s.token == "" {
		if proxied(r) {
			return "", &authProblem{Problem: newProblem(http.StatusForbidden, proxiedWithoutToken)}
		}
		return ActorLocal, nil
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", &authProblem{
			Problem:   newProblem(http.StatusUnauthorized, "send the API token as 'Authorization: Bearer <token>'"),
			challenge: `Bearer realm="pacer"`,
		}
	}
	// Compare digests so neither the content nor the length of the token
	// shows in the timing.
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	want := sha256.Sum256([]byte(s.token))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return "", &authProblem{
			Problem:   newProblem(http.StatusUnauthorized, "the bearer token is not valid"),
			challenge: `Bearer realm="pacer", error="invalid_token"`,
		}
	}
	return ActorAPI, nil
}

// proxiedWithoutToken says why a server without an API token refuses a
// request that came through a proxy.
const proxiedWithoutToken = "this server has no API token, and the request came through a proxy (it carries Forwarded, X-Forwarded-For or X-Real-IP): " +
	"through a proxy, a loopback connection says nothing of who is calling, so without a token anyone the proxy serves would have full access; " +
	"start pacer with --api-token (or PACER_API_TOKEN)"

// proxied reports whether r says it was forwarded by a proxy. Behind a
// local reverse proxy every connection is a loopback one, so loopback no
// longer means local.
func proxied(r *http.Request) bool {
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		if _, ok := r.Header[h]; ok {
			return true
		}
	}
	return false
}

// recoverPanics turns a handler panic into a logged 500 problem.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.internalError(w, r, fmt.Errorf("panic: %v", v))
		}()
		next.ServeHTTP(w, r)
	})
}

// accessLog logs one line per request: method, escaped path, status, size
// and duration (health probes at debug level). Headers (and so
// credentials) and bodies are never logged.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.svc.Now() // the one clock, as everywhere in pacer
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics" {
			level = slog.LevelDebug
		}
		s.log.Log(r.Context(), level, "http request",
			"method", r.Method, "path", r.URL.EscapedPath(), "status", ww.Status(),
			"bytes", ww.BytesWritten(), "duration", s.svc.Now().Sub(start))
	})
}

// notFound answers requests for unknown routes.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	detail := fmt.Sprintf("no route for %s %s", r.Method, r.URL.EscapedPath())
	if strings.HasPrefix(r.URL.Path, "/v1/operations/") {
		detail += "; an operation ID containing '/' must be escaped as %2F in the path"
	}
	s.writeProblem(w, r, newProblem(http.StatusNotFound, detail))
}

// methodNotAllowed answers a known route asked with the wrong method,
// listing the methods it takes in Allow.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if s.mux.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
	}
	s.writeProblem(w, r, newProblem(http.StatusMethodNotAllowed,
		fmt.Sprintf("%s does not take %s; it takes %s", r.URL.EscapedPath(), r.Method, strings.Join(allowed, ", "))))
}
