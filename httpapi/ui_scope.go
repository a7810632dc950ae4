package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"pacer/scheduler"
)

// scopeListSize is how many operations of each kind the scope page lists.
const scopeListSize = 10

// opList is a short list of operations with its total count and a link
// to the full list.
type opList struct {
	Count   int
	Ops     []scheduler.Operation
	MoreURL string
	// Now is the page's time, for the list's relative times.
	Now time.Time
	// HideScope leaves out the scope column (the page is the scope's).
	HideScope bool
}

// scopeView is the page of one scope. It never holds credential values:
// only their type.
type scopeView struct {
	uiPage
	Scope     scheduler.Scope
	Status    scheduler.ScopeStatus
	HoldWords string
	// PausedUntil and PauseWhy describe a pause in place; zero otherwise.
	PausedUntil time.Time
	PauseWhy    string
	// Resources are the budgets of the other resources the provider
	// named, each with its pause in place (zero when open).
	Resources []resourceView
	Held      opList
	Failed    opList
	Waiting   opList
	// UnknownHeld counts the held operations whose outcome is unknown.
	UnknownHeld int
	Audit       []scheduler.AuditEntry
	Resume      uiForm
	Pause       uiForm
	ReleaseHeld uiForm
	// MinAt and MaxAt bound the times the pause form offers (now and
	// the policy's horizon), as datetime-local values in UTC.
	MinAt, MaxAt string
	Credentials  credentialsForm
}

// resourceView is one named resource's budget on the scope page.
type resourceView struct {
	scheduler.ResourceBudget
	// PausedUntil and PauseWhy describe its pause in place; zero otherwise.
	PausedUntil time.Time
	PauseWhy    string
}

// credentialsForm is the credentials form: it keeps what was typed except
// the secret values, which are never sent back to the browser.
type credentialsForm struct {
	uiForm
	Type     string
	Name     string
	Username string
}

// uiScopeView reads everything the scope page shows.
func (s *Server) uiScopeView(w http.ResponseWriter, r *http.Request, name string) (*scopeView, error) {
	ctx := r.Context()
	sc, err := s.svc.GetScope(ctx, name)
	if err != nil {
		return nil, err
	}
	v := &scopeView{uiPage: s.uiBase(w, r, "Scope "+sc.Name).live(), Scope: sc}
	v.Status = sc.Status(v.Now)
	v.HoldWords = holdWordsScope(sc.HoldReason)
	v.PausedUntil, v.PauseWhy = sc.Pause(v.Now)
	v.MinAt = v.Now.Format("2006-01-02T15:04")
	v.MaxAt = s.svc.Latest().Format("2006-01-02T15:04")
	for _, rb := range sc.Resources {
		rv := resourceView{ResourceBudget: rb}
		rv.PausedUntil, rv.PauseWhy = rb.Pause(v.Now, sc.BudgetReserve)
		v.Resources = append(v.Resources, rv)
	}
	v.Credentials.Type = string(sc.Credentials.Type)
	if v.Credentials.Type == "" || sc.Credentials.Type.Renews() { // the form offers the fixed types; grants are put by the API or CLI
		v.Credentials.Type = string(scheduler.CredentialBearer)
	}
	for _, l := range []struct {
		list   *opList
		states []scheduler.State
		state  string
	}{
		{&v.Held, []scheduler.State{scheduler.StateHeld}, string(scheduler.StateHeld)},
		{&v.Failed, []scheduler.State{scheduler.StateFailed}, string(scheduler.StateFailed)},
		{&v.Waiting, []scheduler.State{scheduler.StateScheduled, scheduler.StateWaitingForBudget}, stateAny},
	} {
		f := scheduler.OperationFilter{Scope: sc.Name, States: l.states, Limit: scopeListSize}
		page, err := s.svc.ListOperations(ctx, f)
		if err != nil {
			return nil, err
		}
		if l.list.Count, err = s.svc.CountOperations(ctx, f); err != nil {
			return nil, err
		}
		l.list.Ops, l.list.Now, l.list.HideScope = page.Operations, v.Now, true
		l.list.MoreURL = attentionURL(sc.Name, l.state, "", "")
	}
	if v.Held.Count > 0 {
		if v.UnknownHeld, err = s.svc.CountOperations(ctx, scheduler.OperationFilter{Scope: sc.Name, State: scheduler.StateHeld, Reason: string(scheduler.HoldUnknownOutcome)}); err != nil {
			return nil, err
		}
	}
	if v.Audit, err = s.svc.ListScopeAudit(ctx, sc.Name); err != nil {
		return nil, err
	}
	return v, nil
}

