package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// uiForm is the state of one action form: what was typed (never secrets)
// and what was wrong with it.
type uiForm struct {
	Error   string
	Reason  string
	When    string // release: "now" or "at"
	At      string // release: the datetime-local value, UTC
	Outcome string // resolve: "applied" or "notApplied"
	Confirm bool   // release held: the uncertain ones were checked
}

// operationView is the page of one operation.
type operationView struct {
	uiPage
	Op      scheduler.Operation
	Headers []uiHeader
	// Body is the request body as sent (design §14: what was sent).
	Body  bodyView
	Words string
	// Answer is the provider's last answer to an operation that did not
	// succeed; nil for none.
	Answer   *answerView
	Attempts []attemptView
	Audit    []scheduler.AuditEntry
	// Scope is the operation's scope; ScopeNote warns when it is held or
	// paused (a released operation waits for it).
	Scope     scheduler.Scope
	ScopeNote string
	// What the operation's state allows.
	CanRelease, CanCancel, CanResolve, CanUnrelease bool
	Release, Resolve, Cancel, Unrelease             uiForm
	// MinAt and MaxAt bound the times the release form offers (now and
	// the policy's horizon, UTC).
	MinAt, MaxAt string
}

// attemptView is one attempt of the timeline.
type attemptView struct {
	scheduler.Attempt
	ClassWords string
	StatusText string
	// Timing is the attempt's timing hint and how it was validated.
	Timing *hintView
	// Answer is what the attempt kept of an answer that did not succeed.
	Answer *answerView
}

// hintView is a timing hint with how it was validated.
type hintView struct {
	providers.Hint
	// Verdict is "valid", "adjusted" or "not usable"; Tone is its style:
	// "ok", "adjusted" or "bad".
	Verdict, Tone string
}

// newHintView explains a hint; nil when the answer carried none.
func newHintView(h *providers.Hint) *hintView {
	if h == nil || (h.Source == "" && h.Raw == "") {
		return nil
	}
	v := &hintView{Hint: *h, Verdict: "valid", Tone: "ok"}
	switch {
	case !h.Usable():
		v.Verdict, v.Tone = "not usable", "bad"
	case h.Note != "":
		v.Verdict, v.Tone = "adjusted", "adjusted"
	}
	return v
}

// uiOperationView reads everything the operation page shows.
func (s *Server) uiOperationView(w http.ResponseWriter, r *http.Request, id string) (*operationView, error) {
	ctx := r.Context()
	op, err := s.svc.GetOperation(ctx, id)
	if err != nil {
		return nil, err
	}
	attempts, err := s.svc.ListAttempts(ctx, id)
	if err != nil {
		return nil, err
	}
	audit, err := s.svc.ListAudit(ctx, id)
	if err != nil {
		return nil, err
	}
	sc, err := s.svc.GetScope(ctx, op.Scope)
	if err != nil && !errors.Is(err, scheduler.ErrNotFound) {
		return nil, err
	}
	v := &operationView{
		uiPage: s.uiBase(w, r, "Operation "+op.ID).live(),
		Op:     op, Headers: displayHeaders(op.Request.Headers, shownHeader),
		Body: newBodyView(op.Request.Body, op.Request.ContentType, false, requestTextLimit), Words: stateWords(op), Audit: audit, Scope: sc,
		CanRelease: op.CanRelease(), CanCancel: op.CanCancel(), CanResolve: op.CanResolve(), CanUnrelease: op.CanUnrelease(),
		Release: uiForm{When: "now"}, Resolve: uiForm{Outcome: ""},
	}
	if op.LastOutcome != nil {
		v.Answer = newAnswerView(op.LastOutcome.Response)
	}
	v.MinAt = v.Now.Format("2006-01-02T15:04")
	v.MaxAt = s.svc.Latest().Format("2006-01-02T15:04")
	switch sc.Status(v.Now) {
	case scheduler.ScopeHeld:
		v.ScopeNote = "Its scope is held (" + reasonLabel(string(sc.HoldReason)) + "): nothing of the scope is sent until the scope is resumed or its credentials are replaced."
	case scheduler.ScopePaused:
		until, why := sc.Pause(v.Now)
		v.ScopeNote = fmt.Sprintf("Its scope is paused until %s UTC (%s): a released operation waits for that.", until.Format("2006-01-02 15:04:05"), why)
	}
	for i := len(attempts) - 1; i >= 0; i-- { // newest first
		a := attempts[i]
		a.Detail = redactDetail(a.Detail)
		v.Attempts = append(v.Attempts, attemptView{Attempt: a, ClassWords: classWords(a.Class), StatusText: statusText(a.Status), Timing: newHintView(a.Hint), Answer: newAnswerView(a.Response)})
	}
	return v, nil
}

