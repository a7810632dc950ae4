// Package httpapi is pacer's HTTP interface: the /v1 JSON API (design §7),
// bearer-token authentication, and the health endpoints.
//
// It also serves the support page under /ui (design §8, ui_*.go): server-
// rendered pages from package web, staff sign-in with server-side sessions
// (session*.go), and forms guarded by http.CrossOriginProtection. Its
// errors are HTML pages, not problems.
//
// Every error is an RFC 9457 application/problem+json document; problemFor
// in problem.go is the one place that maps errors to statuses. Request and
// response bodies are this package's own types (scopes_types.go,
// operations_types.go), never the scheduler's domain types, so the wire
// format can't change by accident and secrets can't leak through a field
// added to the domain.
//
// Operation IDs may contain '/'. In a URL path such an ID must be escaped
// as %2F (for example GET /v1/operations/sync%2F72/attempts); the router
// matches on the escaped path and the handlers unescape the segment. An
// unescaped '/' makes the path name another route and yields a 404 whose
// detail says to escape it.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"pacer/scheduler"
)

// Default body limits, applied by New when the Config leaves them zero.
const (
	// DefaultMaxBodyBytes bounds a request body other than a batch enqueue.
	DefaultMaxBodyBytes int64 = 1 << 20
	// DefaultMaxBatchBodyBytes bounds a POST /v1/operations/batch body.
	DefaultMaxBatchBodyBytes int64 = 32 << 20
)

// The actors recorded for manual actions taken through the API.
const (
	// ActorAPI is the actor of a request authenticated with the API token.
	ActorAPI = "api"
	// ActorLocal is the actor of a request to a server without a token
	// (loopback-only development).
	ActorLocal = "local"
)

// Config holds what a Server needs.
type Config struct {
	// Service is the scheduler API the handlers call. Required.
	Service *scheduler.Service
	// Token is the API bearer token required on /v1. Empty disables
	// authentication: the caller guarantees the server listens on loopback
	// only.
	Token string
	// Logger receives internal errors and an access log line per request.
	// Nil discards. Secrets never reach it.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes); a
	// larger body is answered with 413.
	MaxBodyBytes int64
	// MaxBatchBodyBytes bounds batch enqueue bodies (default
	// DefaultMaxBatchBodyBytes).
	MaxBatchBodyBytes int64
	// Ready reports whether the server can take work, for GET /readyz.
	// Nil means always ready.
	Ready func(ctx context.Context) error
	// Metrics serves GET /metrics (Prometheus); nil leaves the route out.
	// It is guarded like /v1: with a Token configured a scraper sends it
	// as a bearer token; without one the server is on loopback only.
	Metrics http.Handler
	// Users keeps the support page's staff accounts and sessions (/ui).
	// Without any account (or with Users nil) the page is open only to
	// loopback connections of a server without a Token, with a banner
	// saying so; otherwise it asks to create an account.
	Users UserStore
	// SessionLifetime is how long a staff sign-in lasts (default
	// DefaultSessionLifetime).
	SessionLifetime time.Duration
	// Throttle counts failed sign-ins; nil means one in this process's
	// memory. Processes sharing a database pass the store's.
	Throttle SignInThrottle
}

// Server serves pacer's HTTP API. Build it with New; it is safe for
// concurrent use.
type Server struct {
	svc      *scheduler.Service
	token    string
	log      *slog.Logger
	maxBody  int64
	maxBatch int64
	ready    func(ctx context.Context) error
	metrics  http.Handler
	ui       *uiState // the support page (ui_server.go)
	mux      *chi.Mux
}

