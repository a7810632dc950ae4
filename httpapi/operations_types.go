package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"strings"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// EnqueueRequest is the body of POST /v1/operations, and one item of a
// batch.
type EnqueueRequest struct {
	// OperationID is the client's name for the operation; resubmitting the
	// same ID with the same content is harmless.
	OperationID   string `json:"operationId"`
	ProviderScope string `json:"providerScope"`
	// Kind is "read" or "mutation"; empty for the method's default (GET,
	// HEAD and OPTIONS are reads).
	Kind    string  `json:"kind,omitempty"`
	Request Request `json:"request"`
	// RequestIdentity is the idempotency identity; empty for OperationID.
	RequestIdentity string `json:"requestIdentity,omitempty"`
	// NotBefore is the RFC 3339 time before which the operation is not
	// sent; empty for now.
	NotBefore string `json:"notBefore,omitempty"`
	// Retry bounds the operation's retries; nil for the server defaults.
	Retry *Retry `json:"retry,omitempty"`
}

// Request is an operation's HTTP request, relative to its scope's base URL.
// A body is either Body, any JSON value (sent as application/json unless
// Headers give a Content-Type), or BodyBase64, raw bytes sent with the
// Content-Type in Headers; a Content-Type without a body is ignored. In
// responses Body carries a JSON body and BodyBase64 any other, and the
// body's media type shows as the Content-Type header.
type Request struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	// Body is a JSON body.
	Body json.RawMessage `json:"body,omitempty"`
	// BodyBase64 is a non-JSON body in standard base64.
	BodyBase64 *string `json:"bodyBase64,omitempty"`
}

// Retry is an operation's retry budget: at most MaxAttempts attempts that
// ended in a transient failure or a resent uncertain outcome (rate-limited
// answers do not count), all within MaxElapsed, a Go duration string such
// as "24h". Zero values ask for the server defaults; the server clamps both
// to its maxima.
type Retry struct {
	MaxAttempts int    `json:"maxAttempts,omitempty"`
	MaxElapsed  string `json:"maxElapsed,omitempty"`
}

// BatchRequest is the body of POST /v1/operations/batch.
type BatchRequest struct {
	// Operations holds 1 to 1000 operations, enqueued in one transaction.
	Operations []EnqueueRequest `json:"operations"`
}

// BatchResponse is the body answering a batch enqueue, one result per
// operation, in order.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}

// BatchResult is the fate of one operation of a batch: Status is what a
// single enqueue would have answered (201 created, 200 existing, 409
// conflict, 422 unknown scope), with Operation on success and Problem
// otherwise.
type BatchResult struct {
	OperationID string     `json:"operationId"`
	Status      int        `json:"status"`
	Operation   *Operation `json:"operation,omitempty"`
	Problem     *Problem   `json:"problem,omitempty"`
}

// Operation is an operation as the API shows it. Times are RFC 3339 UTC;
// absent values are null.
type Operation struct {
	OperationID   string `json:"operationId"`
	ProviderScope string `json:"providerScope"`
	Provider      string `json:"provider"`
	Kind          string `json:"kind"`
	State         string `json:"state"`
	// Attempt counts every attempt started, across releases.
	Attempt int `json:"attempt"`
	// NextAttemptAt is set while the operation waits (scheduled,
	// waitingForBudget): the moment it may go, never before its scope
	// admits it.
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	// BlockedBy is "scopeHeld" while the operation waits behind a held
	// scope; null otherwise.
	BlockedBy       *string    `json:"blockedBy"`
	RequestIdentity string     `json:"requestIdentity"`
	HoldReason      *string    `json:"holdReason"`
	FailureReason   *string    `json:"failureReason"`
	LastOutcome     *Outcome   `json:"lastOutcome"`
	CreatedAt       *time.Time `json:"createdAt"`
	UpdatedAt       *time.Time `json:"updatedAt"`
	// Deadline ends the current retry budget.
	Deadline *time.Time `json:"deadline"`
	// MaybeApplied is true once an attempt of this mutation may have
	// applied it without a definite answer: it never ends failed by itself
	// (held with unknownOutcome instead).
	MaybeApplied bool `json:"maybeApplied"`
	// ReleasedFrom is, while a person's release has not been sent, what it
	// was released from: the release can be changed or undone.
	ReleasedFrom *ReleasedFrom `json:"releasedFrom,omitempty"`
	Retry        Retry         `json:"retry"`
	Request      Request       `json:"request"`
	// Result is the provider's answer, present once it succeeded.
	Result *Result `json:"result,omitempty"`
}

