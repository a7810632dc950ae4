package scheduler

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"golang.org/x/oauth2"

	"pacer/providers"
)

// Token keeping (design §13).
const (
	// refreshAhead is the most a token is renewed before it would become
	// unusable; a short-lived token is renewed a tenth of its lifetime
	// ahead instead.
	refreshAhead = time.Minute
	// tokenBackoffBase and tokenBackoffMax bound the pause of a scope
	// whose token endpoint failed (429, 5xx, no answer) without a
	// Retry-After: it doubles with each failure in a row.
	tokenBackoffBase = time.Second
	tokenBackoffMax  = 5 * time.Minute
	// keepFreshFor is how long after its last send a scope's token is
	// still renewed ahead of expiry without sends (keepFresh): a scope
	// quiet for less finds a usable token at its next send; one quiet for
	// longer renews at its next send (tokens are not kept alive for no one).
	keepFreshFor = time.Hour
	// tokenPoll is how often a process waiting for another's refresh
	// looks for its token.
	tokenPoll = 250 * time.Millisecond
	// maxRefreshReason bounds the token endpoint's words kept in a
	// refresh result (and an operation's detail).
	maxRefreshReason = 300
	// Refresh results as metrics count them.
	refreshResultOK      = "ok"
	refreshResultRevoked = "revoked"
	refreshResultBackoff = "backoff"
)

// revokingCodes are the token endpoint's errors (RFC 6749 §5.2) that no
// retry mends: the grant or the client is refused.
var revokingCodes = map[string]bool{"invalid_grant": true, "invalid_client": true, "unauthorized_client": true,
	"invalid_request": true, "invalid_scope": true, "unsupported_grant_type": true}

// tokenKeeper keeps the access tokens of the scopes with renewing grants
// fresh: the one place tokens are obtained, cached and renewed. One
// refresh per scope runs at a time: in this process a flight that every
// worker needing it waits for; across processes a lease on the scope's
// token row in the store. A token is renewed ahead of expiry (refreshDue),
// in the background while it is still usable, so sends do not wait; no
// send gets a token that expires within the request timeout.
type tokenKeeper struct {
	parent context.Context
	store  Store
	clock  clock.Clock
	x      *exchanger
	// requestTimeout is how long a token must outlive its send; timeout
	// bounds one exchange with the token endpoint.
	requestTimeout, timeout time.Duration
	log                     *slog.Logger
	observer                Observer

	// holder names this keeper's leases; seq makes each lease's name
	// unique, so a finish is fenced on the lease it was made under.
	holder string
	seq    atomic.Int64

	mu     sync.Mutex
	scopes map[string]*scopeTokens
	// flights counts refreshes running, for wait (tests, shutdown).
	flights sync.WaitGroup
}

// scopeTokens is what the keeper knows of one scope's grant.
type scopeTokens struct {
	// grant is the fingerprint of the credentials the entry is for.
	grant string
	cur   *Token
	// flight is the refresh running; nil when none.
	flight *tokenFlight
	// failures counts refreshes in a row that failed for a while (429,
	// 5xx, no answer): the next pause doubles.
	failures int
	// retryAt is when a refresh ahead of expiry may be tried again after
	// one failed: sends going on with the current token do not hammer an
	// endpoint that is failing.
	retryAt time.Time
	// revoked says the last refresh was refused for good: nothing renews
	// the token in the background until the credentials change.
	revoked bool
	// scope is the scope as its last send saw it, and usedAt when: what
	// keepFresh renews the token for.
	scope  Scope
	usedAt time.Time
}

// tokenFlight is one refresh that the workers needing it wait for.
type tokenFlight struct {
	done chan struct{}
	tok  Token
	fail *tokenFailure
}

// tokenFailure is why a token could not be had for a send.
type tokenFailure struct {
	// revoked is a refusal no retry mends: the scope is held authRevoked.
	revoked bool
	// busy is another process's refresh still running, or the store
	// failing: the operation waits until until, the scope is not paused.
	busy  bool
	until time.Time
	// Otherwise the endpoint failed for a while: the scope pauses for
	// hint (the endpoint's Retry-After) or the keeper's backoff, whichever
	// is later (outcome). status is the endpoint's answer; 0 for none.
	status int
	hint   providers.Hint
	detail string
}

// newTokenKeeper returns the keeper of the engine's tokens.
// Its refreshes run under parent: they end when it does.
func newTokenKeeper(parent context.Context, store Store, clk clock.Clock, cfg EngineConfig) *tokenKeeper {
	var id [6]byte
	_, _ = crand.Read(id[:])
	// The token endpoint's redirects are not followed: a 307 would send
	// the client secret on to wherever it points.
	client := *cfg.Client
	client.CheckRedirect = useLastResponse
	return &tokenKeeper{
		parent: parent, store: store, clock: clk, x: &exchanger{client: &client, userAgent: cfg.UserAgent},
		requestTimeout: cfg.RequestTimeout, timeout: cfg.RequestTimeout, log: cfg.Logger, observer: cfg.Observer,
		holder: hex.EncodeToString(id[:]), scopes: map[string]*scopeTokens{},
	}
}

