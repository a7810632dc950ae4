package scheduler

import (
	"context"
	"net/http"
	"time"

	"pacer/providers"
)

// withToken is c with the access token its request is sent with (and
// the grant's current refresh token, when rotated, so that both are
// redacted from what the provider answers).
func withToken(c Claim, t Token) Claim {
	c.Scope.Credentials.AccessToken = t.AccessToken
	c.Scope.Credentials.CurrentRefreshToken = ""
	if t.RefreshToken != c.Scope.Credentials.RefreshToken {
		c.Scope.Credentials.CurrentRefreshToken = t.RefreshToken
	}
	return c
}

// sendRenewing sends c for a scope whose grant renews its token (design
// §13): with the keeper's token, and when the provider answers 401 to a
// token that was not fresh (another refresh replaced it, or it was
// revoked early), once more at once with a renewed token, in the same
// attempt: a 401 applied nothing, so the resend keeps the request
// identity and counts no attempt. A 401 to a fresh token is the
// provider's answer. fail is set when no token could be had: nothing was
// sent.
func (e *Engine) sendRenewing(ctx context.Context, c Claim, profile providers.Profile) (sr sendResult, red *redactor, fail *tokenFailure) {
	tok, fresh, fail := e.tokens.token(ctx, c.Scope)
	if fail != nil {
		return sendResult{}, nil, fail
	}
	sent := withToken(c, tok)
	red = e.redactors.of(sent.Scope)
	sr = e.sender.send(ctx, sent, profile, red)
	if fresh || sr.result == nil || sr.result.Status != http.StatusUnauthorized {
		return sr, red, nil
	}
	renewed, fail := e.tokens.renew(ctx, c.Scope, tok)
	if fail != nil {
		// The 401 applied nothing: the endpoint's answer decides (a
		// refusal of the grant holds, a failure pauses, another process's
		// refresh still running makes the operation wait for it).
		return sendResult{}, red, fail
	}
	e.log.Info("provider refused a token that is no longer current: resent with a renewed one", "scope", c.Scope.Name, "operation", c.Operation.ID)
	sent = withToken(c, renewed)
	red = e.redactors.of(sent.Scope)
	return e.sender.send(ctx, sent, profile, red), red, nil
}

// tokenFailed commits the attempt of c that was not sent for fail, at
// now: the scope held (authRevoked, the endpoint's words in the detail),
// or paused with backoff like a rate limit, or the operation waiting for
// another process's refresh.
func (e *Engine) tokenFailed(c Claim, fail *tokenFailure, now time.Time) {
	op := c.Operation
	var (
		out providers.Outcome
		d   Decision
	)
	if fail.busy {
		out, d = e.policy.notSent(op, maxTime(fail.until, now.Add(e.policy.MinHint)), "not sent: "+fail.detail)
		out.Reason = "token-refresh"
	} else {
		out = e.tokens.outcome(c.Scope, fail, now)
		d = e.policy.Decide(op, e.idempotency(c.Scope), out, now, e.cfg.Random)
		if until := d.Scope.PauseUntil; until.After(now) {
			e.pauses.note(c.Scope.Name, until, now)
		}
	}
	// Nothing reached the provider: no effect to doubt.
	d.MaybeApplied = false
	e.finish(finishedAttempt{claim: c, comp: op.completion(now, out, d)})
}