// ReleasedFrom is the state and reason a pending release came from.
type ReleasedFrom struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// Outcome is what the latest attempt's response meant.
type Outcome struct {
	// Class is success, rateLimited, transient, permanent, authRevoked or
	// unknownOutcome.
	Class string `json:"class"`
	// Status is the HTTP status; null for transport errors.
	Status *int       `json:"status"`
	At     *time.Time `json:"at"`
	Hint   *Hint      `json:"hint"`
	Reason *string    `json:"reason"`
	Detail *string    `json:"detail"`
	// Response is the provider's whole answer (status, headers, body;
	// redacted, bounded like a result) when the attempt did not succeed.
	// Only a single operation's read carries it, not listings.
	Response *Result `json:"response,omitempty"`
}

// Hint is a provider's timing hint: where it came from, its raw value, the
// time it named (null when unusable) and a note on why it was adjusted.
type Hint struct {
	Source string     `json:"source"`
	Raw    string     `json:"raw"`
	At     *time.Time `json:"at"`
	Note   string     `json:"note,omitempty"`
}

// Result is one answer of the provider (a success's result, or the last
// answer of one that did not succeed), redacted and bounded in size. Body
// carries a body that parses as JSON, BodyBase64 any other.
type Result struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       json.RawMessage   `json:"body,omitempty"`
	BodyBase64 *string           `json:"bodyBase64,omitempty"`
	// Truncated is true when the body was cut to the server's bound.
	Truncated bool `json:"truncated"`
}

// OperationList is one page of GET /v1/operations, newest first. Next is
// the cursor of the following page (pass it as ?cursor=), null on the last.
type OperationList struct {
	Operations []Operation `json:"operations"`
	Next       *string     `json:"next"`
}