// handleUIScope answers GET /ui/scopes/{providerScope}.
func (s *Server) handleUIScope(w http.ResponseWriter, r *http.Request) {
	name, ok := s.uiScopeParam(w, r)
	if !ok {
		return
	}
	v, err := s.uiScopeView(w, r, name)
	if err != nil {
		s.uiFail(w, r, err, "scope "+name)
		return
	}
	s.uiRender(w, r, http.StatusOK, "scope", v)
}

// handleUIResume answers POST /ui/scopes/{providerScope}/resume: it lifts
// every wait of the scope (hold, pause, learned budget, rate slot).
func (s *Server) handleUIResume(w http.ResponseWriter, r *http.Request) {
	name, ok := s.uiScopeParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	form := uiForm{Reason: r.PostForm.Get("reason")}
	if _, err := s.svc.ResumeScope(r.Context(), name, form.Reason, actorFrom(r.Context())); err != nil {
		s.uiScopeActionError(w, r, name, err, func(v *scopeView, msg string) { form.Error = msg; v.Resume = form })
		return
	}
	s.uiRedirect(w, r, scopeUIPath(name), flashOK, "Resumed at "+s.svc.Now().UTC().Format("15:04:05")+" UTC: its hold and pauses were lifted, and its operations go at their own next attempt times. "+
		"If the provider refuses or limits it again, it is held or paused again, and its audit trail below says so.")
}

// handleUIPause answers POST /ui/scopes/{providerScope}/pause: a person
// pauses the scope until a time, in UTC (design §14).
func (s *Server) handleUIPause(w http.ResponseWriter, r *http.Request) {
	name, ok := s.uiScopeParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	form := uiForm{Reason: r.PostForm.Get("reason"), At: strings.TrimSpace(r.PostForm.Get("until"))}
	in := scheduler.PauseInput{Reason: form.Reason}
	if form.At != "" {
		t, ok := parseUTCTime(form.At)
		if !ok {
			in.Invalid = append(in.Invalid, scheduler.FieldError{Field: "until", Message: notAUTCTime(form.At)})
		}
		in.Until = t
	}
	sc, err := s.svc.PauseScope(r.Context(), name, in, actorFrom(r.Context()))
	if err != nil {
		s.uiScopeActionError(w, r, name, err, func(v *scopeView, msg string) { form.Error = msg; v.Pause = form })
		return
	}
	until, _ := sc.Pause(s.svc.Now())
	s.uiRedirect(w, r, scopeUIPath(name), flashOK, "Paused: nothing of the scope is sent before "+until.UTC().Format("2006-01-02 15:04:05")+" UTC, unless it is resumed sooner.")
}

// handleUIReleaseHeld answers POST /ui/scopes/{providerScope}/release-held:
// every held operation of the scope runs again now, in one transaction.
// When some were held with an unknown outcome, the form must confirm that
// the provider was checked for them.
func (s *Server) handleUIReleaseHeld(w http.ResponseWriter, r *http.Request) {
	name, ok := s.uiScopeParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	ctx := r.Context()
	form := uiForm{Reason: r.PostForm.Get("reason"), Confirm: r.PostForm.Get("confirm") == "yes"}
	setForm := func(v *scopeView, msg string) { form.Error = msg; v.ReleaseHeld = form }
	if !form.Confirm {
		unknown, err := s.svc.CountOperations(ctx, scheduler.OperationFilter{Scope: name, State: scheduler.StateHeld, Reason: string(scheduler.HoldUnknownOutcome)})
		if err != nil {
			s.uiInternalError(w, r, err)
			return
		}
		if unknown > 0 {
			msg := fmt.Sprintf("%d of the held operations may already have been applied. Check them at the provider, then tick the box to send them again.", unknown)
			s.uiScopeFormError(w, r, name, http.StatusUnprocessableEntity, msg, func(v *scopeView) { setForm(v, msg) })
			return
		}
	}
	n, err := s.svc.ReleaseHeldInScope(ctx, name, form.Reason, actorFrom(ctx))
	if err != nil {
		s.uiScopeActionError(w, r, name, err, setForm)
		return
	}
	msg := fmt.Sprintf("Released %d held %s to be sent again now, each with its own request identity.", n, pluralWord(n, "operation", "operations"))
	if n == 0 {
		msg = "No operation of this scope was held; nothing changed."
	} else if sc, err := s.svc.GetScope(ctx, name); err == nil && sc.Status(s.svc.Now()) != scheduler.ScopeOpen {
		msg += " The scope itself is " + string(sc.Status(s.svc.Now())) + ": they wait until it is open."
	}
	s.uiRedirect(w, r, scopeUIPath(name), flashOK, msg)
}

