package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"pacer/scheduler"
)

// uiPageSize is how many operations one page of a list shows.
const uiPageSize = 50

// stateAny is the state filter value that selects every state; the empty
// value selects what needs attention (held or failed).
const stateAny = "any"

// attentionStates are the states that need a person.
func attentionStates() []scheduler.State {
	return []scheduler.State{scheduler.StateHeld, scheduler.StateFailed}
}

// attentionView is the landing page: what needs attention first.
type attentionView struct {
	uiPage
	// The filters as given.
	Scope, State, Reason string
	StateOptions         []uiOption
	ReasonOptions        []uiOption
	// Filtered is true when any filter is set.
	Filtered bool
	// Searched is true when the search box asked for Query; Matches are
	// the operations whose ID starts with it (no exact match).
	Searched bool
	Matches  []scheduler.Operation
	// Counts across everything, for the summary.
	HeldOps, FailedOps, HeldScopeCount, PausedScopeCount int
	// Matching counts the operations the filters select (all pages).
	Matching int
	Ops      []scheduler.Operation
	// HideScope is false: the list shows each operation's scope.
	HideScope bool
	// NextURL is the link to the following (older) page; empty on the last.
	NextURL string
	// FirstURL is the link to the first page when this is not it.
	FirstURL string
	// Scopes needing attention (held first, then paused), and all scopes.
	AttentionScopes []scopeSummary
	AllScopes       []scopeSummary
	UnknownScope    bool
}

// scopeSummary is one scope in a list.
type scopeSummary struct {
	Name, Provider string
	Status         scheduler.ScopeStatus
	// Why says why the scope is held or paused.
	Why string
	// Until is the end of a pause; zero otherwise.
	Until    time.Time
	InFlight int
}

// handleUIAttention answers GET /ui/: held and failed operations (or the
// state filtered for), newest first, with counts, held and paused scopes,
// filters by scope, state and reason, and cursor paging.
func (s *Server) handleUIAttention(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	v := attentionView{
		uiPage: s.uiBase(w, r, "Needs attention").live(),
		Scope:  strings.TrimSpace(q.Get("scope")), State: q.Get("state"), Reason: q.Get("reason"),
	}
	v.Filtered = v.Scope != "" || v.State != "" || v.Reason != ""
	status := http.StatusOK
	if query := strings.TrimSpace(q.Get("q")); query != "" {
		// The search box (design §14): an exact ID opens the operation; a
		// prefix lists what starts with it.
		v.Query, v.Searched = query, true
		exact, matches, err := s.svc.FindOperation(ctx, query)
		var ve *scheduler.ValidationError
		switch {
		case errors.As(err, &ve):
			v.Error = fmt.Sprintf("Search for an operation ID or its start, of at most %d bytes.", scheduler.MaxSearch)
			status = http.StatusBadRequest
		case err != nil:
			s.uiInternalError(w, r, err)
			return
		case exact != nil:
			http.Redirect(w, r, operationUIPath(exact.ID), http.StatusSeeOther)
			return
		}
		v.Matches = matches
	}

	f := scheduler.OperationFilter{Scope: v.Scope, Reason: v.Reason, Limit: uiPageSize, Cursor: q.Get("cursor")}
	switch st := scheduler.State(v.State); {
	case v.State == "":
		f.States = attentionStates()
	case v.State == stateAny:
	case st.Valid():
		f.State = st
	default:
		v.Error = "There is no state " + strconv.Quote(v.State) + "; showing what needs attention."
		v.State, f.States, status = "", attentionStates(), http.StatusBadRequest
	}
	v.StateOptions = stateOptions(v.State)
	v.ReasonOptions = reasonOptions(v.Reason)

	page, err := s.svc.ListOperations(ctx, f)
	var ve *scheduler.ValidationError
	if errors.As(err, &ve) {
		v.Error = "This page link is out of date or invalid; showing the first page."
		status = http.StatusBadRequest
		f.Cursor = ""
		page, err = s.svc.ListOperations(ctx, f)
	}
	if err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	v.Ops = page.Operations
	if page.Next != "" {
		v.NextURL = attentionURL(v.Scope, v.State, v.Reason, page.Next)
	}
	if f.Cursor != "" {
		v.FirstURL = attentionURL(v.Scope, v.State, v.Reason, "")
	}
	count := f
	count.Cursor = ""
	if v.Matching, err = s.svc.CountOperations(ctx, count); err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	if v.HeldOps, err = s.svc.CountOperations(ctx, scheduler.OperationFilter{State: scheduler.StateHeld}); err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	if v.FailedOps, err = s.svc.CountOperations(ctx, scheduler.OperationFilter{State: scheduler.StateFailed}); err != nil {
		s.uiInternalError(w, r, err)
		return
	}

	scopes, err := s.svc.ListScopes(ctx)
	if err != nil {
		s.uiInternalError(w, r, err)
		return
	}
	v.UnknownScope = v.Scope != ""
	var held, paused []scopeSummary
	for _, sc := range scopes {
		sum := summarizeScope(sc, v.Now)
		v.AllScopes = append(v.AllScopes, sum)
		switch sum.Status {
		case scheduler.ScopeHeld:
			held = append(held, sum)
		case scheduler.ScopePaused:
			paused = append(paused, sum)
		}
		if sc.Name == v.Scope {
			v.UnknownScope = false
		}
	}
	v.HeldScopeCount, v.PausedScopeCount = len(held), len(paused)
	v.AttentionScopes = append(held, paused...)
	s.uiRender(w, r, status, "attention", &v)
}

