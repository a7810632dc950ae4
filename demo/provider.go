// Package demo is what `pacer serve --demo` adds: a simulated provider on
// loopback that answers with the documented signals pacer reads (GitHub's
// x-ratelimit-* headers and its primary and secondary limits, a generic
// 429 with Retry-After, transient 503s, a revoked token, a 502 on a
// non-idempotent payment), and a seed of scopes and operations that walks a
// newcomer through every state within a minute. It talks to pacer only
// through the scheduler's Service, like any client would.
//
// The simulated provider is a plain net/http server; its windows and Date
// headers follow the injected clock, so tests drive it with a mock clock.
package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// The simulated provider's limits: small, so a demo hits them at once.
const (
	// GitHubLimit is the simulated GitHub budget per GitHubWindow.
	GitHubLimit = 5
	// GitHubWindow is the window of the simulated GitHub budget.
	GitHubWindow = 20 * time.Second
	// GitHubSecondaryEvery makes every n-th issue creation hit GitHub's
	// secondary rate limit (403 with retry-after).
	GitHubSecondaryEvery = 3
	// GitHubSecondaryRetryAfter is the retry-after of a secondary limit.
	GitHubSecondaryRetryAfter = 10
	// ShopLimit is the simulated shop's budget per ShopWindow; beyond it
	// the shop answers 429 with Retry-After and no other rate headers.
	ShopLimit = 4
	// ShopWindow is the window of the simulated shop's budget.
	ShopWindow = 15 * time.Second
	// FlakyFailures is how many 503s a /shop/flaky/… path answers before
	// it succeeds.
	FlakyFailures = 2
)

// The credentials the simulated provider accepts. They are not secrets:
// the demo provider listens on loopback only and exists for the demo.
const (
	GitHubToken   = "demo-github-token"
	ShopKeyHeader = "X-Shop-Key"
	ShopKey       = "demo-shop-key"
	PaymentsToken = "demo-payments-token"
	// RevokedToken is the CRM's token; the CRM refuses it (401): it was
	// revoked.
	RevokedToken = "demo-revoked-token"
)

// Provider is the simulated provider. Its routes, by path prefix:
//
//	/github/…    GitHub REST look-alike: bearer GitHubToken; x-ratelimit-limit,
//	             -remaining, -reset (epoch seconds), -used and -resource on
//	             every answer; 403 "API rate limit exceeded" with remaining 0
//	             past GitHubLimit per GitHubWindow; POST …/issues without a
//	             "title" is 422 Validation Failed; every GitHubSecondaryEvery-th
//	             issue creation is a 403 secondary rate limit with retry-after.
//	/shop/…      generic: header ShopKeyHeader: ShopKey; 429 with Retry-After
//	             (seconds) past ShopLimit per ShopWindow; /shop/flaky/… answers
//	             503 FlakyFailures times per path, then 200.
//	/payments/…  generic: bearer PaymentsToken; POST /payments/charges is a
//	             502 (the charge may or may not have happened); POST
//	             /payments/refunds is a 502 the first time an Idempotency-Key
//	             is seen and 201 when the same key comes again; reads are 200.
//	/crm/…       generic: every request is 401, the token was revoked.
//
// It is safe for concurrent use.
type Provider struct {
	clock clock.Clock

	mu           sync.Mutex
	githubWindow time.Time // start of the current GitHub window
	githubUsed   int
	issues       int // issue creations seen, for the secondary limit
	shopWindow   time.Time
	shopUsed     int
	flaky        map[string]int // path → 503s answered
	refundKeys   map[string]int // Idempotency-Key → times seen

	srv  *http.Server
	ln   net.Listener
	done chan error
}

// NewProvider returns the simulated provider as an http.Handler, without
// listening; see Start.
func NewProvider(clk clock.Clock) *Provider {
	return &Provider{clock: clk, flaky: map[string]int{}, refundKeys: map[string]int{}}
}

// Start returns a simulated provider listening on a free port of
// 127.0.0.1, serving in the background until Close.
func Start(clk clock.Clock) (*Provider, error) {
	p := NewProvider(clk)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start demo provider: %w", err)
	}
	p.ln = ln
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	p.done = make(chan error, 1)
	go func() { p.done <- p.srv.Serve(ln) }()
	return p, nil
}

// URL is the base URL of a started provider ("http://127.0.0.1:port").
func (p *Provider) URL() string {
	if p.ln == nil {
		return ""
	}
	return "http://" + p.ln.Addr().String()
}

