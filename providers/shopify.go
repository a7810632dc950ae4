package providers

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ShopifyShopStateWait is how long a Shopify shop that is frozen (402),
// locked (423) or behind a security rejection (430) is paused when the
// response names no wait of its own.
const ShopifyShopStateWait = time.Hour

// ShopifyGraphQLWait is the wait after a GraphQL THROTTLED whose cost
// figures are missing or unusable: Shopify's own graphql-client retries
// after one second.
const ShopifyGraphQLWait = time.Second

// Shopify is the profile for the Shopify Admin API, REST and GraphQL
// (providers.md §3). Limits are a leaky bucket per app × shop, so a limit
// pauses only its scope.
//
// REST: 429 with Retry-After (seconds, possibly fractional) is rateLimited;
// X-Shopify-Shop-Api-Call-Limit ("used/limit") gives the budget. GraphQL:
// errors[].extensions.code THROTTLED, usually at HTTP 200, is rateLimited
// (so is the older shape, errors[].message "Throttled" without a code)
// with a wait of (requestedQueryCost − currentlyAvailable) ÷ restoreRate
// seconds from extensions.cost; the throttle status is the budget, in cost
// points. Mutations report userErrors[] at 200: permanent.
//
// Shop state: 402 (frozen for billing), 423 (locked) and 430 (security
// rejection) are rateLimited with a long default wait
// (ShopifyShopStateWait), not transient. They describe the shop, not the
// request: nothing was done, and every request to that shop will get the
// same answer until a person (the merchant, Shopify) acts. rateLimited
// pauses the whole scope and probes once per wait without spending
// operations' attempts; transient would back off each operation on its own,
// keep sending requests to a shop that cannot answer and fail them all once
// their attempts are spent. The operation's deadline still bounds the wait.
//
// 5xx: providers.md says transient; for a mutation pacer keeps invariant 4
// (unknown outcome), because Shopify honours no idempotency header — its
// keys live in the body (@idempotent, idempotencyKey, unique_token), which
// pacer does not inspect. 503 is transient.
type Shopify struct{ *table }

var _ Profile = (*Shopify)(nil)

