package httpapi

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"pacer/providers"
	"pacer/scheduler"
)

// stateWords explains an operation's state, with its reason, in plain
// words for support staff.
func stateWords(op scheduler.Operation) string {
	if op.BlockedBy == scheduler.BlockedByScopeHeld {
		return "Waiting behind its scope, which is held: it is not sent until a person resumes the scope or replaces its credentials; then it goes at its next attempt time."
	}
	switch op.State {
	case scheduler.StateScheduled:
		switch {
		case op.Attempt == 0:
			return "Queued: it will be sent at its first attempt time."
		case op.BudgetAttempts == 0:
			// A release starts a fresh retry budget: no failure since.
			return "Released by a person: it will be sent again at its next attempt time, with the same request identity."
		}
		return "Waiting to be sent again after a temporary failure, at its next attempt time."
	case scheduler.StateWaitingForBudget:
		return "Waiting for the provider's rate limit or its scope (a pause, a spent budget, the scope's rate); it goes at its next attempt time."
	case scheduler.StateRunning:
		return "Being sent to the provider right now."
	case scheduler.StateHeld:
		switch op.HoldReason {
		case scheduler.HoldUnknownOutcome:
			return "Held: the request may have reached the provider, but no definite answer came back, and sending it again might do it twice. Check at the provider whether it was applied, then resolve it."
		case scheduler.HoldAuthRevoked:
			return "Held: the provider refused the scope's credentials. Replace the credentials on the scope page (or resume the scope), then release it."
		}
		return "Held until a person acts (" + string(op.HoldReason) + ")."
	case scheduler.StateSucceeded:
		return "Done: the provider accepted it."
	case scheduler.StateFailed:
		switch op.FailureReason {
		case scheduler.FailurePermanent:
			return "Failed: the provider rejected the request itself; sending it again unchanged will not help."
		case scheduler.FailureRetryBudgetExhausted:
			return "Failed: its retry budget (attempts or time) ran out before the provider accepted it."
		case scheduler.FailureResolvedFailed:
			return "Failed: a person checked the provider, found it was not applied, and ended it."
		}
		return "Failed (" + string(op.FailureReason) + ")."
	case scheduler.StateCanceled:
		return "Canceled by a person; it will not be sent."
	}
	return string(op.State)
}

// reasonLabel is the short label of a hold or failure reason.
func reasonLabel(reason string) string {
	switch reason {
	case string(scheduler.HoldUnknownOutcome):
		return "outcome unknown"
	case string(scheduler.HoldAuthRevoked):
		return "credentials refused"
	case string(scheduler.BlockedByScopeHeld):
		return "scope held"
	case string(scheduler.FailurePermanent):
		return "rejected by the provider"
	case string(scheduler.FailureRetryBudgetExhausted):
		return "retries exhausted"
	case string(scheduler.FailureResolvedFailed):
		return "resolved as not applied"
	}
	return reason
}

// uiOption is one choice of a select.
type uiOption struct {
	Value, Label string
	Selected     bool
}

// reasonOptions are the hold and failure reasons a list can be filtered by.
func reasonOptions(selected string) []uiOption {
	out := []uiOption{{Value: "", Label: "any reason"}}
	for _, r := range []string{
		string(scheduler.HoldUnknownOutcome), string(scheduler.HoldAuthRevoked), string(scheduler.FailurePermanent),
		string(scheduler.FailureRetryBudgetExhausted), string(scheduler.FailureResolvedFailed),
	} {
		out = append(out, uiOption{Value: r, Label: reasonLabel(r) + " (" + r + ")"})
	}
	for i := range out {
		out[i].Selected = out[i].Value == selected
	}
	return out
}

// classWords says what an outcome class means.
func classWords(c providers.Class) string {
	switch c {
	case providers.ClassSuccess:
		return "accepted"
	case providers.ClassRateLimited:
		return "rate limited"
	case providers.ClassTransient:
		return "temporary failure"
	case providers.ClassPermanent:
		return "rejected"
	case providers.ClassAuthRevoked:
		return "credentials refused"
	case providers.ClassUnknownOutcome:
		return "outcome unknown"
	}
	return string(c)
}

// statusText is "429 Too Many Requests", or "no HTTP response" for 0.
func statusText(code int) string {
	if code == 0 {
		return "no HTTP response"
	}
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}

// holdWordsScope explains why a scope is held.
func holdWordsScope(h scheduler.HoldReason) string {
	switch h {
	case scheduler.HoldAuthRevoked:
		return "The provider refused this scope's credentials. Nothing of the scope is sent until the credentials are replaced or a person resumes it."
	case "":
		return ""
	}
	return "Held until a person resumes it (" + string(h) + ")."
}

// secretWords is the part of a query parameter name that marks its value
// as possibly secret; pages show such values redacted.
const secretWords = `token|key|secret|pass|signature|auth|credential|session`

// secretQueryKey matches query parameter names whose values may be secret.
var secretQueryKey = regexp.MustCompile(`(?i)(` + secretWords + `)`)

// secretQueryInText matches such a parameter with its value inside a URL
// quoted in a diagnostic.
var secretQueryInText = regexp.MustCompile(`(?i)([?&][^=&\s"'#]*(?:` + secretWords + `)[^=&\s"'#]*=)[^&\s"'#]*`)

// redactDetail replaces the values of secret-looking query parameters in
// a diagnostic (which may quote the request URL). Credentials themselves
// were redacted from it before it was stored.
func redactDetail(d string) string {
	return secretQueryInText.ReplaceAllString(d, "${1}REDACTED")
}

// redactPath returns an operation path with the values of secret-looking
// query parameters replaced, for display.
func redactPath(p string) string {
	path, query, ok := strings.Cut(p, "?")
	if !ok {
		return p
	}
	parts := strings.Split(query, "&")
	for i, part := range parts {
		k, _, hasValue := strings.Cut(part, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if hasValue && secretQueryKey.MatchString(name) {
			parts[i] = k + "=REDACTED"
		}
	}
	return path + "?" + strings.Join(parts, "&")
}

// shownHeader reports whether pages may show a request header's value;
// others are listed by name only.
func shownHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Accept", "Accept-Language", "Accept-Encoding", "Content-Language", "User-Agent",
		"Prefer", "If-Match", "If-None-Match", "X-Github-Api-Version", "Stripe-Version", "Notion-Version":
		return true
	}
	return false
}

// uiHeader is one header (of a request or an answer) as pages show it.
type uiHeader struct {
	Name  string
	Value string
	// Hidden is true when the value is not shown.
	Hidden bool
}

// displayHeaders lists headers for display, by name, with the values of
// those shown rejects left out (shownHeader for a request's, which shows
// only harmless values; shownAnswerHeader for a provider's answer).
func displayHeaders(h map[string]string, shown func(name string) bool) []uiHeader {
	out := make([]uiHeader, 0, len(h))
	for k, v := range h {
		if shown(k) {
			out = append(out, uiHeader{Name: k, Value: v})
		} else {
			out = append(out, uiHeader{Name: k, Hidden: true})
		}
	}
	slices.SortFunc(out, func(a, b uiHeader) int { return strings.Compare(a.Name, b.Name) })
	return out
}