// Close stops a started provider; requests in flight are cut off.
func (p *Provider) Close() error {
	if p.srv == nil {
		return nil
	}
	err := p.srv.Close()
	if serveErr := <-p.done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("stop demo provider: %w", err)
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	now := p.clock.Now().UTC()
	w.Header().Set("Date", now.Format(http.TimeFormat))
	switch prefix, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); prefix {
	case "github":
		p.github(w, r, body, now)
	case "shop":
		p.shop(w, r, now)
	case "payments":
		p.payments(w, r)
	case "crm":
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_token", "message": "this access token was revoked"})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
}

func (p *Provider) github(w http.ResponseWriter, r *http.Request, body []byte, now time.Time) {
	if r.Header.Get("Authorization") != "Bearer "+GitHubToken {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
		return
	}
	p.mu.Lock()
	if start := now.Truncate(GitHubWindow); !start.Equal(p.githubWindow) {
		p.githubWindow, p.githubUsed = start, 0
	}
	exhausted := p.githubUsed >= GitHubLimit
	if !exhausted {
		p.githubUsed++
	}
	used, reset := p.githubUsed, p.githubWindow.Add(GitHubWindow)
	issue := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/issues")
	secondary := false
	if issue && !exhausted {
		p.issues++
		secondary = p.issues%GitHubSecondaryEvery == 0
	}
	p.mu.Unlock()

	h := w.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(GitHubLimit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(GitHubLimit-used))
	h.Set("X-Ratelimit-Used", strconv.Itoa(used))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
	switch {
	case exhausted:
		h.Set("X-Ratelimit-Remaining", "0")
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "API rate limit exceeded for installation ID 1. (pacer demo)", "documentation_url": "https://docs.github.com/rest/rate-limit"})
	case secondary:
		h.Set("Retry-After", strconv.Itoa(GitHubSecondaryRetryAfter))
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. (pacer demo)"})
	case issue:
		var in struct {
			Title string `json:"title"`
		}
		if json.Unmarshal(body, &in) != nil || in.Title == "" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
				"errors": []any{map[string]any{"resource": "Issue", "field": "title", "code": "missing_field"}}})
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"number": used, "title": in.Title, "state": "open"})
	case r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"full_name": strings.TrimPrefix(r.URL.Path, "/github/repos/"), "private": false})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	}
}

func (p *Provider) shop(w http.ResponseWriter, r *http.Request, now time.Time) {
	if r.Header.Get(ShopKeyHeader) != ShopKey {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unknown shop key"})
		return
	}
	p.mu.Lock()
	if start := now.Truncate(ShopWindow); !start.Equal(p.shopWindow) {
		p.shopWindow, p.shopUsed = start, 0
	}
	limited := p.shopUsed >= ShopLimit
	if !limited {
		p.shopUsed++
	}
	retryAfter := int(p.shopWindow.Add(ShopWindow).Sub(now).Round(time.Second) / time.Second)
	flakyLeft := false
	if !limited && strings.HasPrefix(r.URL.Path, "/shop/flaky/") && p.flaky[r.URL.Path] < FlakyFailures {
		p.flaky[r.URL.Path]++
		flakyLeft = true
	}
	p.mu.Unlock()
	switch {
	case limited:
		w.Header().Set("Retry-After", strconv.Itoa(max(retryAfter, 1)))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "too many requests"})
	case flakyLeft:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the shop is briefly unavailable"})
	case r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"order": strings.TrimPrefix(r.URL.Path, "/shop/orders/"), "status": "paid"})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"synced": true})
	}
}

func (p *Provider) payments(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+PaymentsToken {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid api key"})
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/payments/charges":
		// The gateway timed out talking to the bank: the charge may have
		// gone through.
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "upstream timeout"})
	case r.Method == http.MethodPost && r.URL.Path == "/payments/refunds":
		key := r.Header.Get("Idempotency-Key")
		p.mu.Lock()
		seen := 0
		if key != "" {
			seen = p.refundKeys[key]
			p.refundKeys[key]++
		}
		p.mu.Unlock()
		if seen == 0 {
			writeJSON(w, http.StatusBadGateway, map[string]any{"error": "upstream timeout"})
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"refund": key, "status": "succeeded"})
	case r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"charge": strings.TrimPrefix(r.URL.Path, "/payments/charges/"), "status": "succeeded"})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // cannot fail: plain values
}