// NewShopify returns the Shopify profile.
func NewShopify() *Shopify {
	gqlCode := func(codes ...string) func(r *reading) bool {
		return func(r *reading) bool {
			return r.mentions(`"errors"`) && r.fields().has("errors[].extensions.code", codes...)
		}
	}
	shopState := func(status, reason, what string) rule {
		return rule{
			Signal: Signal{Status: status, Class: ClassRateLimited, Reason: reason,
				Note: what + ": the shop is paused, not the request retried; see the profile's comment"},
			hints: []hinter{retryAfter(), fixedHint{name: "shopify-shop-state", wait: ShopifyShopStateWait, note: "shop " + what + "; probing again after the default wait"}},
		}
	}
	t := table{
		name: "shopify", title: "Shopify Admin API (REST and GraphQL)", ref: "providers.md §3",
		budgets: []budgetReader{
			funcBudget{
				desc: BudgetSource{Remaining: "x-shopify-shop-api-call-limit", Limit: "x-shopify-shop-api-call-limit", Note: `REST "used/limit" of the app × shop bucket (40 standard; leaks 2/s, 4 Advanced, 20 Plus)`},
				fn:   func(r *reading) *Budget { return usedOfLimit(r.header("X-Shopify-Shop-Api-Call-Limit")) },
			},
			funcBudget{
				desc: BudgetSource{Remaining: "body extensions.cost.throttleStatus.currentlyAvailable", Limit: "body extensions.cost.throttleStatus.maximumAvailable", Note: "GraphQL, in cost points, not requests", Resource: "graphql (its own bucket, apart from REST's)"},
				fn:   shopifyGraphQLBudget,
			},
		},
		idemNote: "no header: GraphQL @idempotent(key:) on listed mutations (refundCreate, inventoryAdjustQuantities, …; mandatory from 2026-04), idempotencyKey arguments on billing/payment mutations, REST unique_token body field. Put the operation's requestIdentity there yourself",
		// The REST bucket leaks 2 requests per second on standard plans.
		defaults:     Defaults{MaxConcurrent: 4, Requests: 2, Per: time.Second},
		defaultsNote: "2/s: the REST bucket's leak rate on standard plans (GraphQL restores 100 points/s); 4 in flight",
		notes: []string{
			"Limits are per app × shop: shops never affect each other.",
			"GraphQL queries are POSTs: enqueue them with kind \"read\" so a 5xx is retried rather than held.",
		},
	}
	rules := []rule{
		{
			Signal: Signal{Status: "any", When: `errors[].extensions.code THROTTLED, or errors[].message "Throttled" (the older shape, without a code), usually at 200`, Class: ClassRateLimited, Reason: "graphql-throttled"},
			match: func(r *reading) bool {
				return gqlCode("THROTTLED")(r) || r.mentions(`"errors"`) && shopifyThrottledMessage(r.fields())
			},
			hints: []hinter{retryAfter(), shopifyCostHint(), fixedHint{name: "shopify-graphql-default", wait: ShopifyGraphQLWait, note: "no usable cost figures; Shopify's client retries after 1 s"}},
		},
		{
			Signal: Signal{Status: "any", When: "errors[].extensions.code MAX_COST_EXCEEDED", Class: ClassPermanent, Reason: "max-cost-exceeded",
				Note: "the query costs more than the bucket can ever hold (max 1000 per query)", Verify: true},
			match: gqlCode("MAX_COST_EXCEEDED"),
		},
		{
			Signal: Signal{Status: "2xx", When: "data.<mutation>.userErrors[] not empty", Class: ClassPermanent, Reason: "user-errors",
				Note: "a valid request the shop refused (validation, business rules); nothing was changed"},
			match: func(r *reading) bool {
				if !r.mentions(`"userErrors"`) {
					return false
				}
				f := r.fields()
				if !f.isDoc { // cut off by the read bound: scan
					return userErrorsRe.Match(f.raw)
				}
				return f.anyPath(func(p string) bool { return strings.HasPrefix(p, "data.") && strings.Contains(p, ".userErrors[]") })
			},
		},
		{
			Signal: Signal{Status: "2xx", When: "errors[].extensions.code ACCESS_DENIED", Class: ClassPermanent, Reason: "access-denied", Verify: true},
			match:  gqlCode("ACCESS_DENIED"),
		},
		{
			Signal: Signal{Status: "2xx", When: "errors[].extensions.code SHOP_INACTIVE", Class: ClassRateLimited, Reason: "shop-inactive",
				Note: "like the shop-state statuses: pause the shop", Verify: true},
			match: gqlCode("SHOP_INACTIVE"),
			hints: []hinter{retryAfter(), fixedHint{name: "shopify-shop-state", wait: ShopifyShopStateWait, note: "shop inactive; probing again after the default wait"}},
		},
		{
			Signal: Signal{Status: "2xx", When: "errors[].extensions.code INTERNAL_SERVER_ERROR", Class: ClassUnknownOutcome, ReadClass: ClassTransient, Reason: "graphql-internal-error", Verify: true},
			match:  gqlCode("INTERNAL_SERVER_ERROR"),
		},
		{
			Signal: Signal{Status: "2xx", When: "errors[] present and no data", Class: ClassPermanent, Reason: "graphql-errors",
				Note: "a query Shopify refused as a whole (syntax, unknown field)", Verify: true},
			match: func(r *reading) bool {
				if !r.mentions(`"errors"`) {
					return false
				}
				f := r.fields()
				return f.isDoc && f.present("errors[].message") && !f.anyPath(func(p string) bool { return strings.HasPrefix(p, "data.") })
			},
		},
		{
			Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit", Note: "REST bucket full; Retry-After in seconds, possibly fractional"},
		},
		shopState("402", "shop-frozen", "frozen (billing)"),
		shopState("423", "shop-locked", "locked"),
		shopState("430", "security-rejection", "behind a security rejection"),
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable", Note: "Shopify's graphql-client retries 503 after 1 s"}},
		noKeysServerError("5xx", "server-error", "Shopify honours no idempotency header; a 5xx may come after the write landed"),
	}
	return &Shopify{newTable(t, rules)}
}

