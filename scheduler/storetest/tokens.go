package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"pacer/scheduler"
)

// grant is the oauth2 grant of the token tests' scope.
var grant = scheduler.Credentials{Type: scheduler.CredentialOAuth2, TokenURL: "https://auth.example.com/token",
	ClientID: "client-1", ClientSecret: "client-secret-value", RefreshToken: "refresh-token-value"}

// testTokenRefreshLease is the contract of the token row (design §13):
// one holder of the refresh lease at a time until it ends or expires; a
// finish fenced on the lease; the token kept sealed and shown only by its
// times; replaced credentials forget it.
func testTokenRefreshLease(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{Credentials: grant})
	if _, err := d.LoadToken(ctx, "nope"); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("LoadToken of an unknown scope: %v, want ErrNotFound", err)
	}
	if _, _, err := d.LeaseTokenRefresh(ctx, "nope", "h", T0, T0.Add(time.Minute)); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("LeaseTokenRefresh of an unknown scope: %v, want ErrNotFound", err)
	}
	st, err := d.LoadToken(ctx, "a")
	if err != nil || st.Token != nil || st.LeaseHolder != "" {
		t.Fatalf("LoadToken before any = %+v, %v; want the zero state", st, err)
	}

	until := T0.Add(time.Minute)
	if _, ok, err := d.LeaseTokenRefresh(ctx, "a", "h1", T0, until); err != nil || !ok {
		t.Fatalf("first lease: %v, %v", ok, err)
	}
	if _, ok, err := d.LeaseTokenRefresh(ctx, "a", "h2", T0.Add(time.Second), T0.Add(time.Minute)); err != nil || ok {
		t.Fatalf("lease while h1's is live: %v, %v; want refused", ok, err)
	}
	if ok, err := d.FinishTokenRefresh(ctx, "a", "h2", scheduler.TokenRefresh{At: T0, Result: "ok"}); err != nil || ok {
		t.Fatalf("finish by a non-holder: %v, %v; want refused", ok, err)
	}
	tok := scheduler.Token{AccessToken: "access-token-value", RefreshToken: "rotated-refresh-value",
		IssuedAt: T0, ExpiresAt: T0.Add(time.Hour), Grant: scheduler.GrantFingerprint(grant)}
	if ok, err := d.FinishTokenRefresh(ctx, "a", "h1", scheduler.TokenRefresh{At: T0.Add(2 * time.Second), Token: &tok, Result: scheduler.RefreshOK}); err != nil || !ok {
		t.Fatalf("finish by the holder: %v, %v", ok, err)
	}
	st, err = d.LoadToken(ctx, "a")
	if err != nil || st.Token == nil || *st.Token != tok || st.LeaseHolder != "" || st.RefreshResult != scheduler.RefreshOK ||
		!st.RefreshedAt.Equal(T0.Add(2*time.Second)) || !st.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Fatalf("after the refresh: %+v (token %+v), %v", st, st.Token, err)
	}
	sc, err := d.GetScope(ctx, "a")
	if err != nil || !sc.Token.ExpiresAt.Equal(tok.ExpiresAt) || sc.Token.RefreshResult != "ok" || sc.Credentials.ClientSecret != "" {
		t.Fatalf("GetScope shows token %+v, credentials %v: %v", sc.Token, sc.Credentials, err)
	}
	list, err := d.ListScopes(ctx)
	if err != nil || len(list) != 1 || !list[0].Token.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Fatalf("ListScopes: %+v, %v", list, err)
	}

	// A lease that expired is taken over; the old holder's finish is
	// then refused.
	if _, ok, _ := d.LeaseTokenRefresh(ctx, "a", "h3", T0.Add(time.Minute), T0.Add(90*time.Second)); !ok {
		t.Fatal("h3 could not take the released lease")
	}
	st, ok, err := d.LeaseTokenRefresh(ctx, "a", "h4", T0.Add(90*time.Second), T0.Add(3*time.Minute))
	if err != nil || !ok || st.Token == nil || st.Token.AccessToken != tok.AccessToken {
		t.Fatalf("h4 after h3's lease expired: %v, %v, state %+v", ok, err, st)
	}
	if ok, _ := d.FinishTokenRefresh(ctx, "a", "h3", scheduler.TokenRefresh{At: T0, Result: "late"}); ok {
		t.Fatal("h3 finished under a lease h4 took over")
	}
	// A finish without a token or a result only releases the lease.
	if ok, _ := d.FinishTokenRefresh(ctx, "a", "h4", scheduler.TokenRefresh{At: T0.Add(100 * time.Second)}); !ok {
		t.Fatal("h4 could not release its lease")
	}
	if st, _ := d.LoadToken(ctx, "a"); st.RefreshResult != "ok" || st.Token == nil || st.LeaseHolder != "" {
		t.Fatalf("after a bare release: %+v", st)
	}

	// Counts: the token expires at T0+1h, within 5 minutes of T0+56m.
	if c, err := d.CountByState(ctx, T0); err != nil || c.TokensExpiring != 0 {
		t.Fatalf("CountByState at T0: %d, %v; want 0", c.TokensExpiring, err)
	}
	if c, err := d.CountByState(ctx, T0.Add(56*time.Minute)); err != nil || c.TokensExpiring != 1 {
		t.Fatalf("CountByState 4 minutes before expiry: %d, %v; want 1", c.TokensExpiring, err)
	}

	// New credentials forget the token and any lease under way.
	if _, ok, _ := d.LeaseTokenRefresh(ctx, "a", "h5", T0.Add(2*time.Minute), T0.Add(3*time.Minute)); !ok {
		t.Fatal("h5 could not take the lease")
	}
	same := PutScope(t, d, "a", ScopeOpts{Credentials: grant}) // same credentials: kept
	if same.Token.ExpiresAt.IsZero() {
		t.Fatal("a replace with the same credentials forgot the token")
	}
	other := grant
	other.RefreshToken = "another-refresh-token"
	if sc := PutScope(t, d, "a", ScopeOpts{Credentials: other}); sc.Token != (scheduler.TokenStatus{}) {
		t.Fatalf("new credentials kept the token status %+v", sc.Token)
	}
	if st, _ := d.LoadToken(ctx, "a"); st.Token != nil {
		t.Fatal("new credentials kept the token")
	}
	if ok, _ := d.FinishTokenRefresh(ctx, "a", "h5", scheduler.TokenRefresh{At: T0, Token: &tok, Result: "ok"}); ok {
		t.Fatal("a refresh of the old credentials was recorded after they were replaced")
	}
}

// testTokenRefreshLeaseIsExclusive races many holders for the lease at
// once: exactly one gets it.
func testTokenRefreshLeaseIsExclusive(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{Credentials: grant})
	const n = 8
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := d.LeaseTokenRefresh(ctx, "a", "holder-"+string(rune('a'+i)), T0, T0.Add(time.Minute))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				got++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got != 1 {
		t.Fatalf("%d of %d holders took the lease at once, want 1", got, n)
	}
}