// handleUIOperation answers GET /ui/operations/{operationId}.
func (s *Server) handleUIOperation(w http.ResponseWriter, r *http.Request) {
	id, ok := s.uiOperationParam(w, r)
	if !ok {
		return
	}
	v, err := s.uiOperationView(w, r, id)
	if err != nil {
		s.uiFail(w, r, err, "operation "+id)
		return
	}
	s.uiRender(w, r, http.StatusOK, "operation", v)
}

// handleUIRelease answers POST /ui/operations/{operationId}/release: the
// held or failed operation runs again now or at the time given (UTC), with
// the same request identity and a fresh retry budget.
func (s *Server) handleUIRelease(w http.ResponseWriter, r *http.Request) {
	id, ok := s.uiOperationParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	form := uiForm{Reason: r.PostForm.Get("reason"), When: r.PostForm.Get("when"), At: strings.TrimSpace(r.PostForm.Get("at"))}
	var at *time.Time
	if form.When == "at" {
		t, problem := parseUTCInput(form.At)
		if problem != "" {
			form.Error = problem
			s.uiOperationFormError(w, r, id, http.StatusUnprocessableEntity, problem, func(v *operationView) { v.Release = form })
			return
		}
		at = &t
	}
	op, err := s.svc.Release(r.Context(), id, at, form.Reason, actorFrom(r.Context()))
	if err != nil {
		s.uiOperationActionError(w, r, id, err, func(v *operationView, msg string) { form.Error = msg; v.Release = form })
		return
	}
	msg := "Released: it will be sent again now, with the same request identity."
	if at != nil {
		msg = "Released: it will be sent again at " + op.NextAttemptAt.UTC().Format("2006-01-02 15:04:05") + " UTC, with the same request identity."
	}
	s.uiRedirect(w, r, operationUIPath(id), flashOK, msg)
}

// handleUIResolve answers POST /ui/operations/{operationId}/resolve for an
// operation held with an unknown outcome: "applied" marks it succeeded;
// the three resolutions of design §14 (scheduler.Resolution), in the words
// the API and CLI use.
func (s *Server) handleUIResolve(w http.ResponseWriter, r *http.Request) {
	id, ok := s.uiOperationParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	form := uiForm{Reason: r.PostForm.Get("reason"), Outcome: r.PostForm.Get("outcome")}
	setForm := func(v *operationView, msg string) { form.Error = msg; v.Resolve = form }
	ctx, actor := r.Context(), actorFrom(r.Context())
	res := scheduler.Resolution(form.Outcome)
	if res.Words() == "" {
		form.Error = "Choose what the provider did: applied it, did not (send it again), or did not (do not send it)."
		s.uiOperationFormError(w, r, id, http.StatusUnprocessableEntity, form.Error, func(v *operationView) { v.Resolve = form })
		return
	}
	if _, err := s.svc.Resolve(ctx, id, res, form.Reason, actor); err != nil {
		s.uiOperationActionError(w, r, id, err, setForm)
		return
	}
	msg := map[scheduler.Resolution]string{
		scheduler.ResolvedApplied:    "Resolved as applied: the operation is marked succeeded and will not be sent again.",
		scheduler.ResolvedResend:     "Resolved as not applied: it will be sent again now with the same request identity.",
		scheduler.ResolvedNotApplied: "Resolved as not applied: it is marked failed (resolvedFailed) and will not be sent.",
	}[res]
	s.uiRedirect(w, r, operationUIPath(id), flashOK, msg)
}

// handleUICancel answers POST /ui/operations/{operationId}/cancel.
func (s *Server) handleUICancel(w http.ResponseWriter, r *http.Request) {
	id, ok := s.uiOperationParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	form := uiForm{Reason: r.PostForm.Get("reason")}
	if _, err := s.svc.Cancel(r.Context(), id, form.Reason, actorFrom(r.Context())); err != nil {
		s.uiOperationActionError(w, r, id, err, func(v *operationView, msg string) { form.Error = msg; v.Cancel = form })
		return
	}
	s.uiRedirect(w, r, operationUIPath(id), flashOK, "Canceled: it will not be sent.")
}

