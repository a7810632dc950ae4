package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"pacer/scheduler"
)

// handleEnqueue answers POST /v1/operations: 201 with the new operation,
// 200 with the existing one when the same content was enqueued before, 409
// when other content was, 422 for invalid fields or an unknown scope.
// Nothing is stored unless the answer is 201.
func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) {
	var body EnqueueRequest
	if err := decodeJSON(w, r, s.maxBody, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.svc.Enqueue(r.Context(), []scheduler.OperationInput{body.input()}, func(int) string { return "" })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(res) != 1 {
		s.internalError(w, r, fmt.Errorf("enqueue: %d results for 1 operation", len(res)))
		return
	}
	item := s.enqueueResult(r, body.OperationID, res[0])
	if item.Problem != nil {
		s.writeProblem(w, r, *item.Problem)
		return
	}
	if item.Status == http.StatusCreated {
		w.Header().Set("Location", operationPath(item.OperationID))
	}
	s.writeJSON(w, r, item.Status, item.Operation)
}

// handleEnqueueBatch answers POST /v1/operations/batch: 200 with a result
// per operation, all enqueued in one transaction. An invalid field in any
// operation rejects the whole batch with 422 and stores nothing.
func (s *Server) handleEnqueueBatch(w http.ResponseWriter, r *http.Request) {
	body, err := s.decodeBatch(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ins := make([]scheduler.OperationInput, len(body.Operations))
	for i, op := range body.Operations {
		ins[i] = op.input()
	}
	res, err := s.svc.Enqueue(r.Context(), ins, func(i int) string { return fmt.Sprintf("operations[%d].", i) })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(res) != len(ins) {
		s.internalError(w, r, fmt.Errorf("enqueue: %d results for %d operations", len(res), len(ins)))
		return
	}
	out := BatchResponse{Results: make([]BatchResult, len(res))}
	for i, item := range res {
		out.Results[i] = s.enqueueResult(r, body.Operations[i].OperationID, item)
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// decodeBatch reads a batch enqueue body (at most maxBatch bytes), each
// operation under the bound of a single enqueue (maxBody): a larger one is
// a 413 naming it, as POST /v1/operations would answer for it alone.
func (s *Server) decodeBatch(w http.ResponseWriter, r *http.Request) (BatchRequest, error) {
	var raw struct {
		Operations []json.RawMessage `json:"operations"`
	}
	if err := decodeJSON(w, r, s.maxBatch, &raw, false); err != nil {
		return BatchRequest{}, err
	}
	var tooLarge []FieldError
	for i, item := range raw.Operations {
		if int64(len(item)) > s.maxBody {
			tooLarge = append(tooLarge, FieldError{
				Field:   fmt.Sprintf("operations[%d]", i),
				Message: fmt.Sprintf("is %d bytes: one operation may be at most %d bytes, in a batch as in POST /v1/operations", len(item), s.maxBody),
			})
		}
	}
	if len(tooLarge) > 0 {
		p := newProblem(http.StatusRequestEntityTooLarge, validationProblem(tooLarge).Detail)
		p.Errors = tooLarge
		return BatchRequest{}, p
	}
	body := BatchRequest{Operations: make([]EnqueueRequest, len(raw.Operations))}
	for i, item := range raw.Operations {
		dec := json.NewDecoder(bytes.NewReader(item))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body.Operations[i]); err != nil {
			p := decodeProblem(err, s.maxBody)
			p.Detail = fmt.Sprintf("operations[%d]: %s", i, p.Detail)
			return BatchRequest{}, p
		}
	}
	return body, nil
}

// enqueueResult converts the fate of one enqueued operation to the status
// and body a single enqueue answers with.
func (s *Server) enqueueResult(r *http.Request, id string, res scheduler.EnqueueResult) BatchResult {
	out := BatchResult{OperationID: id}
	if res.Err != nil {
		err := res.Err
		switch {
		case errors.Is(err, scheduler.ErrConflict):
			err = withDetail(err, "operation %q exists with other content: resubmit the same content, or choose a new operationId", id)
		case errors.Is(err, scheduler.ErrIdentityInUse):
			_, what, _ := strings.Cut(err.Error(), scheduler.ErrIdentityInUse.Error()+": ")
			err = withDetail(err, "operation %q is refused: %s, and the provider still remembers that key, so it would answer %q with the other operation's stored result; give it another requestIdentity", id, what, id)
		}
		p, internal := problemFor(err)
		if internal {
			s.log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.EscapedPath(), "operationId", id, "err", err)
		}
		out.Status, out.Problem = p.Status, &p
		return out
	}
	op := newOperation(res.Operation)
	out.OperationID, out.Operation = op.OperationID, &op
	out.Status = http.StatusOK
	if res.Created {
		out.Status = http.StatusCreated
	}
	return out
}

// handleListOperations answers GET /v1/operations?state=&providerScope=&reason=
// &createdAfter=&createdBefore=&updatedAfter=&updatedBefore=&limit=&cursor=
// with one page, newest first. The time bounds are RFC 3339: "After" is
// inclusive, "Before" exclusive. A cursor continues the listing with the
// same filters.
func (s *Server) handleListOperations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := scheduler.OperationFilter{
		State:  scheduler.State(q.Get("state")),
		Scope:  q.Get("providerScope"),
		Reason: q.Get("reason"),
		Cursor: q.Get("cursor"),
	}
	var errs []FieldError
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, FieldError{Field: "limit", Message: "must be a whole number between 1 and 1000"})
		}
		f.Limit = n
	}
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{
		{"createdAfter", &f.CreatedAfter}, {"createdBefore", &f.CreatedBefore},
		{"updatedAfter", &f.UpdatedAfter}, {"updatedBefore", &f.UpdatedBefore},
	} {
		if v := q.Get(b.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				errs = append(errs, FieldError{Field: b.name, Message: "must be an RFC 3339 time such as 2026-09-11T02:00:00Z"})
			}
			*b.dst = t
		}
	}
	if len(errs) > 0 {
		s.writeProblem(w, r, validationProblem(errs))
		return
	}
	page, err := s.svc.ListOperations(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, OperationList{Operations: convert(page.Operations, newOperation), Next: optString(page.Next)})
}