// usable reports whether t may be sent at now: it does not expire within
// the request timeout.
func (k *tokenKeeper) usable(t *Token, now time.Time) bool {
	return t != nil && t.AccessToken != "" && (t.ExpiresAt.IsZero() || t.ExpiresAt.After(now.Add(k.requestTimeout)))
}

// refreshDue reports whether t should be renewed at now: it becomes
// unusable within min(refreshAhead, a tenth of its lifetime).
func (k *tokenKeeper) refreshDue(t *Token, now time.Time) bool {
	if t.ExpiresAt.IsZero() {
		return false
	}
	ahead := min(refreshAhead, t.ExpiresAt.Sub(t.IssuedAt)/10)
	return !t.ExpiresAt.After(now.Add(k.requestTimeout + ahead))
}

// entry returns the scope's entry for the grant fingerprinted grant; a
// new one when the credentials changed. Called with k.mu held.
func (k *tokenKeeper) entry(scope, grant string) *scopeTokens {
	st := k.scopes[scope]
	if st == nil || st.grant != grant {
		st = &scopeTokens{grant: grant}
		k.scopes[scope] = st
	}
	return st
}

// token returns the access token sc's request is sent with: the current
// one while usable (renewed in the background once due), else a new one
// (fresh is then true: a provider's refusal of it is a real revocation).
func (k *tokenKeeper) token(ctx context.Context, sc Scope) (tok Token, fresh bool, fail *tokenFailure) {
	grant := GrantFingerprint(sc.Credentials)
	k.mu.Lock()
	cur := k.entry(sc.Name, grant).cur
	k.mu.Unlock()
	if cur == nil {
		state, err := k.store.LoadToken(k.parent, sc.Name)
		if err != nil {
			return Token{}, false, k.busy(fmt.Sprintf("token not read: %v", err), k.clock.Now().Add(tokenBackoffBase))
		}
		if t := state.Token; t != nil && t.Grant == grant {
			cur = k.adopt(sc.Name, grant, t)
		}
	}
	now := k.clock.Now()
	k.mu.Lock()
	st := k.entry(sc.Name, grant)
	st.scope, st.usedAt = sc, now
	retryAt := st.retryAt
	k.mu.Unlock()
	if k.usable(cur, now) {
		if k.refreshDue(cur, now) && !now.Before(retryAt) {
			k.start(sc, grant, cur) // in the background: this send goes with cur
		}
		return *cur, false, nil
	}
	tok, fail = k.await(ctx, k.start(sc, grant, cur))
	return tok, fail == nil, fail
}

// renew answers a provider's refusal (401) of used: the current token
// when another refresh replaced used meanwhile, else a new one.
func (k *tokenKeeper) renew(ctx context.Context, sc Scope, used Token) (Token, *tokenFailure) {
	grant := GrantFingerprint(sc.Credentials)
	k.mu.Lock()
	st := k.entry(sc.Name, grant)
	cur := st.cur
	if cur != nil && cur.AccessToken == used.AccessToken {
		st.cur = nil // refused: never handed out again
	}
	k.mu.Unlock()
	if cur != nil && cur.AccessToken != used.AccessToken && k.usable(cur, k.clock.Now()) {
		return *cur, nil
	}
	return k.await(ctx, k.start(sc, grant, &used))
}

// keepFresh starts, in the background, the renewal of each token due for
// it (refreshDue) whose scope sent within keepFreshFor, unless its last
// refresh failed (until its backoff ends) or was refused for good, or its
// grant is no longer the one stored: a send after a quiet spell does not
// wait for a token either.
func (k *tokenKeeper) keepFresh(now time.Time) {
	type due struct {
		sc    Scope
		grant string
		cur   *Token
	}
	var renew []due
	k.mu.Lock()
	for _, st := range k.scopes {
		if st.cur != nil && st.flight == nil && !st.revoked && !st.usedAt.IsZero() && now.Sub(st.usedAt) <= keepFreshFor &&
			!now.Before(st.retryAt) && k.refreshDue(st.cur, now) {
			renew = append(renew, due{st.scope, st.grant, st.cur})
		}
	}
	k.mu.Unlock()
	for _, d := range renew {
		// The scope as its last send saw it may be stale: credentials put
		// since forget the stored token (PutScope), and a grant that is
		// no longer the scope's is not renewed.
		state, err := k.store.LoadToken(k.parent, d.sc.Name)
		if err != nil || state.Token == nil || state.Token.Grant != d.grant {
			continue
		}
		k.start(d.sc, d.grant, d.cur)
	}
}

