package demo_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/demo"
)

var t0 = time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)

func startProvider(t *testing.T) (*demo.Provider, *clock.Mock) {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(t0)
	p, err := demo.Start(clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") {
		t.Fatalf("demo provider at %s, want loopback", p.URL())
	}
	return p, clk
}

// call sends one request and returns the status, headers and body.
func call(t *testing.T, method, url string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestGitHubBudgetAndLimits(t *testing.T) {
	p, clk := startProvider(t)
	auth := map[string]string{"Authorization": "Bearer " + demo.GitHubToken}
	url := p.URL() + "/github/repos/acme/app"

	if st, _, _ := call(t, "GET", url, map[string]string{"Authorization": "Bearer nope"}, ""); st != 401 {
		t.Fatalf("wrong token: status %d, want 401", st)
	}
	reset := strconv.FormatInt(t0.Add(demo.GitHubWindow).Unix(), 10)
	for i := 1; i <= demo.GitHubLimit; i++ {
		st, h, _ := call(t, "GET", url, auth, "")
		if st != 200 {
			t.Fatalf("request %d: status %d, want 200", i, st)
		}
		if got, want := h.Get("X-Ratelimit-Remaining"), strconv.Itoa(demo.GitHubLimit-i); got != want {
			t.Errorf("request %d: remaining %s, want %s", i, got, want)
		}
		if h.Get("X-Ratelimit-Reset") != reset || h.Get("X-Ratelimit-Limit") != strconv.Itoa(demo.GitHubLimit) {
			t.Errorf("request %d: reset %s limit %s, want %s and %d", i, h.Get("X-Ratelimit-Reset"), h.Get("X-Ratelimit-Limit"), reset, demo.GitHubLimit)
		}
		if got, want := h.Get("Date"), t0.Format(http.TimeFormat); got != want {
			t.Errorf("Date %q, want the clock's %q", got, want)
		}
	}
	st, h, body := call(t, "GET", url, auth, "")
	if st != 403 || h.Get("X-Ratelimit-Remaining") != "0" || !strings.Contains(body, "rate limit exceeded") {
		t.Fatalf("past the budget: %d remaining %q %s; want 403, 0, rate limit exceeded", st, h.Get("X-Ratelimit-Remaining"), body)
	}
	clk.Add(demo.GitHubWindow)
	if st, h, _ := call(t, "GET", url, auth, ""); st != 200 || h.Get("X-Ratelimit-Remaining") != strconv.Itoa(demo.GitHubLimit-1) {
		t.Fatalf("next window: %d remaining %s; want 200 and a fresh budget", st, h.Get("X-Ratelimit-Remaining"))
	}

	issues := p.URL() + "/github/repos/acme/app/issues"
	if st, _, _ := call(t, "POST", issues, auth, `{"body":"no title"}`); st != 422 {
		t.Errorf("issue without title: status %d, want 422", st)
	}
	st, h, body = call(t, "POST", issues, auth, `{"title":"x"}`) // the 2nd creation in this window
	if st != 201 {
		t.Fatalf("issue: status %d, want 201 (%s)", st, body)
	}
	st, h, body = call(t, "POST", issues, auth, `{"title":"y"}`) // the 3rd: secondary limit
	if st != 403 || h.Get("Retry-After") != strconv.Itoa(demo.GitHubSecondaryRetryAfter) || !strings.Contains(body, "secondary rate limit") {
		t.Errorf("every %dth issue: %d retry-after %q %s; want a 403 secondary rate limit", demo.GitHubSecondaryEvery, st, h.Get("Retry-After"), body)
	}
}

func TestShopRetryAfterAndFlaky(t *testing.T) {
	p, clk := startProvider(t)
	key := map[string]string{demo.ShopKeyHeader: demo.ShopKey}
	if st, _, _ := call(t, "GET", p.URL()+"/shop/orders/1", nil, ""); st != 401 {
		t.Errorf("no key: status %d, want 401", st)
	}
	clk.Add(5 * time.Second)
	for i := range demo.ShopLimit {
		if st, _, _ := call(t, "GET", p.URL()+"/shop/orders/1", key, ""); st != 200 {
			t.Fatalf("order %d: status %d, want 200", i, st)
		}
	}
	st, h, _ := call(t, "GET", p.URL()+"/shop/orders/1", key, "")
	if st != 429 || h.Get("Retry-After") != "10" || h.Get("X-Ratelimit-Remaining") != "" {
		t.Fatalf("past the limit: %d Retry-After %q; want 429 with Retry-After 10 (the window's end) and no other rate headers", st, h.Get("Retry-After"))
	}
	clk.Add(10 * time.Second)
	for i := range demo.FlakyFailures {
		if st, _, _ := call(t, "POST", p.URL()+"/shop/flaky/a", key, `{}`); st != 503 {
			t.Fatalf("flaky %d: status %d, want 503", i, st)
		}
	}
	if st, _, _ := call(t, "POST", p.URL()+"/shop/flaky/a", key, `{}`); st != 200 {
		t.Errorf("flaky after %d failures: status %d, want 200", demo.FlakyFailures, st)
	}
}

func TestPaymentsAndRevokedCRM(t *testing.T) {
	p, _ := startProvider(t)
	auth := map[string]string{"Authorization": "Bearer " + demo.PaymentsToken}
	for range 2 {
		if st, _, _ := call(t, "POST", p.URL()+"/payments/charges", auth, `{"amount":1}`); st != 502 {
			t.Errorf("charge: status %d, want 502", st)
		}
	}
	keyed := map[string]string{"Authorization": "Bearer " + demo.PaymentsToken, "Idempotency-Key": "k1"}
	if st, _, _ := call(t, "POST", p.URL()+"/payments/refunds", keyed, `{}`); st != 502 {
		t.Errorf("first refund with a key: status %d, want 502", st)
	}
	if st, _, _ := call(t, "POST", p.URL()+"/payments/refunds", keyed, `{}`); st != 201 {
		t.Errorf("refund resent with the same key: status %d, want 201", st)
	}
	if st, _, _ := call(t, "GET", p.URL()+"/payments/charges/ch_1", auth, ""); st != 200 {
		t.Errorf("charge read: status %d, want 200", st)
	}
	crm := map[string]string{"Authorization": "Bearer " + demo.RevokedToken}
	if st, _, _ := call(t, "POST", p.URL()+"/crm/contacts", crm, `{}`); st != 401 {
		t.Errorf("crm: status %d, want 401", st)
	}
	if st, _, _ := call(t, "GET", p.URL()+"/elsewhere", nil, ""); st != 404 {
		t.Errorf("unknown path: status %d, want 404", st)
	}
}