// New returns a Server for cfg, with defaults applied. It fails when
// cfg.Service is nil or a limit is negative.
func New(cfg Config) (*Server, error) {
	if cfg.Service == nil {
		return nil, errors.New("httpapi: config needs a scheduler service")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxBatchBodyBytes < 0 {
		return nil, errors.New("httpapi: body limits must not be negative")
	}
	s := &Server{
		svc:      cfg.Service,
		token:    cfg.Token,
		log:      cfg.Logger,
		maxBody:  cfg.MaxBodyBytes,
		maxBatch: cfg.MaxBatchBodyBytes,
		ready:    cfg.Ready,
		metrics:  cfg.Metrics,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.maxBatch == 0 {
		s.maxBatch = DefaultMaxBatchBodyBytes
	}
	if err := s.initUI(cfg); err != nil {
		return nil, err
	}
	s.mux = s.routes()
	return s, nil
}

// Handler returns the HTTP handler serving every route.
func (s *Server) Handler() http.Handler { return s.mux }

// routes lists every route of the server.
func (s *Server) routes() *chi.Mux {
	r := chi.NewRouter()
	r.Use(s.recoverPanics, s.accessLog)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	if s.metrics != nil {
		r.With(s.authenticate).Method(http.MethodGet, "/metrics", s.metrics)
	}
	r.Get("/v1/openapi.json", s.handleOpenAPI) // no secrets in it: no token needed

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.authenticate)

		r.Get("/scopes", s.handleListScopes)
		r.Put("/scopes/{providerScope}", s.handlePutScope)
		r.Get("/scopes/{providerScope}", s.handleGetScope)
		r.Post("/scopes/{providerScope}/resume", s.handleResumeScope)
		r.Post("/scopes/{providerScope}/pause", s.handlePauseScope)
		r.Get("/providers", s.handleListProviders)

		r.Post("/operations", s.handleEnqueue)
		r.Post("/operations/batch", s.handleEnqueueBatch)
		r.Post("/operations/bulk", s.handleBulk)
		r.Get("/operations", s.handleListOperations)
		r.Get("/operations/{operationId}", s.handleGetOperation)
		r.Get("/operations/{operationId}/attempts", s.handleListAttempts)
		r.Get("/operations/{operationId}/audit", s.handleListAudit)
		r.Post("/operations/{operationId}/release", s.handleRelease)
		r.Post("/operations/{operationId}/resolve", s.handleResolve)
		r.Post("/operations/{operationId}/cancel", s.handleCancel)
		r.Post("/operations/{operationId}/unrelease", s.handleUnrelease)

		r.Get("/changes", s.handleChanges)
	})

	// The support page (design §8): staff sign in; every POST passes the
	// cross-origin guard.
	r.Get("/", s.handleUIRoot)
	r.Route("/ui", func(r chi.Router) {
		r.Use(s.uiGuard)
		r.NotFound(s.uiNotFound)
		r.Get("/static/*", s.handleUIStatic)
		r.Get("/signin", s.handleUISignInForm)
		r.Post("/signin", s.handleUISignIn)
		r.Group(func(r chi.Router) {
			r.Use(s.uiRequireStaff)
			r.Get("/", s.handleUIAttention)
			r.Post("/signout", s.handleUISignOut)
			r.Get("/operations/{operationId}", s.handleUIOperation)
			r.Post("/operations/{operationId}/release", s.handleUIRelease)
			r.Post("/operations/{operationId}/resolve", s.handleUIResolve)
			r.Post("/operations/{operationId}/cancel", s.handleUICancel)
			r.Post("/operations/{operationId}/unrelease", s.handleUIUnrelease)
			r.Post("/operations/bulk", s.handleUIBulk)
			r.Get("/scopes/{providerScope}", s.handleUIScope)
			r.Post("/scopes/{providerScope}/resume", s.handleUIResume)
			r.Post("/scopes/{providerScope}/pause", s.handleUIPause)
			r.Post("/scopes/{providerScope}/release-held", s.handleUIReleaseHeld)
			r.Post("/scopes/{providerScope}/credentials", s.handleUICredentials)
		})
	})
	return r
}

// handleHealthz answers GET /healthz: the process is up.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers GET /readyz with Config.Ready's verdict.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			s.writeProblem(w, r, newProblem(http.StatusServiceUnavailable, "the server is not ready to take work"))
			return
		}
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}
