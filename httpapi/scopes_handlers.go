package httpapi

import (
	"errors"
	"net/http"
	"net/url"

	"pacer/scheduler"
)

// handlePutScope answers PUT /v1/scopes/{providerScope}: 201 with the new
// scope, 200 with the replaced one.
func (s *Server) handlePutScope(w http.ResponseWriter, r *http.Request) {
	name, ok := s.scopeParam(w, r)
	if !ok {
		return
	}
	var body PutScopeRequest
	if err := decodeJSON(w, r, s.maxBody, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	sc, created, err := s.svc.PutScope(r.Context(), body.input(name), actorFrom(r.Context()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/scopes/"+url.PathEscape(sc.Name))
	}
	s.writeJSON(w, r, status, newScope(sc, s.svc.Now()))
}

// handleListScopes answers GET /v1/scopes.
func (s *Server) handleListScopes(w http.ResponseWriter, r *http.Request) {
	scopes, err := s.svc.ListScopes(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.svc.Now()
	s.writeJSON(w, r, http.StatusOK, ScopeList{Scopes: convert(scopes, func(sc scheduler.Scope) Scope { return newScope(sc, now) })})
}

// handleGetScope answers GET /v1/scopes/{providerScope}.
func (s *Server) handleGetScope(w http.ResponseWriter, r *http.Request) {
	serveNamed(s, w, r, s.scopeParam, func(name string) (scheduler.Scope, error) {
		return s.svc.GetScope(r.Context(), name)
	}, scopeNotFound, s.showScope)
}

// handleResumeScope answers POST /v1/scopes/{providerScope}/resume: it
// lifts every wait of the scope (hold, pause, learned budget, rate slot).
func (s *Server) handleResumeScope(w http.ResponseWriter, r *http.Request) {
	scopeAction(s, w, r, func(name string, body ResumeScopeRequest) (scheduler.Scope, error) {
		return s.svc.ResumeScope(r.Context(), name, body.Reason, actorFrom(r.Context()))
	})
}

// handlePauseScope answers POST /v1/scopes/{providerScope}/pause: a
// person pauses the scope until a time (design §14).
func (s *Server) handlePauseScope(w http.ResponseWriter, r *http.Request) {
	scopeAction(s, w, r, func(name string, body PauseScopeRequest) (scheduler.Scope, error) {
		return s.svc.PauseScope(r.Context(), name, body.input(), actorFrom(r.Context()))
	})
}

// scopeParam returns the scope named in the path, or answers 404.
func (s *Server) scopeParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	name, ok := pathParam(r, "providerScope")
	if !ok {
		s.writeProblem(w, r, newProblem(http.StatusNotFound, "the scope name in the path is not validly escaped"))
	}
	return name, ok
}

// scopeNotFound names the scope in a not-found error's detail.
func scopeNotFound(err error, name string) error {
	if errors.Is(err, scheduler.ErrNotFound) {
		return withDetail(err, "no scope %q", name)
	}
	return err
}
