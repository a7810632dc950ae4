package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"pacer/scheduler"
)

// Problem type URIs pacer uses besides "about:blank" (whose title is the
// HTTP status text). Clients may switch on them.
const (
	// ProblemTypeBlank: the HTTP status says it all.
	ProblemTypeBlank = "about:blank"
	// ProblemTypeValidation: fields are invalid; Errors lists them (422).
	ProblemTypeValidation = "urn:pacer:problem:validation"
	// ProblemTypeUnknownScope: an operation names a scope that does not
	// exist (422).
	ProblemTypeUnknownScope = "urn:pacer:problem:unknown-scope"
	// ProblemTypeConflict: an operation with that operationId exists with
	// other content (409).
	ProblemTypeConflict = "urn:pacer:problem:conflict"
	// ProblemTypeInvalidTransition: the operation's state does not allow the
	// action (409).
	ProblemTypeInvalidTransition = "urn:pacer:problem:invalid-transition"
	// ProblemTypeIdentityInUse: another operation of the scope sends the
	// same requestIdentity as an idempotency key the provider still
	// remembers (409).
	ProblemTypeIdentityInUse = "urn:pacer:problem:identity-in-use"
	// ProblemTypeFeedPruned: changes after the change feed cursor were
	// removed by retention; re-read the state and follow anew (410).
	ProblemTypeFeedPruned = "urn:pacer:problem:feed-pruned"
	// ProblemTypeFeedAhead: the change feed cursor lies beyond the newest
	// change of the database (restored from a backup); re-read the state
	// and follow anew (409).
	ProblemTypeFeedAhead = "urn:pacer:problem:feed-ahead"
	// ProblemTypeStoreUnavailable: the database does not accept writes now
	// (disk full, read-only file); nothing was stored. Retry later (503,
	// with Retry-After).
	ProblemTypeStoreUnavailable = "urn:pacer:problem:store-unavailable"
)

// storeRetryAfter is the Retry-After, in seconds, of a store-unavailable
// problem.
const storeRetryAfter = "30"

// maxDetailFields bounds how many field errors a validation detail names.
const maxDetailFields = 5

// Problem is an RFC 9457 problem document, the body of every error
// response (media type application/problem+json). It implements error so a
// client can return it as is.
type Problem struct {
	// Type identifies the kind of problem: "about:blank" or a
	// ProblemType… URI.
	Type string `json:"type"`
	// Title is a short summary of the type.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence in words.
	Detail string `json:"detail"`
	// Errors lists the fields at fault, for validation problems.
	Errors []FieldError `json:"errors,omitempty"`
	// Instance is the path of the request the problem answers.
	Instance string `json:"instance,omitempty"`
}

// Error implements error.
func (p Problem) Error() string {
	return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail)
}

