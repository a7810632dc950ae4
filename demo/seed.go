package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/scheduler"
)

// Actor is the actor the demo's scopes and actions are recorded under.
const Actor = "demo"

// The demo's scopes.
const (
	ScopeGitHub        = "demo-github"
	ScopeShop          = "demo-shop"
	ScopePayments      = "demo-payments"
	ScopePaymentsKeyed = "demo-payments-keyed"
	ScopeCRM           = "demo-crm"
)

// Seeded says what Seed created.
type Seeded struct {
	// Scopes are the scope names, in the order created.
	Scopes []string
	// Operations counts the operations enqueued (the canceled one included).
	Operations int
	// Prefix starts every operation ID of this seed ("demo-20260911-020000.000-",
	// to the millisecond so that a quick rerun does not collide).
	Prefix string
}

// Seed creates the demo scopes on the simulated provider at baseURL (see
// Provider) and enqueues operations that, within about a minute of an
// engine running, show every state:
//
//   - succeeded: GitHub reads and issues, shop orders, a payment read;
//   - waitingForBudget, and paused scopes: shop reads past its 429 limit,
//     GitHub reads past its x-ratelimit budget, a GitHub secondary limit;
//   - scheduled: shop syncs after a transient 503 (backoff), a refund
//     resent with the same idempotency key after a 502, a read due in ten
//     minutes, and a CRM write blocked behind its held scope;
//   - held: a charge answered 502 by a provider without idempotency keys
//     (unknownOutcome), and a CRM write refused with a revoked token
//     (authRevoked, which holds the scope too);
//   - failed: an issue the provider rejects (422);
//   - canceled: a read canceled before it ran.
//
// Scopes of the same names are replaced; operation IDs carry a prefix
// from the clock, so a second seed adds to the first.
func Seed(ctx context.Context, svc *scheduler.Service, baseURL string) (Seeded, error) {
	now := svc.Now()
	out := Seeded{Prefix: "demo-" + now.Format("20060102-150405.000") + "-"}
	scopes := []scheduler.ScopeInput{
		{Name: ScopeGitHub, Provider: "github", BaseURL: baseURL + "/github", MaxConcurrent: 2,
			Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: GitHubToken}},
		{Name: ScopeShop, Provider: "generic", BaseURL: baseURL + "/shop", MaxConcurrent: 2,
			Credentials: scheduler.Credentials{Type: scheduler.CredentialHeader, Name: ShopKeyHeader, Value: ShopKey}},
		{Name: ScopePayments, Provider: "generic", BaseURL: baseURL + "/payments", MaxConcurrent: 1,
			Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: PaymentsToken}},
		{Name: ScopePaymentsKeyed, Provider: "generic", BaseURL: baseURL + "/payments", MaxConcurrent: 1,
			IdempotencyHeader: "Idempotency-Key",
			Credentials:       scheduler.Credentials{Type: scheduler.CredentialBearer, Token: PaymentsToken}},
		{Name: ScopeCRM, Provider: "generic", BaseURL: baseURL + "/crm", MaxConcurrent: 1,
			Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: RevokedToken}},
	}
	for _, in := range scopes {
		if _, _, err := svc.PutScope(ctx, in, Actor); err != nil {
			return out, fmt.Errorf("seed demo scope %s: %w", in.Name, err)
		}
		out.Scopes = append(out.Scopes, in.Name)
	}

	id := func(name string) string { return out.Prefix + name }
	soon, later := now.Add(10*time.Minute), now.Add(time.Hour)
	// The invalid issue goes first so the failed state shows at once.
	ops := []scheduler.OperationInput{post(id("issue-invalid"), ScopeGitHub, "/repos/acme/app/issues", map[string]any{"body": "an issue without a title"})}
	for i := range 8 {
		ops = append(ops, get(id(fmt.Sprintf("repo-%d", i)), ScopeGitHub, fmt.Sprintf("/repos/acme/app-%d", i)))
	}
	for i := range 3 {
		ops = append(ops, post(id(fmt.Sprintf("issue-%d", i)), ScopeGitHub, "/repos/acme/app/issues", map[string]any{"title": fmt.Sprintf("Demo issue %d", i)}))
	}
	for i := range 10 {
		ops = append(ops, get(id(fmt.Sprintf("order-%d", i)), ScopeShop, fmt.Sprintf("/orders/%d", 1000+i)))
	}
	for i := range 2 {
		ops = append(ops, post(id(fmt.Sprintf("sync-%d", i)), ScopeShop, fmt.Sprintf("/flaky/sync-%d", i), map[string]any{"sku": fmt.Sprintf("SKU-%d", i)}))
	}
	ops = append(ops,
		post(id("charge"), ScopePayments, "/charges", map[string]any{"amount": 4200, "currency": "eur"}),
		get(id("charge-read"), ScopePayments, "/charges/ch_demo"),
		post(id("refund"), ScopePaymentsKeyed, "/refunds", map[string]any{"charge": "ch_demo", "amount": 1000}),
		post(id("contact-0"), ScopeCRM, "/contacts", map[string]any{"email": "ada@example.com"}),
		post(id("contact-1"), ScopeCRM, "/contacts", map[string]any{"email": "grace@example.com"}),
	)
	nightly := get(id("nightly-report"), ScopeGitHub, "/repos/acme/app/stats")
	nightly.NotBefore = &soon
	obsolete := get(id("obsolete-export"), ScopeShop, "/orders/export")
	obsolete.NotBefore = &later
	ops = append(ops, nightly, obsolete)

	res, err := svc.Enqueue(ctx, ops, func(i int) string { return fmt.Sprintf("operations[%d].", i) })
	if err != nil {
		return out, fmt.Errorf("seed demo operations: %w", err)
	}
	for i, r := range res {
		if r.Err != nil {
			return out, fmt.Errorf("seed demo operation %s: %w", ops[i].ID, r.Err)
		}
	}
	out.Operations = len(ops)
	if _, err := svc.Cancel(ctx, obsolete.ID, "the demo shows a canceled operation", Actor); err != nil {
		return out, fmt.Errorf("seed demo: %w", err)
	}
	return out, nil
}

