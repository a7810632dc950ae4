package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/scheduler"
)

// The scope page of a renewing grant shows the grant, when its token
// expires and the last refresh with its result, never a secret.
func TestUI_ScopeShowsTheGrant(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"alice"}})
	ctx := context.Background()
	_, _, err := b.svc.PutScope(ctx, scheduler.ScopeInput{
		Name: "g", Provider: "google", BaseURL: "https://www.googleapis.com",
		Credentials: scheduler.Credentials{Type: scheduler.CredentialOAuth2, TokenURL: "https://oauth2.googleapis.com/token",
			ClientID: "app-client", ClientSecret: secretClient, RefreshToken: secretRefresh},
	}, "test")
	if err != nil {
		t.Fatal(err)
	}
	b.signIn("alice")
	wantIn(t, b.get("/ui/scopes/g"), http.StatusOK, "OAuth 2.0", "no token yet", "none yet")

	if _, ok, err := b.store.LeaseTokenRefresh(ctx, "g", "h", testNow, testNow.Add(time.Minute)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	tok := scheduler.Token{AccessToken: "access-token-77e1", RefreshToken: "rotated-refresh-0a9c", IssuedAt: testNow, ExpiresAt: testNow.Add(time.Hour)}
	refusal := "token endpoint refused the grant: HTTP 400: invalid_grant: Token has been expired or revoked."
	if _, err := b.store.FinishTokenRefresh(ctx, "g", "h", scheduler.TokenRefresh{At: testNow, Token: &tok, Result: refusal}); err != nil {
		t.Fatal(err)
	}
	p := b.get("/ui/scopes/g")
	wantIn(t, p, http.StatusOK, "Token expires", "2026-09-11T03:00:00Z", "Last refresh", "invalid_grant: Token has been expired or revoked.")
	for _, s := range []string{secretClient, secretRefresh, tok.AccessToken, tok.RefreshToken} {
		if strings.Contains(p.Body, s) {
			t.Fatalf("the scope page shows a secret %q", s)
		}
	}
}
