package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/scheduler"
)

func TestRedactPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/repos/acme/app/issues", "/repos/acme/app/issues"},
		{"/x?page=2&per_page=50", "/x?page=2&per_page=50"},
		{"/x?access_token=abc&page=2", "/x?access_token=REDACTED&page=2"},
		{"/x?API_KEY=abc&sig=1", "/x?API_KEY=REDACTED&sig=1"},
		{"/x?client_secret=s&password=p&auth=a&session_id=z", "/x?client_secret=REDACTED&password=REDACTED&auth=REDACTED&session_id=REDACTED"},
		{"/x?token", "/x?token"},
		{"/x?%74oken=abc", "/x?%74oken=REDACTED"},
	} {
		if got := redactPath(tc.in); got != tc.want {
			t.Errorf("redactPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactDetail(t *testing.T) {
	in := `Post "https://api.example.com/x?api_key=abc123&page=2": dial tcp: refused; see https://h/y?token=zz`
	want := `Post "https://api.example.com/x?api_key=REDACTED&page=2": dial tcp: refused; see https://h/y?token=REDACTED`
	if got := redactDetail(in); got != want {
		t.Fatalf("redactDetail\n got %q\nwant %q", got, want)
	}
}

func TestBreakablePath(t *testing.T) {
	got := string(breakablePath(`/a/<script>x</script>?q=1&key=s`))
	want := `/<wbr>a/<wbr>&lt;script&gt;x&lt;/<wbr>script&gt;?q=1&amp;<wbr>key=REDACTED`
	if got != want {
		t.Fatalf("breakablePath\n got %q\nwant %q", got, want)
	}
}

func TestRoughDuration(t *testing.T) {
	now := time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now, "now"},
		{now.Add(250 * time.Second), "in 4m 10s"},
		{now.Add(-3*time.Hour - 5*time.Minute), "3h 5m ago"},
		{now.Add(49 * time.Hour), "in 2d 1h"},
		{now.Add(24*time.Hour + 30*time.Second), "in 1d"},
	} {
		if got := relative(tc.at, now); got != tc.want {
			t.Errorf("relative(%s) = %q, want %q", tc.at.Sub(now), got, tc.want)
		}
	}
	if got := groupThousands(100000); got != "100,000" {
		t.Errorf("groupThousands = %q", got)
	}
}

func TestSignInThrottle(t *testing.T) {
	now := time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)
	th := newSignInThrottle()
	user, client := "user:alice", "client:10.0.0.1"
	for i := range SignInFailuresPerUser {
		if w := th.reserve(now.Add(time.Duration(i)*time.Minute), user, client); w != 0 {
			t.Fatalf("blocked after %d failures", i)
		}
	}
	later := now.Add(5 * time.Minute)
	if w := th.reserve(later, user); w != SignInWindow-5*time.Minute {
		t.Fatalf("wait %s, want %s (until the oldest failure leaves the window)", w, SignInWindow-5*time.Minute)
	}
	if w := th.reserve(later, "user:bob", client); w != 0 {
		t.Fatalf("bob blocked by alice's failures: %s", w)
	}
	th.succeed(later, "user:bob", client) // bob's success gives the client's reservation back
	if n := len(th.failures[client]); n != SignInFailuresPerUser {
		t.Fatalf("client has %d failures after bob's success, want %d", n, SignInFailuresPerUser)
	}
	th.release(now.Add(SignInWindow), user)
	if w := th.reserve(now.Add(SignInWindow), user); w != 0 {
		t.Fatalf("still blocked %s after the window", w)
	}
	th.succeed(later, user)
	if w := th.reserve(later, user); w != 0 {
		t.Fatalf("blocked after a success: %s", w)
	}

	t.Run("Bounded", func(t *testing.T) {
		th := newSignInThrottle()
		for i := range maxThrottleKeys + 100 {
			th.reserve(now, fmt.Sprintf("client:%d", i))
		}
		if n := len(th.failures); n > maxThrottleKeys {
			t.Fatalf("%d keys kept, want at most %d", n, maxThrottleKeys)
		}
	})
	if got := retryAfterSeconds(1500 * time.Millisecond); got != "2" {
		t.Fatalf("Retry-After %q", got)
	}
	if !strings.HasPrefix(safeNext("/ui/x"), "/ui/") || safeNext("//evil") != "/ui/" {
		t.Fatal("safeNext")
	}
}

// Every write the store rejects for want of room or permission, whatever
// the handler, is a 503 store-unavailable problem the client can act on.
func TestProblemForStoreUnavailable(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("enqueue: %w", scheduler.ErrStoreUnavailable),
		fmt.Errorf("put scope: %w", fmt.Errorf("commit: %w", scheduler.ErrStoreUnavailable)),
		withDetail(fmt.Errorf("cancel: %w", scheduler.ErrStoreUnavailable), "ignored"),
	} {
		p, internal := problemFor(err)
		if p.Status != 503 || p.Type != ProblemTypeStoreUnavailable || !internal || !strings.Contains(p.Detail, "nothing was stored") {
			t.Errorf("%v: %+v (internal %v)", err, p, internal)
		}
	}
}
