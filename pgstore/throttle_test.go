package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pacer/internal/pgtest"
	"pacer/internal/staff"
	"pacer/scheduler/storetest"
)

// reserver is the sign-in throttle's Reserve (httpapi.SignInThrottle).
type reserver interface {
	Reserve(ctx context.Context, now time.Time, window time.Duration, keys []staff.ThrottleKey) (time.Duration, error)
}

// The sign-in throttle on PostgreSQL keeps the in-memory one's rules
// (httpapi's TestSignInThrottle) across processes: failures counted by
// one store block the key on another, until the oldest leaves the window;
// a success forgets the account's failures and gives back the others'
// reservations; many sign-ins at once through two stores never count
// more than the limit.
func TestSignInThrottleAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	a, b := openStoreAt(t, url), openStoreAt(t, url)
	const window, limit = 15 * time.Minute, 5
	now := storetest.T0
	user := staff.ThrottleKey{Name: "user:alice", Limit: limit}
	client := staff.ThrottleKey{Name: "client:10.0.0.1", Limit: 20}
	reserve := func(s reserver, at time.Time, keys ...staff.ThrottleKey) time.Duration {
		t.Helper()
		w, err := s.Reserve(ctx, at, window, keys)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for i := range limit {
		if w := reserve([]reserver{a, b}[i%2], now.Add(time.Duration(i)*time.Minute), user, client); w != 0 {
			t.Fatalf("blocked after %d failures: %s", i, w)
		}
	}
	later := now.Add(5 * time.Minute)
	if w := reserve(b, later, user); w != window-5*time.Minute {
		t.Fatalf("wait %s, want %s (until the oldest failure leaves the window)", w, window-5*time.Minute)
	}
	bob := staff.ThrottleKey{Name: "user:bob", Limit: limit}
	if w := reserve(a, later, bob, client); w != 0 {
		t.Fatalf("bob blocked by alice's failures: %s", w)
	}
	if err := b.Succeed(ctx, later, bob.Name, []string{client.Name}); err != nil { // gives the client's reservation back
		t.Fatal(err)
	}
	for range 20 - limit - 1 {
		if w := reserve(a, later, client); w != 0 {
			t.Fatalf("client blocked before its limit: %s", w)
		}
	}
	if w := reserve(b, later, client); w != 0 {
		t.Fatalf("client blocked at 19 failures: bob's success gave nothing back (%s)", w)
	}
	if w := reserve(a, later, client); w == 0 {
		t.Fatal("client not blocked after 20 failures")
	}
	if err := a.Release(ctx, now.Add(window), []string{user.Name}); err != nil {
		t.Fatal(err)
	}
	if w := reserve(a, now.Add(window), user); w != 0 {
		t.Fatalf("still blocked %s after the window", w)
	}
	if err := b.Succeed(ctx, later, user.Name, nil); err != nil {
		t.Fatal(err)
	}
	if w := reserve(a, later, user); w != 0 {
		t.Fatalf("blocked after a success: %s", w)
	}

	t.Run("AtOnce", func(t *testing.T) {
		carol := staff.ThrottleKey{Name: "user:carol", Limit: limit}
		var (
			wg     sync.WaitGroup
			passed atomic.Int32
		)
		for i := range 40 {
			wg.Go(func() {
				s := []reserver{a, b}[i%2]
				w, err := s.Reserve(ctx, later, window, []staff.ThrottleKey{carol})
				if err != nil {
					t.Error(err)
				} else if w == 0 {
					passed.Add(1)
				}
			})
		}
		wg.Wait()
		if n := passed.Load(); n != limit {
			t.Fatalf("%d of 40 sign-ins at once let through, want %d", n, limit)
		}
	})
}
