package providers

import (
	"strings"
	"time"
)

// GitHubSecondaryWait is how long the GitHub profile waits after a rate
// limit that names no usable time: GitHub asks for at least one minute
// (providers.md §1).
const GitHubSecondaryWait = time.Minute

// GitHub is the profile for the GitHub REST and GraphQL APIs
// (providers.md §1).
//
// GraphQL reports rate limits inside a 200 (GitHub docs, "Rate limits and
// query limits for the GraphQL API"): errors[].type RATE_LIMITED with
// x-ratelimit-remaining 0 is the primary limit, any other RATE_LIMITED, or
// an errors[].message naming a secondary rate limit, the secondary one;
// both wait as the REST limits below do (design §12).
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
// mutation is an unknown outcome (including the "Server Error" that cuts
// requests over 10 s); on a read it is transient. Budget comes from
// x-ratelimit-limit/-remaining/-reset on every response; it is the budget
// of the resource named by x-ratelimit-resource (core, search, graphql, …),
// which the Detail names and Budget.Resource carries (empty for core, the
// default budget): a spent search budget holds back only the requests that
// spend it (design §12).
//
// No GitHub limit is app-wide: a user token's 5,000/h is shared by every
// app of that user, an installation's by that installation, so a limit
// pauses only its scope.
type GitHub struct{ *table }

var _ Profile = (*GitHub)(nil)

// NewGitHub returns the GitHub profile.
func NewGitHub() *GitHub {
	budget := BudgetHeaders{
		Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining",
		Reset: "X-Ratelimit-Reset", ResetForm: ResetEpochSeconds,
	}
	exhausted := func(r *reading) bool {
		b, _ := ReadBudget(r.h, budget, r.now)
		return b != nil && b.Remaining == 0
	}
	reset := fromHeader("X-Ratelimit-Reset", ResetEpochSeconds)
	const note = "no usable retry-after or reset; GitHub asks to wait at least one minute"
	// The waits of a primary and a secondary limit, whatever the status
	// (REST 403/429, GraphQL 200).
	primaryHints := []hinter{retryAfter(), reset, fixedHint{name: "github-default", wait: GitHubSecondaryWait, note: note}}
	secondaryHints := []hinter{retryAfter(), whenHint{h: reset, cond: exhausted, when: "only when x-ratelimit-remaining is 0"},
		fixedHint{name: "github-secondary-default", wait: GitHubSecondaryWait, note: note}}
	t := table{
		name: "github", title: "GitHub REST and GraphQL APIs", ref: "providers.md §1",
		budgets: []budgetReader{headerBudget{names: budget, note: "one budget per resource (x-ratelimit-resource: core, search, graphql, …)",
			resource: "X-Ratelimit-Resource", defaultResource: "core"}},
		diag: func(r *reading) []string {
			if res := r.header("X-Ratelimit-Resource"); res != "" {
				if b, _ := ReadBudget(r.h, budget, r.now); b != nil {
					return []string{"budget of resource " + Cut(res, 32)}
				}
			}
			return nil
		},
		idemNote: "none; a 422 already_exists after a resend may mean the first write landed",
		// The 5,000 requests per hour of a user or installation token, and
		// 10 requests in flight, well below the secondary limit's 100
		// concurrent requests.
		defaults:     Defaults{MaxConcurrent: 10, Requests: 5000, Per: time.Hour},
		defaultsNote: "5,000 requests/h of a user or installation token; 10 in flight, well below the secondary limit's 100 concurrent",
		notes: []string{
			"A user token's 5,000/h is shared by every app of that user; an installation's by that installation: no limit pauses other scopes.",
			"Persistent hammering after rate limits can get an integration banned.",
		},
	}
	rules := []rule{
		{
			Signal: Signal{Status: "2xx", When: "GraphQL errors[].type RATE_LIMITED, x-ratelimit-remaining 0 and no secondary limit's message", Class: ClassRateLimited, Reason: "primary-rate-limit",
				Note: "GraphQL answers a spent primary limit with 200 and an error; not a success"},
			match: func(r *reading) bool { return githubGraphQLLimited(r) && exhausted(r) && !githubMessage(r).secondary() },
			hints: primaryHints,
		},
		{
			Signal: Signal{Status: "2xx", When: "GraphQL errors[].type RATE_LIMITED, or errors[].message a secondary rate limit's", Class: ClassRateLimited, Reason: "secondary-rate-limit",
				Note: "GraphQL answers a secondary limit with 200 or 403; hammering on can get the integration banned"},
			match: func(r *reading) bool {
				return githubGraphQLLimited(r) || r.mentions(`"errors"`) && githubGraphQLErrors(r).secondary()
			},
			hints: secondaryHints,
		},
		{
			Signal: Signal{Status: "403,429", When: "x-ratelimit-remaining is 0 and the message is not a secondary limit's", Class: ClassRateLimited, Reason: "primary-rate-limit"},
			match:  func(r *reading) bool { return exhausted(r) && !githubMessage(r).secondary() },
			hints:  primaryHints,
		},
		{
			Signal: Signal{Status: "403,429", When: "a 429, retry-after present, or the message mentions a (secondary) rate limit or abuse detection", Class: ClassRateLimited, Reason: "secondary-rate-limit",
				Note: "secondary limits: >100 concurrent, >900 points/min/endpoint, ~80 content-creating requests/min, CPU time"},
			match: func(r *reading) bool {
				return r.st == 429 || exhausted(r) || r.h.Get("Retry-After") != "" || githubMessage(r).mentionsRateLimit()
			},
			hints: secondaryHints,
		},
		{
			Signal: Signal{Status: "403", When: "not a rate limit", Class: ClassPermanent, Reason: "permission",
				Note: `"Resource not accessible by integration"; x-accepted-github-permissions lists what is needed`},
			diag: func(r *reading) []string {
				if need := r.header("X-Accepted-Github-Permissions"); need != "" {
					return []string{"accepted permissions: " + Cut(need, 128)}
				}
				return nil
			},
		},
		{
			Signal: Signal{Status: "404", Class: ClassPermanent, Reason: "not-found", Note: "GitHub answers 404 when auth is missing or insufficient for a private resource"},
			diag: func(*reading) []string {
				return []string{"GitHub answers 404 when auth is missing or insufficient for a private resource"}
			},
		},
		{
			Signal: Signal{Status: "422", When: "errors[].code already_exists", Class: ClassPermanent, Reason: "already-exists",
				Note: "after a resend the first write may have landed"},
			match: func(r *reading) bool { return githubMessage(r).has("already_exists") },
			diag: func(r *reading) []string {
				if r.ex.Mutation {
					return []string{"already_exists: if this mutation was sent before, the first write may have landed"}
				}
				return nil
			},
		},
		noKeysServerError("5xx", "server-error", "GitHub honours no idempotency keys; requests over 10 s end in a 5xx \"Server Error\" after they may have run"),
	}
	return &GitHub{newTable(t, rules)}
}