// handleUICredentials answers POST /ui/scopes/{providerScope}/credentials:
// it replaces the scope's credentials (write-only: the page never shows
// them) and nothing else of its configuration.
func (s *Server) handleUICredentials(w http.ResponseWriter, r *http.Request) {
	name, ok := s.uiScopeParam(w, r)
	if !ok || !s.uiParseForm(w, r) {
		return
	}
	pf := r.PostForm
	form := credentialsForm{
		uiForm: uiForm{Reason: pf.Get("reason")},
		Type:   pf.Get("type"), Name: strings.TrimSpace(pf.Get("headerName")), Username: pf.Get("username"),
	}
	creds := scheduler.Credentials{Type: scheduler.CredentialType(form.Type)}
	switch creds.Type {
	case scheduler.CredentialBearer:
		creds.Token = pf.Get("token")
	case scheduler.CredentialHeader:
		creds.Name, creds.Value = form.Name, pf.Get("headerValue")
	case scheduler.CredentialBasic:
		creds.Username, creds.Password = form.Username, pf.Get("password")
	default:
		creds.Type = "invalid"
	}
	before, err := s.svc.GetScope(r.Context(), name)
	if err != nil {
		s.uiFail(w, r, err, "scope "+name)
		return
	}
	after, err := s.svc.ReplaceCredentials(r.Context(), name, creds, form.Reason, actorFrom(r.Context()))
	if err != nil {
		s.uiScopeActionError(w, r, name, err, func(v *scopeView, msg string) { form.Error = msg; v.Credentials = form })
		return
	}
	msg := "Credentials replaced (" + string(after.Credentials.Type) + ")."
	if before.HoldReason == scheduler.HoldAuthRevoked && after.HoldReason == "" {
		msg += " The scope's hold for refused credentials is lifted; release its held operations to send them again."
	}
	s.uiRedirect(w, r, scopeUIPath(name), flashOK, msg)
}

// uiScopeActionError answers a failed action on a scope like
// uiOperationActionError does for operations.
func (s *Server) uiScopeActionError(w http.ResponseWriter, r *http.Request, name string, err error, set func(v *scopeView, msg string)) {
	status, msg, ok := uiActionProblem(err)
	if !ok {
		s.uiFail(w, r, err, "scope "+name)
		return
	}
	s.uiScopeFormError(w, r, name, status, msg, func(v *scopeView) { set(v, msg) })
}

// uiScopeFormError renders the scope page with status and msg like
// uiOperationFormError.
func (s *Server) uiScopeFormError(w http.ResponseWriter, r *http.Request, name string, status int, msg string, set func(v *scopeView)) {
	v, err := s.uiScopeView(w, r, name)
	if err != nil {
		s.uiFail(w, r, err, "scope "+name)
		return
	}
	set(v)
	v.Error = "Nothing was changed. " + msg
	s.uiRender(w, r, status, "scope", v)
}

// uiScopeParam returns the scope named in the path, or answers 404.
func (s *Server) uiScopeParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	name, ok := pathParam(r, "providerScope")
	if !ok || name == "" {
		s.uiNotFound(w, r)
		return "", false
	}
	return name, true
}

// pluralWord picks one or many by n.
func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