// summarizeScope is a scope as lists show it, at now.
func summarizeScope(sc scheduler.Scope, now time.Time) scopeSummary {
	sum := scopeSummary{Name: sc.Name, Provider: sc.Provider, Status: sc.Status(now), InFlight: sc.InFlight}
	switch sum.Status {
	case scheduler.ScopeHeld:
		sum.Why = reasonLabel(string(sc.HoldReason))
	case scheduler.ScopePaused:
		sum.Until, sum.Why = sc.Pause(now)
	}
	return sum
}

// attentionURL is the landing page with filters and a cursor.
func attentionURL(scope, state, reason, cursor string) string {
	q := url.Values{}
	for k, v := range map[string]string{"scope": scope, "state": state, "reason": reason, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return "/ui/"
	}
	return "/ui/?" + q.Encode()
}

// stateOptions are the choices of the state filter.
func stateOptions(selected string) []uiOption {
	out := []uiOption{
		{Value: "", Label: "needs attention (held or failed)"},
		{Value: stateAny, Label: "any state"},
	}
	for _, st := range scheduler.AllStates {
		out = append(out, uiOption{Value: string(st), Label: string(st)})
	}
	for i := range out {
		out[i].Selected = out[i].Value == selected
	}
	return out
}

// handleUIBulk answers POST /ui/operations/bulk: every operation matching
// the list's filters is released now or canceled (design §14), once the
// form confirms the count it showed; then the list again, saying what was
// done.
func (s *Server) handleUIBulk(w http.ResponseWriter, r *http.Request) {
	if !s.uiParseForm(w, r) {
		return
	}
	f := r.PostForm
	scope, state, reason := strings.TrimSpace(f.Get("scope")), f.Get("state"), f.Get("filterReason")
	back := attentionURL(scope, state, reason, "")
	filter := scheduler.OperationFilter{Scope: scope, Reason: reason}
	if state != stateAny {
		filter.State = scheduler.State(state)
	}
	if f.Get("confirm") == "" {
		s.uiRedirect(w, r, back, flashError, "Nothing was changed: tick the confirmation with the number of operations to act on.")
		return
	}
	res, err := s.svc.Bulk(r.Context(), scheduler.BulkInput{Action: scheduler.ManualAction(f.Get("action")), Filter: filter, Reason: f.Get("reason")}, actorFrom(r.Context()))
	if err != nil {
		if _, msg, ok := uiActionProblem(err); ok {
			s.uiRedirect(w, r, back, flashError, msg)
			return
		}
		s.uiInternalError(w, r, err)
		return
	}
	done := scheduler.ManualAction(f.Get("action")).Done()
	msg := fmt.Sprintf("%s %s.", capitalize(done), countWord(res.Changed, "operation", "operations"))
	if res.Skipped > 0 {
		msg += fmt.Sprintf(" %s matched but could not be %s (their state did not allow it), and were left as they are.", countWord(res.Skipped, "operation", "operations"), done)
	}
	if res.More {
		msg += " More may match: act again."
	}
	s.uiRedirect(w, r, back, flashOK, msg)
}

// countWord is n with its noun, "1 operation", "1,234 operations".
func countWord(n int, one, many string) string {
	return groupThousands(n) + " " + pluralWord(n, one, many)
}
