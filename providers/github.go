package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// GitHubSecondaryWait is how long the GitHub profile waits after a rate
// limit that names no usable time: GitHub asks for at least one minute
// (providers.md §1).
const GitHubSecondaryWait = time.Minute

// GitHub is the profile for the GitHub REST API (providers.md §1).
//
// 403 and 429 are rate limits iff x-ratelimit-remaining is 0, retry-after is
// present, or the message mentions a rate limit (a 429 always is). A primary
// limit (remaining 0) waits for retry-after, else x-ratelimit-reset (epoch
// seconds, converted through Date); a secondary limit waits for
// retry-after, else the reset when remaining is 0. Without a usable value
// either waits GitHubSecondaryWait (Hint Source "github-secondary-default",
// or "github-default" for a primary limit whose reset is unusable). Any other
// 403 is permanent ("permission"). 401 is authRevoked; 400, 404, 409, 410
// and 422 are permanent (422 with errors[].code already_exists has Reason
// "already-exists"). GitHub honours no idempotency keys, so every 5xx on a
// mutation is an unknown outcome; on a read it is transient. Budget comes
// from x-ratelimit-limit/-remaining/-reset on every response; it is the
// budget of the resource named by x-ratelimit-resource (core, search, …),
// which the Detail names.
type GitHub struct{}

var _ Profile = (*GitHub)(nil)

// NewGitHub returns the GitHub profile.
func NewGitHub() *GitHub { return &GitHub{} }

// Name implements Profile.
func (g *GitHub) Name() string { return "github" }

// Idempotency implements Profile: GitHub honours no idempotency keys.
func (g *GitHub) Idempotency() Idempotency { return Idempotency{} }

// Defaults implements Profile: the 5,000 requests per hour of a user or
// installation token, and 10 requests in flight, well below the secondary
// limit's 100 concurrent requests.
func (g *GitHub) Defaults() Defaults {
	return Defaults{MaxConcurrent: 10, Requests: 5000, Per: time.Hour}
}

// Classify implements Profile.
func (g *GitHub) Classify(ex Exchange) Outcome {
	if ex.Response == nil {
		return ClassifyTransport(ex)
	}
	resp := ex.Response
	h, st := resp.Header, resp.StatusCode
	o := Outcome{Status: st}
	budget, reset := ReadBudget(h, BudgetHeaders{
		Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining",
		Reset: "X-Ratelimit-Reset", ResetForm: ResetEpochSeconds,
	}, ex.Now)
	o.Budget = budget
	var notes []string
	if res := h.Get("X-Ratelimit-Resource"); res != "" && budget != nil {
		notes = append(notes, "budget of resource "+cut(res, 32))
	}
	e := parseGitHubError(ex.Body)
	exhausted := budget != nil && budget.Remaining == 0
	ra := retryAfterHint(h, ex.Now)

	switch {
	case (st == 403 || st == 429) && (st == 429 || exhausted || ra.Source != "" || e.mentionsRateLimit()):
		o.Class = ClassRateLimited
		hints := []Hint{ra}
		if exhausted {
			hints = append(hints, reset)
		}
		o.Hint = ChooseHint(hints...)
		notes = append(notes, hintNotes(hints...)...)
		fallback := "github-default"
		o.Reason = "primary-rate-limit"
		if e.secondary() || !exhausted {
			o.Reason, fallback = "secondary-rate-limit", "github-secondary-default"
		}
		if !o.Hint.Usable() {
			o.Hint = Hint{
				Source: fallback,
				At:     ex.Now.Add(GitHubSecondaryWait),
				Note:   "no usable retry-after or reset; GitHub asks to wait at least one minute",
			}
		}
	case st == 403:
		o.Class, o.Reason = ClassPermanent, "permission"
		if need := h.Get("X-Accepted-Github-Permissions"); need != "" {
			notes = append(notes, "accepted permissions: "+cut(need, 128))
		}
	case st == 404:
		o.Class, o.Reason = ClassPermanent, "not-found"
		notes = append(notes, "GitHub answers 404 when auth is missing or insufficient for a private resource")
	case st == 422 && e.has("already_exists"):
		o.Class, o.Reason = ClassPermanent, "already-exists"
		if ex.Mutation {
			notes = append(notes, "already_exists: if this mutation was sent before, the first write may have landed")
		}
	case st >= 500 && st < 600:
		o.Class, o.Reason = serverError(ex, true)
		if ex.Mutation {
			notes = append(notes, "GitHub honours no idempotency keys")
		}
	default:
		o.Class, o.Reason = classifyStatus(ex)
	}
	if o.Class == ClassTransient {
		o.Hint = ra
		notes = append(notes, hintNotes(ra)...)
	}
	o.Detail = describe(resp, ex.Body, notes...)
	return o
}

// githubError is what the profile reads from a GitHub error body:
// `{"message": …, "errors": [{"code": …}, …]}`.
type githubError struct {
	message string
	codes   []string
	// text is the lower-cased text searched for rate-limit wording: the
	// message, or the start of the body when it has none.
	text string
}

func (e githubError) mentionsRateLimit() bool {
	return strings.Contains(e.text, "rate limit") || strings.Contains(e.text, "abuse detection")
}

func (e githubError) secondary() bool {
	return strings.Contains(e.text, "secondary rate limit") || strings.Contains(e.text, "abuse detection")
}

func (e githubError) has(code string) bool {
	for _, c := range e.codes {
		if c == code {
			return true
		}
	}
	return false
}

// parseGitHubError reads body tolerantly: a body that is not JSON (cut
// off, or HTML from a proxy) is scanned for the same fields.
func parseGitHubError(body []byte) githubError {
	var doc struct {
		Message string            `json:"message"`
		Errors  []json.RawMessage `json:"errors"`
	}
	var e githubError
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(body, &doc); err == nil || errors.As(err, &typeErr) {
		e.message = doc.Message
		for _, raw := range doc.Errors {
			var item struct {
				Code string `json:"code"`
			}
			if json.Unmarshal(raw, &item) == nil && item.Code != "" {
				e.codes = append(e.codes, item.Code)
			}
		}
	} else {
		e.message = jsonStringField(body, "message", nil)
		if bytes.Contains(body, []byte(`"already_exists"`)) {
			e.codes = append(e.codes, "already_exists")
		}
	}
	e.text = strings.ToLower(e.message)
	if e.text == "" {
		e.text = strings.ToLower(string(body[:min(len(body), 4096)]))
	}
	return e
}