// handleUIUnrelease answers POST /ui/operations/{operationId}/unrelease:
// a release not sent yet is undone (design §14).
func (s *Server) handleUIUnrelease(w http.ResponseWriter, r *http.Request) {
	id, ok := s.uiOperationParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	form := uiForm{Reason: r.PostForm.Get("reason")}
	op, err := s.svc.Unrelease(r.Context(), id, form.Reason, actorFrom(r.Context()))
	if err != nil {
		s.uiOperationActionError(w, r, id, err, func(v *operationView, msg string) { form.Error = msg; v.Unrelease = form })
		return
	}
	s.uiRedirect(w, r, operationUIPath(id), flashOK, "Release undone: it is "+op.DescribeState()+" again and will not be sent.")
}

// uiOperationActionError answers a failed action on an operation: the
// operation page again, with the form's error (422 for invalid input, 409
// when the state no longer allows the action), or an error page.
func (s *Server) uiOperationActionError(w http.ResponseWriter, r *http.Request, id string, err error, set func(v *operationView, msg string)) {
	status, msg, ok := uiActionProblem(err)
	if !ok {
		s.uiFail(w, r, err, "operation "+id)
		return
	}
	s.uiOperationFormError(w, r, id, status, msg, func(v *operationView) { set(v, msg) })
}

// uiOperationFormError renders the operation page with status and msg,
// after set has put the form's error in place (the message also heads the
// page, in case the state no longer shows that form).
func (s *Server) uiOperationFormError(w http.ResponseWriter, r *http.Request, id string, status int, msg string, set func(v *operationView)) {
	v, err := s.uiOperationView(w, r, id)
	if err != nil {
		s.uiFail(w, r, err, "operation "+id)
		return
	}
	set(v)
	v.Error = "Nothing was changed. " + msg
	s.uiRender(w, r, status, "operation", v)
}

// uiActionProblem turns an action's error into a status and a message for
// its form; ok is false for errors the form cannot explain.
func uiActionProblem(err error) (status int, msg string, ok bool) {
	var (
		ve *scheduler.ValidationError
		te *scheduler.TransitionError
	)
	switch {
	case errors.As(err, &ve):
		parts := make([]string, len(ve.Fields))
		for i, f := range ve.Fields {
			// Fields as the forms name them: "token", not "credentials.token".
			field := strings.TrimPrefix(f.Field, "credentials.")
			if field == "at" {
				field = "the release time"
			}
			parts[i] = capitalize(field) + " " + f.Message + "."
		}
		return http.StatusUnprocessableEntity, strings.Join(parts, " "), true
	case errors.As(err, &te):
		return http.StatusConflict, "Not possible now: " + te.Error() + ".", true
	}
	return 0, "", false
}

// uiFail answers err with an error page: 404 for what is not found, 500
// otherwise.
func (s *Server) uiFail(w http.ResponseWriter, r *http.Request, err error, what string) {
	if errors.Is(err, scheduler.ErrNotFound) {
		s.uiRenderError(w, r, http.StatusNotFound, "Not found", "There is no "+what+".")
		return
	}
	s.uiInternalError(w, r, err)
}

// uiOperationParam returns the operation ID in the path, or answers 404.
func (s *Server) uiOperationParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, ok := pathParam(r, "operationId")
	if !ok || id == "" {
		s.uiNotFound(w, r)
		return "", false
	}
	return id, true
}

// parseUTCInput reads a datetime-local form value as a UTC time; whether
// it lies ahead is the service's rule. problem is non-empty, and says what
// to fix, when the value is not a time.
func parseUTCInput(v string) (t time.Time, problem string) {
	if v == "" {
		return time.Time{}, "Give the time to release it at (UTC), or choose now."
	}
	t, ok := parseUTCTime(v)
	if !ok {
		return time.Time{}, notAUTCTime(v)
	}
	return t, ""
}

// parseUTCTime reads a time typed into a page's datetime-local field (or
// pasted as RFC 3339), in UTC.
func parseUTCTime(v string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// notAUTCTime says that v is not a time parseUTCTime reads.
func notAUTCTime(v string) string {
	return fmt.Sprintf("%q is not a time such as 2026-09-11T14:30 (UTC).", v)
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