// adopt makes t the scope's current token unless a refresh of this
// process set a newer one, and returns the current one.
func (k *tokenKeeper) adopt(scope, grant string, t *Token) *Token {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.entry(scope, grant)
	if st.cur == nil || st.cur.IssuedAt.Before(t.IssuedAt) {
		st.cur = t
	}
	return st.cur
}

// start returns the scope's refresh flight, starting one to replace
// stale (nil when there is no token yet) unless one is running.
func (k *tokenKeeper) start(sc Scope, grant string, stale *Token) *tokenFlight {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.entry(sc.Name, grant)
	if st.flight != nil {
		return st.flight
	}
	f := &tokenFlight{done: make(chan struct{})}
	st.flight = f
	k.flights.Add(1)
	go k.fly(sc, grant, st, f, stale)
	return f
}

// await waits for f, or for ctx to end.
func (k *tokenKeeper) await(ctx context.Context, f *tokenFlight) (Token, *tokenFailure) {
	select {
	case <-f.done:
		return f.tok, f.fail
	case <-ctx.Done():
		return Token{}, k.busy("the token refresh did not end before the request's deadline", k.clock.Now().Add(tokenBackoffBase))
	}
}

// wait waits for the refreshes running to end.
func (k *tokenKeeper) wait() { k.flights.Wait() }

// fly makes the refresh f, bounded by the keeper's timeout, on its own
// context: a waiter that gives up does not end it for the others.
func (k *tokenKeeper) fly(sc Scope, grant string, st *scopeTokens, f *tokenFlight, stale *Token) {
	defer k.flights.Done()
	ctx, cancel := k.clock.WithTimeout(k.parent, k.timeout)
	defer cancel()
	tok, fail := k.refresh(ctx, sc, grant, stale)
	k.mu.Lock()
	switch {
	case fail == nil:
		if st.cur == nil || !st.cur.IssuedAt.After(tok.IssuedAt) {
			st.cur = &tok
		}
		st.failures, st.retryAt, st.revoked = 0, time.Time{}, false
	case fail.busy:
	default:
		st.revoked = fail.revoked
		if !fail.revoked {
			st.failures++
		}
		st.retryAt = k.clock.Now().Add(tokenBackoff(max(st.failures-1, 0)))
	}
	st.flight = nil
	k.mu.Unlock()
	f.tok, f.fail = tok, fail
	close(f.done)
}

// refresh obtains a token to replace stale under the scope's lease: the
// token another process stored meanwhile, or a new one from the token
// endpoint. While another process holds the lease it waits for that
// one's token, polling, until ctx ends.
func (k *tokenKeeper) refresh(ctx context.Context, sc Scope, grant string, stale *Token) (Token, *tokenFailure) {
	for {
		now := k.clock.Now()
		holder := k.holder + ":" + strconv.FormatInt(k.seq.Add(1), 10)
		state, leased, err := k.store.LeaseTokenRefresh(k.parent, sc.Name, holder, now, now.Add(k.timeout+LeaseMargin))
		if err != nil {
			return Token{}, k.busy(fmt.Sprintf("token refresh lease not taken: %v", err), now.Add(tokenBackoffBase))
		}
		if t := state.Token; t != nil && t.Grant == grant && (stale == nil || t.AccessToken != stale.AccessToken) && k.usable(t, now) {
			if leased { // another refreshed meanwhile: nothing to ask
				k.finish(sc.Name, holder, TokenRefresh{At: now})
			}
			return *t, nil
		}
		if leased {
			return k.exchange(ctx, sc, grant, holder, state)
		}
		select {
		case <-ctx.Done():
			return Token{}, k.busy("another process's token refresh did not end in time", state.LeaseUntil)
		case <-k.clock.After(tokenPoll):
		}
	}
}

// exchange asks the token endpoint for a new token under holder's lease
// and records the result.
func (k *tokenKeeper) exchange(ctx context.Context, sc Scope, grant, holder string, state TokenState) (Token, *tokenFailure) {
	c := sc.Credentials
	refreshToken := c.RefreshToken
	if t := state.Token; t != nil && t.Grant == grant && t.RefreshToken != "" {
		refreshToken = t.RefreshToken // rotated: the grant's own is spent
	}
	start := k.clock.Now()
	tok, err := k.x.exchange(ctx, c, sc.BaseURL, refreshToken, start)
	end := k.clock.Now()
	if err != nil {
		red := c
		red.CurrentRefreshToken = refreshToken
		fail := k.classify(err, newRedactor(red), end)
		k.finish(sc.Name, holder, TokenRefresh{At: end, Result: fail.detail})
		result := refreshResultBackoff
		if fail.revoked {
			result = refreshResultRevoked
		}
		k.observer.ObserveTokenRefresh(sc.Provider, result)
		k.log.Warn("token refresh failed", "scope", sc.Name, "result", fail.detail)
		return Token{}, fail
	}
	tok.Grant = grant
	if tok.RefreshToken == "" && refreshToken != c.RefreshToken {
		tok.RefreshToken = refreshToken // still the rotated one
	}
	k.finish(sc.Name, holder, TokenRefresh{At: end, Token: &tok, Result: RefreshOK})
	k.observer.ObserveTokenRefresh(sc.Provider, refreshResultOK)
	return tok, nil
}

