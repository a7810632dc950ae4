package httpapi

import (
	"context"
	"strconv"
	"sync"
	"time"

	staffrules "pacer/internal/staff"
)

// Limits on failed sign-ins: at most SignInFailuresPerUser per account name
// and SignInFailuresPerClient per client address within SignInWindow.
// Once a limit is reached, sign-ins for that name or from that address are
// refused (429) until the oldest failure leaves the window, without the
// password being checked. Each sign-in reserves its failure before the
// password is checked (a success gives it back), so the limits hold however
// many attempts arrive at once.
const (
	SignInFailuresPerUser   = 5
	SignInFailuresPerClient = 20
	SignInWindow            = 15 * time.Minute
)

// SignInThrottle counts failed sign-ins per key ("user:NAME",
// "client:ADDR") in a sliding window, on the times it is given (the
// scheduler's clock), and refuses a key that reached its limit (see
// SignInFailuresPerUser). Config.Throttle nil means one in the process's
// memory; processes that share a database share one (pgstore's), so that
// the limits hold across all of them. It is safe for concurrent use.
type SignInThrottle interface {
	// Reserve counts a failed sign-in at now for each of keys before the
	// password is checked, in one step with the check of the keys'
	// limits within window: when one is blocked it counts nothing and
	// returns how long until all of keys may try again, else 0.
	Reserve(ctx context.Context, now time.Time, window time.Duration, keys []ThrottleKey) (time.Duration, error)
	// Succeed ends a reserved sign-in that succeeded: every failure of
	// the account's key user is forgotten, and the reservations made at
	// now for others given back (one each).
	Succeed(ctx context.Context, now time.Time, user string, others []string) error
	// Release gives back the reservations made at now for keys (one
	// each): the sign-in was not decided.
	Release(ctx context.Context, now time.Time, keys []string) error
}

// ThrottleKey is a key of SignInThrottle.Reserve with its limit
// (package staff's, where the stores find it).
type ThrottleKey = staffrules.ThrottleKey

// signInLimit is the limit of a throttle key: SignInFailuresPerUser for an
// account name, SignInFailuresPerClient for a client address. It is the
// one definition, for every SignInThrottle.
func signInLimit(key string) int {
	if len(key) > 5 && key[:5] == "user:" {
		return SignInFailuresPerUser
	}
	return SignInFailuresPerClient
}

// throttleKeys are keys with their limits (signInLimit).
func throttleKeys(keys []string) []ThrottleKey {
	out := make([]ThrottleKey, len(keys))
	for i, k := range keys {
		out[i] = ThrottleKey{Name: k, Limit: signInLimit(k)}
	}
	return out
}

// memoryThrottle is the SignInThrottle of one process: a signInThrottle
// behind the interface (its window is SignInWindow, its limits
// signInLimit's).
type memoryThrottle struct{ t *signInThrottle }

// Reserve implements SignInThrottle.
func (m memoryThrottle) Reserve(_ context.Context, now time.Time, _ time.Duration, keys []ThrottleKey) (time.Duration, error) {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name
	}
	return m.t.reserve(now, names...), nil
}

// Succeed implements SignInThrottle.
func (m memoryThrottle) Succeed(_ context.Context, now time.Time, user string, others []string) error {
	m.t.succeed(now, user, others...)
	return nil
}

// Release implements SignInThrottle.
func (m memoryThrottle) Release(_ context.Context, now time.Time, keys []string) error {
	m.t.release(now, keys...)
	return nil
}

// maxThrottleKeys bounds the memory of the sign-in throttle.
const maxThrottleKeys = 10000

// signInThrottle counts failed sign-ins per key ("user:NAME",
// "client:ADDR") in a sliding window, on the times it is given (the
// scheduler's clock). It is safe for concurrent use.
type signInThrottle struct {
	mu       sync.Mutex
	window   time.Duration
	failures map[string][]time.Time // newest last; at most the key's limit
}

// newSignInThrottle returns an empty throttle.
func newSignInThrottle() *signInThrottle {
	return &signInThrottle{window: SignInWindow, failures: map[string][]time.Time{}}
}

// limit is the number of failures within the window that blocks key.
func (t *signInThrottle) limit(key string) int { return signInLimit(key) }

// reserve counts a failed sign-in at now for each of keys before the
// password is checked, in one step with the check of the limits: it returns
// how long until any of keys may try again (and reserves nothing) when one
// is blocked, else 0. A sign-in that succeeds gives its reservation back
// (succeed); one the store could not check, too (release).
func (t *signInThrottle) reserve(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		fs := t.recent(k, now)
		if n := t.limit(k); len(fs) >= n {
			wait = max(wait, fs[len(fs)-n].Add(t.window).Sub(now))
		}
	}
	if wait > 0 {
		return wait
	}
	t.fail(now, keys...)
	return 0
}

// fail records a failed sign-in for each of keys. Callers hold mu.
func (t *signInThrottle) fail(now time.Time, keys ...string) {
	for _, k := range keys {
		fs := t.recent(k, now)
		if fs == nil && len(t.failures) >= maxThrottleKeys {
			t.evict(now)
		}
		fs = append(fs, now)
		if n := t.limit(k); len(fs) > n {
			fs = fs[len(fs)-n:]
		}
		t.failures[k] = fs
	}
}

// succeed ends a reserved sign-in that succeeded: the account's failures
// are forgotten, and the other keys' reservations made at now given back.
func (t *signInThrottle) succeed(now time.Time, user string, others ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.failures, user)
	t.unreserve(now, others...)
}

// release gives back the reservations made at now for keys: the sign-in
// was not decided.
func (t *signInThrottle) release(now time.Time, keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unreserve(now, keys...)
}

// unreserve drops one failure recorded at now from each of keys. Callers
// hold mu.
func (t *signInThrottle) unreserve(now time.Time, keys ...string) {
	for _, k := range keys {
		fs := t.failures[k]
		for i := len(fs) - 1; i >= 0; i-- {
			if fs[i].Equal(now) {
				fs = append(fs[:i:i], fs[i+1:]...)
				break
			}
		}
		if len(fs) == 0 {
			delete(t.failures, k)
		} else {
			t.failures[k] = fs
		}
	}
}

// recent returns key's failures within the window, dropping older ones.
// Callers hold mu.
func (t *signInThrottle) recent(key string, now time.Time) []time.Time {
	fs := t.failures[key]
	i := 0
	for i < len(fs) && !fs[i].Add(t.window).After(now) {
		i++
	}
	if i == len(fs) {
		delete(t.failures, key)
		return nil
	}
	fs = fs[i:]
	t.failures[key] = fs
	return fs
}

// evict makes room for a new key: it drops every key with no failure in
// the window and, if that frees nothing, one arbitrary key. Callers hold
// mu.
func (t *signInThrottle) evict(now time.Time) {
	for k := range t.failures {
		t.recent(k, now)
	}
	if len(t.failures) < maxThrottleKeys {
		return
	}
	for k := range t.failures {
		delete(t.failures, k)
		return
	}
}

// retryAfterSeconds formats a wait for the Retry-After header, rounded up.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