// Attempt is one send of an operation. Fields the provider has not
// answered yet are null.
type Attempt struct {
	Number     int        `json:"number"`
	LeaseToken int64      `json:"leaseToken"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	DurationMs *int64     `json:"durationMs"`
	Class      *string    `json:"class"`
	Status     *int       `json:"status"`
	Hint       *Hint      `json:"hint"`
	Reason     *string    `json:"reason"`
	Detail     *string    `json:"detail"`
	// Response is the provider's answer when the attempt did not succeed,
	// its body bounded to 8 KiB (scheduler.AttemptAnswerLimit).
	Response *Result   `json:"response,omitempty"`
	Decision *Decision `json:"decision"`
	// Stale is true when the result came after the lease was lost and was
	// discarded.
	Stale bool `json:"stale"`
}

// Decision is what pacer decided after an attempt: the next state, its
// time (when the operation is next due, for scheduled and
// waitingForBudget) and why.
type Decision struct {
	State  string     `json:"state"`
	At     *time.Time `json:"at"`
	Reason string     `json:"reason"`
}

// AttemptList is the body of GET /v1/operations/{operationId}/attempts,
// oldest attempt first.
type AttemptList struct {
	Attempts []Attempt `json:"attempts"`
}

// AuditEntry is one manual action: what, by whom, when and why.
type AuditEntry struct {
	ID            int64      `json:"id"`
	OperationID   string     `json:"operationId,omitempty"`
	ProviderScope string     `json:"providerScope"`
	Action        string     `json:"action"`
	Actor         string     `json:"actor"`
	Reason        string     `json:"reason"`
	At            *time.Time `json:"at"`
	Detail        string     `json:"detail,omitempty"`
}

// AuditList is the body of GET /v1/operations/{operationId}/audit, oldest
// entry first.
type AuditList struct {
	Audit []AuditEntry `json:"audit"`
}

// ReleaseRequest is the body of POST /v1/operations/{operationId}/release.
type ReleaseRequest struct {
	// At is the RFC 3339 time to run again; empty (or past) for now.
	At string `json:"at,omitempty"`
	// Reason says why, for the audit trail. Required.
	Reason string `json:"reason"`
}

// ResolveRequest is the body of POST /v1/operations/{operationId}/resolve.
type ResolveRequest struct {
	// Outcome is "succeeded" or "failed": what a person found at the
	// provider.
	Outcome string `json:"outcome"`
	// Reason says why, for the audit trail. Required.
	Reason string `json:"reason"`
}

// CancelRequest is the body of POST /v1/operations/{operationId}/cancel.
type CancelRequest struct {
	// Reason says why, for the audit trail. Required.
	Reason string `json:"reason"`
}

// BulkRequest is the body of POST /v1/operations/bulk: release or cancel
// every operation matching the filter (design §14).
type BulkRequest struct {
	// Action is "release" (now) or "cancel".
	Action string     `json:"action"`
	Filter BulkFilter `json:"filter"`
	// Reason says why, for the audit trail of each. Required.
	Reason string `json:"reason"`
}

// BulkFilter selects the operations of a bulk action; at least one field.
type BulkFilter struct {
	State         string `json:"state,omitempty"`
	ProviderScope string `json:"providerScope,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// BulkResponse says what a bulk action did.
type BulkResponse struct {
	// Changed counts the operations released or canceled; Skipped those
	// that matched but whose state did not allow it.
	Changed int `json:"changed"`
	Skipped int `json:"skipped"`
	// More is true when the call stopped at its bound: call again.
	More bool `json:"more"`
}

// UnreleaseRequest is the body of POST /v1/operations/{operationId}/unrelease.
type UnreleaseRequest struct {
	// Reason says why, for the audit trail. Required.
	Reason string `json:"reason"`
}

// input converts an enqueue body. What does not parse (a time, a duration,
// base64, a media type) goes into the input's Invalid fields, which the
// scheduler reports together with everything else it validates.
func (e EnqueueRequest) input() scheduler.OperationInput {
	in := scheduler.OperationInput{
		ID: e.OperationID, Scope: e.ProviderScope, Kind: scheduler.Kind(e.Kind),
		Method: e.Request.Method, Path: e.Request.Path, Headers: e.Request.Headers,
		RequestIdentity: e.RequestIdentity,
	}
	add := func(field, msg string) {
		in.Invalid = append(in.Invalid, scheduler.FieldError{Field: field, Message: msg})
	}

	var contentType, ctKey string
	for k, v := range e.Request.Headers {
		if strings.EqualFold(k, "Content-Type") {
			if ctKey != "" {
				add("request.headers", "names Content-Type more than once")
			}
			ctKey, contentType = k, v
		}
	}
	if ctKey != "" {
		if _, _, err := mime.ParseMediaType(contentType); err != nil {
			add("request.headers."+ctKey, "must be a media type such as application/json")
		}
	}

	body := e.Request.Body
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		body = nil
	}
	switch {
	case len(body) > 0 && e.Request.BodyBase64 != nil:
		add("request.body", "give either body (a JSON value) or bodyBase64 (other media types), not both")
	case len(body) > 0:
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			add("request.body", "must be a JSON value") // unreachable: the decoder checked it
		}
		in.Body = buf.Bytes()
		in.ContentType = contentType
		if in.ContentType == "" {
			in.ContentType = "application/json"
		}
	case e.Request.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*e.Request.BodyBase64)
		if err != nil {
			add("request.bodyBase64", "must be standard base64 (RFC 4648 §4, with padding)")
		}
		if len(b) > 0 {
			in.Body, in.ContentType = b, contentType
		}
	}

	if e.NotBefore != "" {
		t, err := time.Parse(time.RFC3339Nano, e.NotBefore)
		if err != nil {
			add("notBefore", "must be an RFC 3339 time such as 2026-09-11T02:00:00Z")
		} else {
			in.NotBefore = &t
		}
	}
	if r := e.Retry; r != nil {
		in.MaxAttempts = r.MaxAttempts
		if r.MaxElapsed != "" {
			d, ok := parseDuration(r.MaxElapsed)
			if !ok {
				add("retry.maxElapsed", `must be a duration such as "24h" or "90m"`)
			}
			in.MaxElapsed = d
		}
	}
	return in
}