// FieldError names one invalid field of a request body or query, as a JSON
// path such as "request.method" or "operations[3].providerScope".
type FieldError struct {
	// Field is the path of the field at fault.
	Field string `json:"field"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
}

// newProblem returns an about:blank problem with status and detail.
func newProblem(status int, detail string) Problem {
	return Problem{Type: ProblemTypeBlank, Title: statusTitle(status), Status: status, Detail: detail}
}

// statusTitle is the title of an about:blank problem: the status's reason
// phrase as RFC 9110 names it (Go's http.StatusText keeps older names).
func statusTitle(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return "Content Too Large"
	case http.StatusUnprocessableEntity:
		return "Unprocessable Content"
	}
	return http.StatusText(status)
}

// validationProblem returns the 422 problem listing fields.
func validationProblem(fields []FieldError) Problem {
	parts := make([]string, 0, maxDetailFields)
	for i, f := range fields {
		if i == maxDetailFields {
			parts = append(parts, fmt.Sprintf("and %d more", len(fields)-i))
			break
		}
		parts = append(parts, f.Field+" "+f.Message)
	}
	return Problem{
		Type: ProblemTypeValidation, Title: "Invalid input", Status: http.StatusUnprocessableEntity,
		Detail: strings.Join(parts, "; "), Errors: fields,
	}
}

// fromSchedulerFields converts the scheduler's field errors.
func fromSchedulerFields(in []scheduler.FieldError) []FieldError {
	out := make([]FieldError, len(in))
	for i, f := range in {
		out[i] = FieldError{Field: f.Field, Message: f.Message}
	}
	return out
}

// detailError gives an error the detail its problem shows; the error itself
// still decides the status.
type detailError struct {
	err    error
	detail string
}

func (e *detailError) Error() string { return e.err.Error() }
func (e *detailError) Unwrap() error { return e.err }

// withDetail attaches a client-facing detail to err. The detail must hold
// nothing secret: it is sent as is.
func withDetail(err error, format string, args ...any) error {
	return &detailError{err: err, detail: fmt.Sprintf(format, args...)}
}

// problemFor maps err to the problem it is answered with. This is the one
// place that decides error statuses. internal is true for errors the
// client can do nothing about: the caller logs err, and their problem
// carries a generic detail (or, for a store that rejects writes, says so).
func problemFor(err error) (p Problem, internal bool) {
	var (
		ve *scheduler.ValidationError
		de *detailError
		fe *scheduler.FeedGapError
	)
	switch {
	case errors.As(err, &p):
		return p, false
	case errors.As(err, &ve):
		p = validationProblem(fromSchedulerFields(ve.Fields))
	case errors.As(err, &fe) && errors.Is(fe, scheduler.ErrFeedAhead):
		p = Problem{Type: ProblemTypeFeedAhead, Title: "Cursor ahead of the feed", Status: http.StatusConflict, Detail: fe.Error()}
	case errors.As(err, &fe):
		p = Problem{Type: ProblemTypeFeedPruned, Title: "Changes pruned", Status: http.StatusGone, Detail: fe.Error()}
	case errors.Is(err, scheduler.ErrUnknownScope):
		p = Problem{
			Type: ProblemTypeUnknownScope, Title: "Unknown scope", Status: http.StatusUnprocessableEntity,
			Detail: "providerScope names no scope; create it first with PUT /v1/scopes/{providerScope}",
			Errors: []FieldError{{Field: "providerScope", Message: "names no scope; create it first with PUT /v1/scopes/{providerScope}"}},
		}
	case errors.Is(err, scheduler.ErrNotFound):
		p = newProblem(http.StatusNotFound, "not found")
	case errors.Is(err, scheduler.ErrConflict):
		p = Problem{
			Type: ProblemTypeConflict, Title: "Conflict", Status: http.StatusConflict,
			Detail: "an operation with this operationId exists with other content",
		}
	case errors.Is(err, scheduler.ErrIdentityInUse):
		p = Problem{
			Type: ProblemTypeIdentityInUse, Title: "Request identity in use", Status: http.StatusConflict,
			Detail: "another operation of this scope sends this requestIdentity as its idempotency key",
			Errors: []FieldError{{Field: "requestIdentity", Message: "is sent by another operation of the scope as its idempotency key; choose another"}},
		}
	case errors.Is(err, scheduler.ErrStoreUnavailable):
		// Logged by the caller (internal), but with a detail the client can
		// act on.
		return Problem{
			Type: ProblemTypeStoreUnavailable, Title: "Database does not accept writes", Status: http.StatusServiceUnavailable,
			Detail: "the database does not accept writes now (disk full, or its file is read-only); nothing was stored: retry later",
		}, true
	case errors.Is(err, scheduler.ErrInvalidTransition):
		p = Problem{
			Type: ProblemTypeInvalidTransition, Title: "Invalid transition", Status: http.StatusConflict,
			Detail: "the operation's state does not allow this action",
		}
	default:
		return newProblem(http.StatusInternalServerError, "internal error; the server log has the details"), true
	}
	if errors.As(err, &de) {
		p.Detail = de.detail
	}
	return p, false
}

// fail answers r with the problem for err, logging internal errors.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	p, internal := problemFor(err)
	if internal {
		s.log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
	}
	if p.Type == ProblemTypeStoreUnavailable {
		w.Header().Set("Retry-After", storeRetryAfter)
	}
	s.writeProblem(w, r, p)
}

// internalError answers r with a 500 problem and logs err.
func (s *Server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
	s.writeProblem(w, r, newProblem(http.StatusInternalServerError, "internal error; the server log has the details"))
}

// writeProblem writes p as application/problem+json, naming the request's
// path as its instance.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, p Problem) {
	p.Instance = r.URL.EscapedPath()
	s.write(w, r, p.Status, "application/problem+json", p)
}
