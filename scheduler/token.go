package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"time"
)

// Token is a renewing grant's access token as the store keeps it with the
// scope, sealed like the credentials (design §13). It is secret.
type Token struct {
	AccessToken string
	// RefreshToken is the rotated refresh token the endpoint issued with
	// it; empty while the grant's own (Credentials.RefreshToken) is current.
	RefreshToken string
	// IssuedAt is when it was obtained and ExpiresAt when it expires, on
	// the scheduler's clock; ExpiresAt is zero when the endpoint did not
	// say (it is then renewed only when a provider refuses it).
	IssuedAt, ExpiresAt time.Time
	// Grant is the fingerprint of the credentials it was obtained with
	// (GrantFingerprint): a token of replaced credentials is never used.
	Grant string
}

// String implements fmt.Stringer without revealing the token.
func (t Token) String() string {
	return "token(redacted, expires " + t.ExpiresAt.UTC().Format(time.RFC3339) + ")"
}

// GoString implements fmt.GoStringer without revealing the token.
func (t Token) GoString() string { return t.String() }

// LogValue implements slog.LogValuer: the token's times only.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(slog.Time("issuedAt", t.IssuedAt), slog.Time("expiresAt", t.ExpiresAt))
}

// TokenState is what the store keeps of a scope's token: the token (nil
// before the first refresh, and after the credentials were replaced), the
// last refresh's time and result, and the refresh lease.
type TokenState struct {
	Token *Token
	TokenStatus
	// LeaseHolder holds the refresh lease until LeaseUntil; empty when
	// none was taken.
	LeaseHolder string
	LeaseUntil  time.Time
}

// TokenStatus is what may be shown of a scope's token: never a secret.
type TokenStatus struct {
	// ExpiresAt is when the current token expires; zero when there is
	// none or its lifetime is unknown.
	ExpiresAt time.Time
	// RefreshedAt is when the last refresh ended and RefreshResult what
	// it gave: "ok", or the token endpoint's refusal (bounded, redacted).
	RefreshedAt   time.Time
	RefreshResult string
}

// TokenRefresh is a refresh's end, as Store.FinishTokenRefresh records it.
type TokenRefresh struct {
	// At is when it ended.
	At time.Time
	// Token is the new token; nil when the refresh failed or was not
	// made (another process's token was adopted).
	Token *Token
	// Result is "ok" or why it failed; empty to leave the last result
	// (nothing was asked of the endpoint).
	Result string
}

// RefreshOK is the TokenRefresh.Result of a refresh that succeeded.
const RefreshOK = "ok"

// GrantFingerprint identifies the grant c by content, for Token.Grant:
// a SHA-256 of its fields. It is kept only inside the sealed token.
func GrantFingerprint(c Credentials) string {
	b, _ := json.Marshal(c) // AccessToken, runtime state, is not marshaled
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