// finish records a refresh's end; a failure to record it is logged (the
// token obtained is still used by this process). The store is called
// under the keeper's parent context, as every store call of the keeper
// is: a refresh's deadline bounds its exchange, not the record of what
// it obtained (a rotated refresh token must not be lost to a deadline).
func (k *tokenKeeper) finish(scope, holder string, r TokenRefresh) {
	ok, err := k.store.FinishTokenRefresh(k.parent, scope, holder, r)
	switch {
	case err != nil:
		k.log.Error("token refresh not recorded", "scope", scope, "err", err)
	case !ok:
		k.log.Warn("token refresh not recorded: its lease was lost or the credentials were replaced", "scope", scope)
	}
}

// busy is a failure that makes an operation wait until until, its scope
// not paused.
func (k *tokenKeeper) busy(detail string, until time.Time) *tokenFailure {
	return &tokenFailure{busy: true, until: until, detail: detail}
}

// classify says what a failed exchange means at now (design §13): a
// refusal for good (invalid_grant, invalid_client, unauthorized_client,
// 401, any other 4xx) holds the scope; 429, 5xx and no answer pause it,
// for the endpoint's Retry-After or a doubling backoff. The endpoint's
// words pass through red and are bounded.
func (k *tokenKeeper) classify(err error, red *redactor, now time.Time) *tokenFailure {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		return &tokenFailure{detail: red.Cut("token endpoint unreachable: "+red.Error(err).Error(), maxRefreshReason)}
	}
	status := re.Response.StatusCode
	code, desc := stripControls(re.ErrorCode), red.String(re.ErrorDescription)
	words := "HTTP " + strconv.Itoa(status)
	if code != "" {
		words += ": " + code
	}
	if desc != "" {
		words += ": " + desc
	}
	f := &tokenFailure{status: status, detail: red.Cut("token endpoint refused the grant: "+words, maxRefreshReason)}
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500 || code == "temporarily_unavailable":
		f.detail = red.Cut("token endpoint unavailable: "+words, maxRefreshReason)
		// The generic profile reads Retry-After (seconds or a date,
		// against the answer's Date): the one reading of it.
		out := providers.NewGeneric(providers.Options{}).Classify(providers.Exchange{Method: http.MethodPost, Response: re.Response, Body: nil, Now: now})
		f.hint = out.Hint
		f.hint.Raw, f.hint.Note = red.String(f.hint.Raw), red.String(f.hint.Note)
	case revokingCodes[code] || status == http.StatusUnauthorized || (status >= 400 && status < 500):
		f.revoked = true
	default: // an error code at 2xx that says nothing of permanence
		f.detail = red.Cut("token endpoint failed: "+words, maxRefreshReason)
	}
	return f
}

// backoff is the pause after failures refreshes in a row failed for a while.
func tokenBackoff(failures int) time.Duration {
	if failures > 20 {
		return tokenBackoffMax
	}
	return min(tokenBackoffBase<<failures, tokenBackoffMax)
}

// outcome is what the failure f of sc's token means for the operation
// claimed, at now, as a provider's answer would say it: authRevoked (the
// scope held), or a rate limit of the scope (paused until the endpoint's
// hint or the backoff, not counting as an attempt).
func (k *tokenKeeper) outcome(sc Scope, f *tokenFailure, now time.Time) providers.Outcome {
	if f.revoked {
		return providers.Outcome{Class: providers.ClassAuthRevoked, Status: f.status, Reason: "token-endpoint", Detail: f.detail}
	}
	k.mu.Lock()
	failures := k.entry(sc.Name, GrantFingerprint(sc.Credentials)).failures
	k.mu.Unlock()
	hint := f.hint
	backoff := now.Add(tokenBackoff(max(failures-1, 0)))
	if !hint.Usable() || hint.At.Before(backoff) {
		hint = providers.Hint{Source: "token-endpoint-backoff", Raw: tokenBackoff(max(failures-1, 0)).String(), At: backoff}
	}
	return providers.Outcome{Class: providers.ClassRateLimited, Status: f.status, Hint: hint, Reason: "token-endpoint", Detail: f.detail}
}
