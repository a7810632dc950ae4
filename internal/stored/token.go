package stored

import (
	"crypto/cipher"
	"encoding/json"
	"errors"
	"time"

	"pacer/scheduler"
)

// storedToken is the plaintext of scope_tokens.sealed, which SealToken
// encrypts: scheduler.Token. Times are Unix milliseconds.
type storedToken struct {
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken,omitempty"`
	IssuedAt     int64  `json:"issuedAt"`
	ExpiresAt    int64  `json:"expiresAt,omitempty"`
	Grant        string `json:"grant"`
}

// tokenData is the additional data a token is sealed with: the scope's
// name, marked so that a sealed token never opens as credentials.
func tokenData(scope string) string { return "token\x00" + scope }

// SealToken encrypts t for scope as SealCredentials does credentials.
func SealToken(aead cipher.AEAD, scope string, t scheduler.Token) ([]byte, error) {
	s := storedToken{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, IssuedAt: t.IssuedAt.UnixMilli(), Grant: t.Grant}
	if !t.ExpiresAt.IsZero() {
		s.ExpiresAt = t.ExpiresAt.UnixMilli()
	}
	plain, err := json.Marshal(s)
	if err != nil {
		return nil, errors.New("seal token: cannot encode")
	}
	defer clear(plain)
	return seal(aead, tokenData(scope), plain)
}

// OpenToken decrypts what SealToken sealed for scope. Its errors are
// *CredentialsError and never carry the plaintext.
func OpenToken(aead cipher.AEAD, scope string, blob []byte) (scheduler.Token, error) {
	plain, err := OpenSealed(aead, tokenData(scope), blob)
	if err != nil {
		return scheduler.Token{}, &CredentialsError{scope, "token: wrong key or corrupted data"}
	}
	defer clear(plain)
	var s storedToken
	if err := json.Unmarshal(plain, &s); err != nil {
		return scheduler.Token{}, &CredentialsError{scope, "token: malformed"}
	}
	t := scheduler.Token{AccessToken: s.AccessToken, RefreshToken: s.RefreshToken, IssuedAt: time.UnixMilli(s.IssuedAt).UTC(), Grant: s.Grant}
	if s.ExpiresAt != 0 {
		t.ExpiresAt = time.UnixMilli(s.ExpiresAt).UTC()
	}
	return t, nil
}

// TokenColumn is one column a finished refresh writes, and its value.
type TokenColumn struct {
	Column string
	Value  any
}

// TokenFinish is what both stores write to scope_tokens for the finished
// refresh r (scheduler.Store.FinishTokenRefresh): the token sealed with
// seal and its expiry when there is one, the result and its time when
// there is one; the lease's release is the store's.
func TokenFinish(r scheduler.TokenRefresh, seal func(scheduler.Token) ([]byte, error)) ([]TokenColumn, error) {
	var cols []TokenColumn
	if t := r.Token; t != nil {
		sealed, err := seal(*t)
		if err != nil {
			return nil, err
		}
		var expires int64
		if !t.ExpiresAt.IsZero() {
			expires = t.ExpiresAt.UnixMilli()
		}
		cols = append(cols, TokenColumn{"sealed", sealed}, TokenColumn{"expires_at", expires})
	}
	if r.Result != "" {
		cols = append(cols, TokenColumn{"refreshed_at", r.At.UnixMilli()}, TokenColumn{"refresh_result", Bound(r.Result, MaxRefreshResult)})
	}
	return cols, nil
}

// MaxRefreshResult bounds a stored refresh result.
const MaxRefreshResult = 512
