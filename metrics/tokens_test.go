package metrics_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// Renewing grants' metrics: refreshes by result, and the count of scopes
// whose token expires within 5 minutes, without a per-scope label.
func TestMetricsTokenRefreshes(t *testing.T) {
	b := setup(t)
	ts := pacertest.NewTokenServer(t, b.clock, "client-1", "client-secret-1234", 10*time.Minute)
	prov := httptest.NewServer(ts.Resource(nil))
	defer prov.Close()
	put := func(name, refresh string) {
		t.Helper()
		_, _, err := b.svc.PutScope(context.Background(), scheduler.ScopeInput{Name: name, Provider: "generic", BaseURL: prov.URL,
			Credentials: scheduler.Credentials{Type: scheduler.CredentialOAuth2, TokenURL: ts.TokenURL(), ClientID: ts.ClientID,
				ClientSecret: ts.ClientSecret, RefreshToken: refresh}}, "test")
		if err != nil {
			t.Fatal(err)
		}
	}
	put("good", ts.IssueRefreshToken())
	put("dead", "never-issued-refresh")
	b.enqueue(t, "good", "/ok", "op-1")
	b.enqueue(t, "dead", "/ok", "op-2")
	b.pass(t)
	s := b.scrape(t)
	want(t, s, `pacer_token_refreshes_total{provider="generic",result="ok"}`, 1)
	want(t, s, `pacer_token_refreshes_total{provider="generic",result="revoked"}`, 1)
	want(t, s, `pacer_tokens_expiring_soon`, 0)
	b.clock.Add(6 * time.Minute) // the 10-minute token has 4 left
	want(t, b.scrape(t), `pacer_tokens_expiring_soon`, 1)
}
