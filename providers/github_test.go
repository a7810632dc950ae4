package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestGitHubClassify(t *testing.T) {
	p := providers.NewGitHub()
	date := httpDate(now)
	behind := httpDate(now.Add(-10 * time.Minute)) // GitHub's clock 10 min behind ours
	const (
		in15     = "1789092900" // now + 15 min
		in15Skew = "1789092300" // now + 15 min on a clock 10 min behind
		primary  = `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`
		second   = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
		// The docs' GraphQL error shape (errors[].type RATE_LIMITED) with the wording of GitHub's primary limit message.
		gqlLimited = `{"data":null,"errors":[{"type":"RATE_LIMITED","code":"graphql_rate_limit","message":"API rate limit exceeded for user ID 1."}]}`
		noAccess   = `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/issues/issues#create-an-issue","status":"403"}`
	)
	full := func(remaining, reset string) []string {
		return []string{"Date", date, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", remaining, "X-RateLimit-Used", "1", "X-RateLimit-Reset", reset, "X-RateLimit-Resource", "core"}
	}
	withResource := func(resource string, kv ...string) []string {
		return append(kv[:len(kv)-1:len(kv)-1], resource)
	}
	tests := []signalCase{
		// GitHub docs, "Rate limits for the REST API": x-ratelimit-resource is "the rate limit resource
		// that the request counted against" (core, search, graphql, code_search, …; GET /rate_limit lists
		// them): core is the default budget, any other a budget of its own (design §12).
		{name: "SearchBudget", ex: exchange{status: 200, header: header(withResource("search", full("29", in15)...)...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 29, Limit: 5000, ResetAt: now.Add(15 * time.Minute), Resource: "search"}, detail: "resource search"}},
		{name: "SearchPrimaryLimit", ex: exchange{status: 403, header: header(withResource("search", full("0", in15)...)...), body: primary},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute), Resource: "search"}}},
		{name: "GraphQLBudget", ex: exchange{method: "POST", status: 200, header: header(withResource("graphql", full("4990", in15)...)...), body: `{"data":{}}`},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 4990, Limit: 5000, ResetAt: now.Add(15 * time.Minute), Resource: "graphql"}}},
		// A resource name is bounded and keeps only name characters.
		{name: "ResourceNameSanitized", ex: exchange{status: 200, header: header(withResource(" code_search<script>\"x ", full("9", in15)...)...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 9, Limit: 5000, ResetAt: now.Add(15 * time.Minute), Resource: "code_searchscriptx"}}},
		// providers.md §1: budget headers on every response.
		{name: "OKBudget", ex: exchange{status: 200, header: header(full("4999", in15)...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 4999, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}, detail: "resource core"}},
		{name: "OKLastRequest", ex: exchange{method: "POST", status: 201, header: header(full("0", in15)...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		// providers.md §1 RL: primary limit, 403 with remaining 0 → wait for reset.
		{name: "Primary403", ex: exchange{status: 403, header: header(full("0", in15)...), body: primary},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		{name: "Primary429", ex: exchange{method: "POST", status: 429, header: header(full("0", in15)...), body: primary},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		// design §6 skew: GitHub's Date is 10 min behind; its reset is converted through Date.
		{name: "PrimarySkew", ex: exchange{status: 403, header: header("Date", behind, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", in15Skew)},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(15 * time.Minute)}}},
		// providers.md §1: retry-after wins over the reset.
		{name: "PrimaryRetryAfterWins", ex: exchange{status: 403, header: header(append(full("0", in15), "Retry-After", "30")...)},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "retry-after", hintAt: now.Add(30 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		{name: "PrimaryGarbageReset", ex: exchange{status: 403, header: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "soon")},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "github-default", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 0}, detail: `x-ratelimit-reset "soon" ignored: not a number`}},
		{name: "PrimaryPastReset", ex: exchange{status: 403, header: header("Date", date, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1789091000")},
			want: want{class: providers.ClassRateLimited, hintSrc: "github-default", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 0}, detail: "not in the future"}},
		// providers.md §1 RL: secondary limit, retry-after seconds.
		{name: "SecondaryRetryAfter", ex: exchange{method: "POST", status: 403, header: header(append(full("4000", in15), "Retry-After", "45")...), body: second},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "retry-after", hintAt: now.Add(45 * time.Second), budget: &providers.Budget{Remaining: 4000, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		// providers.md §1 RL: secondary, no retry-after, remaining 0 → reset.
		{name: "SecondaryReset", ex: exchange{status: 429, header: header(full("0", in15)...), body: second},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		// providers.md §1 RL: secondary, neither → at least 60 s.
		{name: "SecondaryDefault", ex: exchange{status: 403, header: header(full("4000", in15)...), body: second},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "github-secondary-default", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 4000, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		{name: "SecondaryNoHeaders", ex: exchange{status: 403, body: second},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "github-secondary-default", hintAt: now.Add(time.Minute)}},
		{name: "SecondaryBadRetryAfter", ex: exchange{status: 403, header: header("Retry-After", "-1"), body: second},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "github-secondary-default", hintAt: now.Add(time.Minute), detail: `retry-after "-1" ignored: negative`}},
		{name: "SecondaryAbuseMessage", ex: exchange{status: 403, body: `{"message":"You have triggered an abuse detection mechanism."}`},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "github-secondary-default", hintAt: now.Add(time.Minute)}},
		{name: "SecondaryRetryAfterOnly", ex: exchange{status: 403, header: header("Retry-After", "60")},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "retry-after", hintAt: now.Add(time.Minute)}},
		{name: "SecondaryTruncatedBody", ex: exchange{status: 403, body: `{"message":"You have exceeded a secondary rate limit. Please wait a few min`},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "github-secondary-default", hintAt: now.Add(time.Minute)}},
		{name: "429WithoutSignals", ex: exchange{status: 429},
			want: want{class: providers.ClassRateLimited, hintSrc: "github-secondary-default", hintAt: now.Add(time.Minute)}},
		// GitHub docs, "Rate limits and query limits for the GraphQL API" ("If you exceed your primary rate
		// limit, the response status will still be 200 … x-ratelimit-remaining … 0"); the body is
		// octokit/plugin-throttling.js test/retry.test.ts "GraphQL: Should retry 'rate-limit' and succeed".
		{name: "GraphQLPrimary200", ex: exchange{method: "POST", status: 200, header: header(full("0", in15)...), body: gqlLimited},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		{name: "GraphQLPrimaryOctokitFixture", ex: exchange{method: "POST", status: 200, header: header("Date", date, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", in15), body: `{"errors":[{"type":"RATE_LIMITED"}]}`},
			want: want{class: providers.ClassRateLimited, reason: "primary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(15 * time.Minute)}}},
		// Same page: a secondary limit answers 200 or 403; retry-after, else the reset when remaining is 0, else ≥1 min.
		{name: "GraphQLSecondary200RetryAfter", ex: exchange{method: "POST", status: 200, header: header(append(full("4000", in15), "Retry-After", "30")...), body: gqlLimited},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "retry-after", hintAt: now.Add(30 * time.Second), budget: &providers.Budget{Remaining: 4000, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		{name: "GraphQLSecondary200Default", ex: exchange{method: "POST", status: 200, header: header(full("4000", in15)...), body: gqlLimited},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "github-secondary-default", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 4000, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		{name: "GraphQLSecondaryMessage200", ex: exchange{method: "POST", status: 200, header: header(full("0", in15)...), body: `{"errors":[{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}]}`},
			want: want{class: providers.ClassRateLimited, reason: "secondary-rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		// octokit/plugin-throttling.js test/retry.test.ts "GraphQL: Should ignore other error types".
		{name: "GraphQLOtherErrorType", ex: exchange{method: "POST", status: 200, header: header(full("4999", in15)...), body: `{"errors":[{"type":"HELLO_WORLD"}]}`},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 4999, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		// A REST success whose text speaks of rate limits is still a success.
		{name: "RESTCommitMentioningRateLimit", ex: exchange{status: 200, header: header(full("4999", in15)...), body: `{"sha":"abc","message":"Handle the secondary rate limit and RATE_LIMITED answers"}`},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 4999, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}}},
		// providers.md §1 RL-403 vs permission-403: remaining > 0, no retry-after, no rate-limit message.
		{name: "PermissionNotRateLimit", ex: exchange{method: "POST", status: 403, header: header(append(full("4990", in15), "X-Accepted-GitHub-Permissions", "issues=write")...), body: noAccess},
			want: want{class: providers.ClassPermanent, reason: "permission", budget: &providers.Budget{Remaining: 4990, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}, detail: "accepted permissions: issues=write"}},
		{name: "PermissionNoHeaders", ex: exchange{status: 403, body: `<html>Forbidden</html>`},
			want: want{class: providers.ClassPermanent, reason: "permission"}},
		// providers.md §1 AUTH.
		{name: "401", ex: exchange{status: 401, body: `{"message":"Bad credentials"}`}, want: want{class: providers.ClassAuthRevoked}},
		{name: "404", ex: exchange{status: 404, body: `{"message":"Not Found"}`}, want: want{class: providers.ClassPermanent, reason: "not-found", detail: "404 when auth is missing"}},
		// providers.md §1 PERM.
		{name: "400", ex: exchange{method: "POST", status: 400, body: `{"message":"Problems parsing JSON"}`}, want: want{class: providers.ClassPermanent, reason: "bad-request"}},
		{name: "422", ex: exchange{method: "POST", status: 422, body: `{"message":"Validation Failed","errors":[{"resource":"Issue","code":"missing_field","field":"title"}]}`},
			want: want{class: providers.ClassPermanent, reason: "validation"}},
		// providers.md §1 Idempotency: already_exists after a retry may mean the first write landed.
		{name: "422AlreadyExists", ex: exchange{method: "POST", status: 422, body: `{"message":"Validation Failed","errors":[{"resource":"Label","code":"already_exists","field":"name"}]}`},
			want: want{class: providers.ClassPermanent, reason: "already-exists", detail: "first write may have landed"}},
		{name: "422AlreadyExistsStringErrors", ex: exchange{method: "POST", status: 422, body: `{"message":"Validation Failed","errors":["odd", {"code":"already_exists"}]}`},
			want: want{class: providers.ClassPermanent, reason: "already-exists"}},
		{name: "409", ex: exchange{method: "PUT", status: 409, body: `{"message":"Merge conflict"}`}, want: want{class: providers.ClassPermanent, reason: "conflict"}},
		// providers.md §1 UNK + Idempotency none: 5xx on a mutation is unknown.
		{name: "500Read", ex: exchange{status: 500}, want: want{class: providers.ClassTransient}},
		{name: "502Mutation", ex: exchange{method: "POST", status: 502}, want: want{class: providers.ClassUnknownOutcome, detail: "no idempotency keys"}},
		{name: "503Mutation", ex: exchange{method: "PATCH", status: 503, header: header("Retry-After", "10")}, want: want{class: providers.ClassUnknownOutcome}},
		{name: "503ReadRetryAfter", ex: exchange{status: 503, header: header("Retry-After", "10")},
			want: want{class: providers.ClassTransient, hintSrc: "retry-after", hintAt: now.Add(10 * time.Second)}},
		// providers.md §1 UNK: requests over 10 s are cut with a "Server Error".
		{name: "TimeoutServerError", ex: exchange{method: "POST", status: 500, body: `{"message":"Server Error"}`}, want: want{class: providers.ClassUnknownOutcome}},
	}
	runSignals(t, p, tests)
}

func TestGitHubProfile(t *testing.T) {
	p, err := providers.Lookup("github", providers.Options{IdempotencyHeader: "Idempotency-Key"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Name(), "github"; got != want {
		t.Errorf("name: got %q, want %q", got, want)
	}
	// providers.md §1 Idempotency: none, whatever the scope says.
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "GET"} {
		if p.Idempotency().Applies(m) {
			t.Errorf("Applies(%q) = true, want false", m)
		}
	}
	// providers.md §1 RL: 5,000 per hour; secondary limit above 100 concurrent.
	if got, want := p.Defaults(), (providers.Defaults{MaxConcurrent: 10, Requests: 5000, Per: time.Hour}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
}