// handleGetOperation answers GET /v1/operations/{operationId}.
func (s *Server) handleGetOperation(w http.ResponseWriter, r *http.Request) {
	serveNamed(s, w, r, s.operationParam, func(id string) (scheduler.Operation, error) {
		return s.svc.GetOperation(r.Context(), id)
	}, operationNotFound, showOperation)
}

// handleListAttempts answers GET /v1/operations/{operationId}/attempts,
// oldest attempt first.
func (s *Server) handleListAttempts(w http.ResponseWriter, r *http.Request) {
	serveNamed(s, w, r, s.operationParam, func(id string) ([]scheduler.Attempt, error) {
		return s.svc.ListAttempts(r.Context(), id)
	}, operationNotFound, func(attempts []scheduler.Attempt) any {
		return AttemptList{Attempts: convert(attempts, newAttempt)}
	})
}

// handleListAudit answers GET /v1/operations/{operationId}/audit: the
// manual actions on the operation, oldest first.
func (s *Server) handleListAudit(w http.ResponseWriter, r *http.Request) {
	serveNamed(s, w, r, s.operationParam, func(id string) ([]scheduler.AuditEntry, error) {
		entries, err := s.svc.ListAudit(r.Context(), id)
		if err == nil && len(entries) == 0 {
			// An empty trail and an unknown operation look alike; tell them apart.
			_, err = s.svc.GetOperation(r.Context(), id)
		}
		return entries, err
	}, operationNotFound, func(entries []scheduler.AuditEntry) any {
		return AuditList{Audit: convert(entries, newAuditEntry)}
	})
}

// handleRelease answers POST /v1/operations/{operationId}/release: a held
// or failed operation runs again at "at" (now when absent or past) with a
// fresh retry budget.
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	operationAction(s, w, r, func(id string, body ReleaseRequest) (scheduler.Operation, error) {
		var at *time.Time
		if body.At != "" {
			t, err := time.Parse(time.RFC3339Nano, body.At)
			if err != nil {
				return scheduler.Operation{}, validationProblem([]FieldError{{Field: "at", Message: "must be an RFC 3339 time such as 2026-09-11T02:00:00Z"}})
			}
			at = &t
		}
		return s.svc.Release(r.Context(), id, at, body.Reason, actorFrom(r.Context()))
	})
}

// handleResolve answers POST /v1/operations/{operationId}/resolve: a person
// says what happened to a mutation held for unknownOutcome.
func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request) {
	operationAction(s, w, r, func(id string, body ResolveRequest) (scheduler.Operation, error) {
		return s.svc.Resolve(r.Context(), id, scheduler.Resolution(body.Outcome), body.Reason, actorFrom(r.Context()))
	})
}

// handleCancel answers POST /v1/operations/{operationId}/cancel.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	operationAction(s, w, r, func(id string, body CancelRequest) (scheduler.Operation, error) {
		return s.svc.Cancel(r.Context(), id, body.Reason, actorFrom(r.Context()))
	})
}

// handleUnrelease answers POST /v1/operations/{operationId}/unrelease: a
// release not sent yet is undone (design §14).
func (s *Server) handleUnrelease(w http.ResponseWriter, r *http.Request) {
	operationAction(s, w, r, func(id string, body UnreleaseRequest) (scheduler.Operation, error) {
		return s.svc.Unrelease(r.Context(), id, body.Reason, actorFrom(r.Context()))
	})
}

// operationParam returns the operation ID named in the path, or answers
// 404.
func (s *Server) operationParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, ok := pathParam(r, "operationId")
	if !ok {
		s.writeProblem(w, r, newProblem(http.StatusNotFound, "the operation ID in the path is not validly escaped"))
	}
	return id, ok
}

// actionError gives a manual action's error a detail that names the
// operation and, for a refused transition, what the TransitionError says
// (the rule and the state it was refused in).
func actionError(err error, id string) error {
	var te *scheduler.TransitionError
	if errors.As(err, &te) {
		return withDetail(err, "operation %q: %s", id, te)
	}
	return operationNotFound(err, id)
}

// operationNotFound names the operation in a not-found error's detail.
func operationNotFound(err error, id string) error {
	if errors.Is(err, scheduler.ErrNotFound) {
		return withDetail(err, "no operation %q", id)
	}
	return err
}

// operationPath is the escaped path of an operation's resource.
func operationPath(id string) string { return "/v1/operations/" + url.PathEscape(id) }

// handleBulk answers POST /v1/operations/bulk: every operation matching a
// filter is released now or canceled, in bounded transactions, each
// audited (design §14).
func (s *Server) handleBulk(w http.ResponseWriter, r *http.Request) {
	var body BulkRequest
	if err := decodeJSON(w, r, s.maxBody, &body, true); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.svc.Bulk(r.Context(), scheduler.BulkInput{
		Action: scheduler.ManualAction(body.Action), Reason: body.Reason,
		Filter: scheduler.OperationFilter{State: scheduler.State(body.Filter.State), Scope: body.Filter.ProviderScope, Reason: body.Filter.Reason},
	}, actorFrom(r.Context()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, BulkResponse{Changed: res.Changed, Skipped: res.Skipped, More: res.More})
}