// shopifyThrottledMessage reports whether an errors[].message is
// "Throttled": the older GraphQL throttle answer, which carries no
// extensions.code (design §12).
func shopifyThrottledMessage(f *bodyFields) bool {
	for _, m := range f.get("errors[].message") {
		if strings.EqualFold(strings.TrimSpace(m), "Throttled") {
			return true
		}
	}
	return false
}

// shopifyFigure reads a non-negative, finite cost figure.
func shopifyFigure(f *bodyFields, path string) (float64, bool) {
	v, err := strconv.ParseFloat(f.first(path), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false
	}
	return v, true
}

// userErrorsRe finds a non-empty userErrors array in a body cut off before
// its end.
var userErrorsRe = regexp.MustCompile(`"userErrors"\s*:\s*\[\s*\{`)

const shopifyThrottle = "extensions.cost.throttleStatus."

// shopifyCostHint waits (requestedQueryCost − currentlyAvailable) ÷
// restoreRate seconds (providers.md §3).
func shopifyCostHint() hinter {
	return funcHint{
		desc: HintSource{Source: "shopify-graphql-cost", Format: "(extensions.cost.requestedQueryCost − throttleStatus.currentlyAvailable) ÷ throttleStatus.restoreRate seconds"},
		fn: func(r *reading) Hint {
			f := r.fields()
			req, okReq := shopifyFigure(f, "extensions.cost.requestedQueryCost")
			avail, okAvail := shopifyFigure(f, shopifyThrottle+"currentlyAvailable")
			rate, okRate := shopifyFigure(f, shopifyThrottle+"restoreRate")
			if !okReq && !okAvail && !okRate {
				return Hint{}
			}
			h := Hint{Source: "shopify-graphql-cost", Raw: Cut("requested "+f.first("extensions.cost.requestedQueryCost")+", available "+f.first(shopifyThrottle+"currentlyAvailable")+", restoreRate "+f.first(shopifyThrottle+"restoreRate"), maxRaw)}
			switch {
			case !okReq || !okAvail || !okRate:
				h.Note = "ignored: cost figures missing or not non-negative numbers"
				return h
			case rate == 0:
				h.Note = "ignored: restoreRate is 0"
				return h
			}
			secs := (req - avail) / rate
			if secs > MaxHintAhead.Seconds() {
				secs = MaxHintAhead.Seconds() + 1
			}
			return finish(h, time.Duration(secs*float64(time.Second)), r.now, "")
		},
	}
}

// ShopifyGraphQLResource names the GraphQL cost bucket apart from the REST
// call bucket (the default budget): Shopify keeps the two apart.
const ShopifyGraphQLResource = "graphql"

// shopifyGraphQLBudget is the GraphQL throttle status, in cost points, of
// the GraphQL bucket (ShopifyGraphQLResource).
func shopifyGraphQLBudget(r *reading) *Budget {
	if !r.mentions(`"throttleStatus"`) || !r.fields().present(shopifyThrottle+"currentlyAvailable") {
		return nil
	}
	f := r.fields()
	avail, ok := shopifyFigure(f, shopifyThrottle+"currentlyAvailable")
	if !ok || avail > math.MaxInt32 {
		return nil
	}
	b := &Budget{Remaining: int64(avail), Resource: ShopifyGraphQLResource}
	if m, ok := shopifyFigure(f, shopifyThrottle+"maximumAvailable"); ok && m <= math.MaxInt32 {
		b.Limit = int64(m)
	}
	return b
}
