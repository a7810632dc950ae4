package httpapi

import (
	"net/http"

	"pacer/scheduler"
)

// serveNamed answers a request on the one resource named in the path:
// param reads the name (or answers 404), get fetches or acts on it, and the
// answer is 200 with show of what get returns, or get's error with the
// detail named gives it for the name.
func serveNamed[T any](s *Server, w http.ResponseWriter, r *http.Request,
	param func(http.ResponseWriter, *http.Request) (string, bool),
	get func(name string) (T, error),
	named func(err error, name string) error,
	show func(T) any,
) {
	name, ok := param(w, r)
	if !ok {
		return
	}
	v, err := get(name)
	if err != nil {
		s.fail(w, r, named(err, name))
		return
	}
	s.writeJSON(w, r, http.StatusOK, show(v))
}

// serveAction answers a manual action's POST on one resource as
// serveNamed does, act taking the request's body: a JSON B with no unknown
// fields, or none.
func serveAction[B, T any](s *Server, w http.ResponseWriter, r *http.Request,
	param func(http.ResponseWriter, *http.Request) (string, bool),
	act func(name string, body B) (T, error),
	named func(err error, name string) error,
	show func(T) any,
) {
	serveNamed(s, w, r, param, func(name string) (T, error) {
		var body B
		if err := decodeJSON(w, r, s.maxBody, &body, true); err != nil {
			var none T
			return none, err
		}
		return act(name, body)
	}, named, show)
}

// operationAction answers a manual action on the operation in the path
// with the operation it left (see serveAction).
func operationAction[B any](s *Server, w http.ResponseWriter, r *http.Request, act func(id string, body B) (scheduler.Operation, error)) {
	serveAction(s, w, r, s.operationParam, act, actionError, showOperation)
}

// scopeAction answers a manual action on the scope in the path with the
// scope it left (see serveAction).
func scopeAction[B any](s *Server, w http.ResponseWriter, r *http.Request, act func(name string, body B) (scheduler.Scope, error)) {
	serveAction(s, w, r, s.scopeParam, act, scopeNotFound, s.showScope)
}

// showOperation is an operation as the API shows it.
func showOperation(op scheduler.Operation) any { return newOperation(op) }

// showScope is a scope as the API shows it now.
func (s *Server) showScope(sc scheduler.Scope) any { return newScope(sc, s.svc.Now()) }