// noKeysServerError is a 5xx of a provider that honours no idempotency
// keys: the mutation may have landed, so its outcome is unknown; a read is
// transient. status names the 5xx it covers; a profile that trusts 503's
// "not processed" leaves 503 out.
func noKeysServerError(status, reason, note string) rule {
	ru := serverErrorRule(status, "", reason)
	ru.KeyedClass = ""
	ru.Note = note
	ru.diag = func(r *reading) []string {
		if r.ex.Mutation {
			return []string{note}
		}
		return nil
	}
	return ru
}

// githubError is what the profile reads from a GitHub error body:
// `{"message": …, "errors": [{"code": …}, …]}`.
type githubError struct {
	codes []string
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

// githubGraphQLLimited reports whether r is a GraphQL answer whose
// errors[].type is RATE_LIMITED (GitHub docs, "Rate limits and query
// limits for the GraphQL API": a spent limit "can also return 200").
func githubGraphQLLimited(r *reading) bool {
	return r.mentions("RATE_LIMITED") && r.fields().has("errors[].type", "RATE_LIMITED")
}

// githubGraphQLErrors is the wording of a GraphQL answer's errors[].message,
// lower-cased. A 2xx is read only there, never in a top-level message: a
// REST success (a commit, an issue) may carry any text.
func githubGraphQLErrors(r *reading) githubError {
	msgs := r.fields().get("errors[].message")
	return githubError{text: strings.ToLower(strings.Join(msgs, "\n"))}
}

// githubMessage reads r's body tolerantly: a body that is not JSON (cut
// off, or HTML from a proxy) is scanned for the same fields.
func githubMessage(r *reading) githubError {
	f := r.fields()
	e := githubError{codes: f.get("errors[].code"), text: strings.ToLower(f.first("message"))}
	if e.text == "" {
		body := r.ex.Body
		e.text = strings.ToLower(string(body[:min(len(body), 4096)]))
	}
	return e
}