// Traffic enqueues a few ordinary operations (GitHub reads, shop orders, a
// flaky sync) every `every` until ctx ends, so a running demo keeps
// moving: rate limits recur and metrics change. Errors are logged; it
// returns when ctx ends.
func Traffic(ctx context.Context, svc *scheduler.Service, clk clock.Clock, every time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ticker := clk.Ticker(every)
	defer ticker.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		prefix := fmt.Sprintf("demo-traffic-%s-", svc.Now().Format("20060102-150405.000"))
		ops := []scheduler.OperationInput{
			get(prefix+"repo", ScopeGitHub, fmt.Sprintf("/repos/acme/app-%d", n%8)),
			get(prefix+"repo-b", ScopeGitHub, fmt.Sprintf("/repos/acme/lib-%d", n%8)),
			get(prefix+"order", ScopeShop, fmt.Sprintf("/orders/%d", 2000+n)),
			get(prefix+"order-b", ScopeShop, fmt.Sprintf("/orders/%d", 5000+n)),
			post(prefix+"sync", ScopeShop, fmt.Sprintf("/flaky/traffic-%d", n), map[string]any{"n": n}),
		}
		res, err := svc.Enqueue(ctx, ops, func(i int) string { return fmt.Sprintf("operations[%d].", i) })
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("demo traffic: enqueue failed", "err", err)
			}
			continue
		}
		for i, r := range res {
			if r.Err != nil {
				log.Warn("demo traffic: operation rejected", "operation", ops[i].ID, "err", r.Err)
			}
		}
	}
}

func get(id, scope, path string) scheduler.OperationInput {
	return scheduler.OperationInput{ID: id, Scope: scope, Method: "GET", Path: path, MaxElapsed: time.Hour}
}

func post(id, scope, path string, body any) scheduler.OperationInput {
	b, _ := json.Marshal(body) // cannot fail: plain values
	return scheduler.OperationInput{ID: id, Scope: scope, Method: "POST", Path: path, Body: b, ContentType: "application/json", MaxElapsed: time.Hour}
}
