package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestShopifyClassify(t *testing.T) {
	p := providers.NewShopify()
	cost := func(requested, available, restore string) string {
		return `"extensions":{"cost":{"requestedQueryCost":` + requested + `,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":` + available + `,"restoreRate":` + restore + `}}}`
	}
	throttled := func(ext string) string {
		return `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}],` + ext + `}`
	}
	gqlError := func(code string) string {
		return `{"errors":[{"message":"…","extensions":{"code":"` + code + `"}}],"data":null}`
	}
	tests := []signalCase{
		// providers.md §3 REST: X-Shopify-Shop-Api-Call-Limit used/limit.
		{name: "RESTOKCallLimit", ex: exchange{status: 200, header: header("X-Shopify-Shop-Api-Call-Limit", "32/40"), body: `{"products":[]}`},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 8, Limit: 40}}},
		// providers.md §3 REST: 429 + Retry-After seconds, possibly fractional.
		{name: "REST429RetryAfterDecimal", ex: exchange{method: "POST", status: 429, header: header("Retry-After", "2.0", "X-Shopify-Shop-Api-Call-Limit", "40/40"), body: `{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(2 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 40}}},
		{name: "REST429RetryAfterFraction", ex: exchange{status: 429, header: header("Retry-After", "1.5")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(1500 * time.Millisecond)}},
		// providers.md §3 GraphQL: extensions.cost on a success is the budget, in points.
		{name: "GraphQLOKCost", ex: exchange{method: "POST", status: 200, body: `{"data":{"shop":{"name":"x"}},` + cost("12", "988", "50.0") + `}`},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 988, Limit: 1000, Resource: "graphql"}}},
		// providers.md §3 GraphQL: THROTTLED at HTTP 200, wait (requested − available) ÷ restoreRate.
		{name: "GraphQLThrottled200", ex: exchange{method: "POST", status: 200, body: throttled(cost("101", "1", "50.0"))},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-cost", hintAt: now.Add(2 * time.Second), budget: &providers.Budget{Remaining: 1, Limit: 1000, Resource: "graphql"}}},
		{name: "GraphQLThrottledFraction", ex: exchange{method: "POST", status: 200, body: throttled(cost("150", "75", "100.0"))},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-cost", hintAt: now.Add(750 * time.Millisecond), budget: &providers.Budget{Remaining: 75, Limit: 1000, Resource: "graphql"}}},
		// providers.md §3 GraphQL: handle THROTTLED at 429 too.
		{name: "GraphQLThrottled429", ex: exchange{method: "POST", status: 429, body: throttled(cost("1000", "0", "100"))},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-cost", hintAt: now.Add(10 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 1000, Resource: "graphql"}}},
		// providers.md §3: Shopify's graphql-client retries after 1 s without figures.
		{name: "GraphQLThrottledNoCost", ex: exchange{method: "POST", status: 200, body: throttled(`"data":null`)},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-default", hintAt: now.Add(time.Second)}},
		{name: "GraphQLThrottledRestoreZero", ex: exchange{method: "POST", status: 200, body: throttled(cost("100", "0", "0"))},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-default", hintAt: now.Add(time.Second), budget: &providers.Budget{Remaining: 0, Limit: 1000, Resource: "graphql"}, detail: "restoreRate is 0"}},
		{name: "GraphQLThrottledCutOff", ex: exchange{method: "POST", status: 200, body: `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":60,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":10,"restoreRate":50.0,"tru`},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-cost", hintAt: now.Add(time.Second), budget: &providers.Budget{Remaining: 10, Limit: 1000, Resource: "graphql"}}},
		// design §12 / issue 12: the older throttle answer, errors[{message: "Throttled"}] without
		// extensions.code (SatelCreative/spylib's Shopify constants: "Not all provide the `code`
		// parameter"); the cost figures say the same: (202 − 173) ÷ 50 = 0.58 s.
		{name: "GraphQLThrottledOldShape", ex: exchange{method: "POST", status: 200, body: `{"errors":[{"message":"Throttled"}],` + cost("202", "173", "50") + `}`},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-cost", hintAt: now.Add(580 * time.Millisecond), budget: &providers.Budget{Remaining: 173, Limit: 1000, Resource: "graphql"}}},
		{name: "GraphQLThrottledOldShapeNoCost", ex: exchange{method: "POST", status: 200, body: `{"errors":[{"message":"Throttled"}]}`},
			want: want{class: providers.ClassRateLimited, reason: "graphql-throttled", hintSrc: "shopify-graphql-default", hintAt: now.Add(time.Second)}},
		{name: "GraphQLMaxCostExceeded", ex: exchange{method: "POST", status: 200, body: gqlError("MAX_COST_EXCEEDED")},
			want: want{class: providers.ClassPermanent, reason: "max-cost-exceeded"}},
		// providers.md §3 PERM: GraphQL mutations report userErrors[] at 200.
		{name: "GraphQLUserErrors", ex: exchange{method: "POST", status: 200, body: `{"data":{"productCreate":{"product":null,"userErrors":[{"field":["title"],"message":"Title can't be blank"}]}}}`},
			want: want{class: providers.ClassPermanent, reason: "user-errors"}},
		{name: "GraphQLNoUserErrors", ex: exchange{method: "POST", status: 200, body: `{"data":{"productCreate":{"product":{"id":"gid://shopify/Product/1"},"userErrors":[]}}}`},
			want: want{class: providers.ClassSuccess}},
		{name: "GraphQLAccessDenied", ex: exchange{method: "POST", status: 200, body: gqlError("ACCESS_DENIED")},
			want: want{class: providers.ClassPermanent, reason: "access-denied"}},
		{name: "GraphQLShopInactive", ex: exchange{method: "POST", status: 200, body: gqlError("SHOP_INACTIVE")},
			want: want{class: providers.ClassRateLimited, reason: "shop-inactive", hintSrc: "shopify-shop-state", hintAt: now.Add(providers.ShopifyShopStateWait)}},
		{name: "GraphQLInternalErrorMutation", ex: exchange{method: "POST", status: 200, body: gqlError("INTERNAL_SERVER_ERROR")},
			want: want{class: providers.ClassUnknownOutcome, reason: "graphql-internal-error"}},
		{name: "GraphQLSyntaxError", ex: exchange{method: "POST", status: 200, body: `{"errors":[{"message":"syntax error, unexpected end of file","locations":[{"line":1,"column":4}]}]}`},
			want: want{class: providers.ClassPermanent, reason: "graphql-errors"}},
		// providers.md §3 Shop state: 402/423/430 pause the shop (rateLimited, long wait), not TR.
		{name: "402Frozen", ex: exchange{method: "POST", status: 402, body: `{"errors":"Unavailable Shop"}`},
			want: want{class: providers.ClassRateLimited, reason: "shop-frozen", hintSrc: "shopify-shop-state", hintAt: now.Add(time.Hour)}},
		{name: "423Locked", ex: exchange{status: 423, body: `{"errors":"This shop is unavailable"}`},
			want: want{class: providers.ClassRateLimited, reason: "shop-locked", hintSrc: "shopify-shop-state", hintAt: now.Add(time.Hour)}},
		{name: "423LockedRetryAfter", ex: exchange{status: 423, header: header("Retry-After", "300")},
			want: want{class: providers.ClassRateLimited, reason: "shop-locked", hintSrc: "retry-after", hintAt: now.Add(5 * time.Minute)}},
		{name: "430SecurityRejection", ex: exchange{method: "POST", status: 430},
			want: want{class: providers.ClassRateLimited, reason: "security-rejection", hintSrc: "shopify-shop-state", hintAt: now.Add(time.Hour)}},
		// providers.md §3 AUTH / PERM.
		{name: "401", ex: exchange{status: 401, body: `{"errors":"[API] Invalid API key or access token (unrecognized login or wrong password)"}`},
			want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "403MissingScope", ex: exchange{method: "POST", status: 403, body: `{"errors":"[API] This action requires merchant approval for write_products scope."}`},
			want: want{class: providers.ClassPermanent, reason: "permission"}},
		{name: "404", ex: exchange{status: 404}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "406", ex: exchange{status: 406}, want: want{class: providers.ClassPermanent, reason: "client-error"}},
		{name: "422", ex: exchange{method: "POST", status: 422, body: `{"errors":{"title":["can't be blank"]}}`}, want: want{class: providers.ClassPermanent, reason: "validation"}},
		// providers.md §3: 5xx → TR; a mutation without a header key stays unknown (invariant 4).
		{name: "503", ex: exchange{method: "POST", status: 503, header: header("Retry-After", "1")},
			want: want{class: providers.ClassTransient, reason: "unavailable", hintSrc: "retry-after", hintAt: now.Add(time.Second)}},
		{name: "500Read", ex: exchange{status: 500}, want: want{class: providers.ClassTransient, reason: "server-error"}},
		{name: "500Mutation", ex: exchange{method: "POST", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error", detail: "no idempotency header"}},
	}
	runSignals(t, p, tests)
}

func TestShopifyProfile(t *testing.T) {
	p, err := providers.Lookup("shopify", providers.Options{IdempotencyHeader: "Idempotency-Key"})
	if err != nil {
		t.Fatal(err)
	}
	// providers.md §3 Idempotency: no header (body directives and fields only).
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		if p.Idempotency().Applies(m) {
			t.Errorf("Applies(%q) = true, want false", m)
		}
	}
	// providers.md §3 REST: the bucket leaks 2/s on standard plans.
	if got, want := p.Defaults(), (providers.Defaults{MaxConcurrent: 4, Requests: 2, Per: time.Second}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
}