// newOperation converts a domain operation for a response.
func newOperation(op scheduler.Operation) Operation {
	out := Operation{
		OperationID:     op.ID,
		ProviderScope:   op.Scope,
		Provider:        op.Provider,
		Kind:            string(op.Kind),
		State:           string(op.State),
		Attempt:         op.Attempt,
		RequestIdentity: op.RequestIdentity,
		BlockedBy:       optString(string(op.BlockedBy)),
		HoldReason:      optString(string(op.HoldReason)),
		FailureReason:   optString(string(op.FailureReason)),
		CreatedAt:       optTime(op.CreatedAt),
		UpdatedAt:       optTime(op.UpdatedAt),
		Deadline:        optTime(op.Deadline),
		MaybeApplied:    op.MaybeApplied,
		Retry:           Retry{MaxAttempts: op.Retry.MaxAttempts, MaxElapsed: formatDuration(op.Retry.MaxElapsed)},
		Request:         newRequest(op.Request),
	}
	if op.State.Due() {
		out.NextAttemptAt = optTime(op.NextAttemptAt)
	}
	if rf := op.ReleasedFrom; rf != nil && op.CanUnrelease() {
		out.ReleasedFrom = &ReleasedFrom{State: string(rf.State), Reason: rf.Reason()}
	}
	if lo := op.LastOutcome; lo != nil {
		out.LastOutcome = &Outcome{
			Class: string(lo.Class), Status: optInt(lo.Status), At: optTime(lo.At),
			Hint: newHint(lo.Hint), Reason: optString(lo.Reason), Detail: optString(lo.Detail),
			Response: newResult(lo.Response),
		}
	}
	out.Result = newResult(op.Result)
	return out
}

// newResult converts a provider's answer for a response; nil for none.
func newResult(res *scheduler.Result) *Result {
	if res == nil {
		return nil
	}
	out := &Result{Status: res.Status, Headers: copyHeaders(res.Headers), Truncated: res.Truncated}
	if len(res.Body) > 0 {
		if json.Valid(res.Body) {
			out.Body = json.RawMessage(res.Body)
		} else {
			s := base64.StdEncoding.EncodeToString(res.Body)
			out.BodyBase64 = &s
		}
	}
	return out
}

// newRequest converts an operation's request for a response. Its content
// type shows as a Content-Type header, as the client wrote it.
func newRequest(req scheduler.Request) Request {
	out := Request{Method: req.Method, Path: req.Path, Headers: copyHeaders(req.Headers)}
	if req.ContentType != "" {
		out.Headers["Content-Type"] = req.ContentType
	}
	if len(req.Body) > 0 {
		if isJSONMediaType(req.ContentType) && json.Valid(req.Body) {
			out.Body = json.RawMessage(req.Body)
		} else {
			s := base64.StdEncoding.EncodeToString(req.Body)
			out.BodyBase64 = &s
		}
	}
	return out
}

// newAttempt converts an attempt for a response.
func newAttempt(a scheduler.Attempt) Attempt {
	out := Attempt{
		Number: a.Number, LeaseToken: a.LeaseToken,
		StartedAt: optTime(a.StartedAt), FinishedAt: optTime(a.FinishedAt),
		Class: optString(string(a.Class)), Status: optInt(a.Status), Hint: newHint(a.Hint),
		Reason: optString(a.Reason), Detail: optString(a.Detail), Response: newResult(a.Response), Stale: a.Stale,
	}
	if !a.FinishedAt.IsZero() {
		ms := a.Duration().Milliseconds()
		out.DurationMs = &ms
	}
	if a.DecidedState != "" {
		out.Decision = &Decision{State: string(a.DecidedState), At: optTime(a.DecidedAt), Reason: a.Decision}
	}
	return out
}

// newAuditEntry converts an audit entry for a response.
func newAuditEntry(e scheduler.AuditEntry) AuditEntry {
	return AuditEntry{
		ID: e.ID, OperationID: e.OperationID, ProviderScope: e.Scope, Action: e.Action,
		Actor: e.Actor, Reason: e.Reason, At: optTime(e.At), Detail: e.Detail,
	}
}

// newHint converts a timing hint; nil (or one without a source or value)
// shows as null.
func newHint(h *providers.Hint) *Hint {
	if h == nil || (h.Source == "" && h.Raw == "" && h.At.IsZero()) {
		return nil
	}
	return &Hint{Source: h.Source, Raw: h.Raw, At: optTime(h.At), Note: h.Note}
}

// optInt returns &n, or nil when n is 0 (shown as null).
func optInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// copyHeaders returns a copy of h, never nil (shown as {}).
func copyHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h)+1)
	for k, v := range h {
		out[k] = v
	}
	return out
}

// isJSONMediaType reports whether ct is application/json or a +json type.
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
