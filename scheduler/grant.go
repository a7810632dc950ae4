package scheduler

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Bounds of a grant's fields (design §11: everything from outside is
// bounded).
const (
	maxGrantField   = 4096
	maxPrivateKey   = 16 << 10
	maxGrantScopes  = 64
	maxGrantScope   = 256
	minAppKeyBits   = 2048
	maxAppKeyBits   = 8192
	maxTokenAnswer  = 64 << 10
	maxTokenLife    = 366 * 24 * time.Hour
	appJWTLife      = 9 * time.Minute // GitHub accepts at most 10 minutes
	appJWTBackdate  = time.Minute     // GitHub's advice against clock drift
	githubAPIAccept = "application/vnd.github+json"
)

// validateGrant checks an oauth2 or githubApp grant (design §13), adding
// a field error for each fault: a token URL that is not https outside
// loopback, a missing secret, an unparseable key.
func validateGrant(v *ValidationError, c Credentials, scopes []string) {
	oneLine := func(field, val string) {
		if len(val) > maxGrantField || strings.ContainsAny(val, "\r\n") {
			v.add("credentials."+field, fmt.Sprintf("must be one line of at most %d bytes", maxGrantField))
		}
	}
	if c.Type != CredentialOAuth2 && len(scopes) > 0 {
		v.add("credentials.scopes", "only an oauth2 grant takes scopes")
	}
	switch c.Type {
	case CredentialOAuth2:
		if msg := checkTokenURL(c.TokenURL); msg != "" {
			v.add("credentials.tokenURL", msg)
		}
		if c.ClientID == "" {
			v.add("credentials.clientID", "is required for an oauth2 grant")
		}
		oneLine("clientID", c.ClientID)
		if c.ClientSecret == "" && c.RefreshToken == "" {
			v.add("credentials.clientSecret", "is required for the client credentials grant (an oauth2 grant without refreshToken)")
		}
		oneLine("clientSecret", c.ClientSecret)
		oneLine("refreshToken", c.RefreshToken)
		switch c.AuthStyle {
		case "", AuthStyleAuto, AuthStyleHeader, AuthStyleParams:
		default:
			v.add("credentials.authStyle", "must be header, params or auto")
		}
		if len(scopes) > maxGrantScopes {
			v.add("credentials.scopes", fmt.Sprintf("must be at most %d scopes", maxGrantScopes))
		}
		for i, s := range scopes {
			if !scopeToken(s) {
				v.add(fmt.Sprintf("credentials.scopes[%d]", i), fmt.Sprintf("must be 1-%d printable characters without spaces, quotes or backslashes (RFC 6749 §3.3)", maxGrantScope))
			}
		}
	case CredentialGitHubApp:
		if c.AppID <= 0 {
			v.add("credentials.appID", "is required for a githubApp grant: the app's numeric ID")
		}
		if c.InstallationID <= 0 {
			v.add("credentials.installationID", "is required for a githubApp grant: the installation's numeric ID")
		}
		if c.PrivateKey == "" {
			v.add("credentials.privateKey", "is required for a githubApp grant: the app's private key (PEM)")
		} else if _, err := parseAppKey(c.PrivateKey); err != nil {
			v.add("credentials.privateKey", err.Error())
		}
	}
}

// scopeToken reports whether s is one OAuth scope token (RFC 6749 §3.3:
// NQCHAR, %x21 / %x23-5B / %x5D-7E).
func scopeToken(s string) bool {
	if s == "" || len(s) > maxGrantScope {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x21 || b > 0x7e || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}

// checkTokenURL returns what is wrong with an oauth2 token URL, or "": it
// is absolute https, or http to a loopback address only (a stand-in on
// the same machine), so a client secret never crosses a network in clear.
func checkTokenURL(raw string) string {
	if raw == "" {
		return "is required for an oauth2 grant"
	}
	if len(raw) > MaxBaseURLLength {
		return fmt.Sprintf("must be at most %d bytes", MaxBaseURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "must be an absolute https URL without credentials or fragment"
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return "must be https: only a loopback token endpoint (127.0.0.1, ::1, localhost) may use http"
	}
	return ""
}

// loopbackHost reports whether host names this machine.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseAppKey reads a GitHub App's PEM private key (PKCS #1 or #8, RSA).
// Its errors never quote the key.
func parseAppKey(pem string) (*rsa.PrivateKey, error) {
	if len(pem) > maxPrivateKey {
		return nil, fmt.Errorf("must be at most %d bytes", maxPrivateKey)
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(pem))
	if err != nil {
		return nil, errors.New("must be the app's RSA private key in PEM (-----BEGIN RSA PRIVATE KEY----- or -----BEGIN PRIVATE KEY-----)")
	}
	if bits := key.N.BitLen(); bits < minAppKeyBits || bits > maxAppKeyBits {
		return nil, fmt.Errorf("must be an RSA key of %d to %d bits, not %d", minAppKeyBits, maxAppKeyBits, bits)
	}
	return key, nil
}

// grantAuthStyle is an authStyle value as golang.org/x/oauth2 names it.
func grantAuthStyle(s string) oauth2.AuthStyle {
	switch s {
	case AuthStyleHeader:
		return oauth2.AuthStyleInHeader
	case AuthStyleParams:
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}

// exchanger obtains access tokens from a grant's token endpoint over
// client. Its only clock is now, passed in: golang.org/x/oauth2 computes
// its own expiry with time.Now, which is never read; the keeper decides
// with the lifetime the endpoint stated (expires_in) from its own clock.
type exchanger struct {
	client    *http.Client
	userAgent string
	// styles keeps golang.org/x/oauth2's configs per token URL and client,
	// so an auto-detected auth style is probed once.
	styles styleCache
}

// exchange obtains a new token for the grant c of the scope at baseURL,
// at now: with refreshToken (the current, possibly rotated one) for the
// refresh token grant, the client credentials grant for an oauth2 grant
// without one, and an installation token for a githubApp grant. A
// rejection is an *oauth2.RetrieveError (the GitHub App's too, in the
// same form), so one rule classifies both (classifyRefresh).
func (x *exchanger) exchange(ctx context.Context, c Credentials, baseURL, refreshToken string, now time.Time) (Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, x.client)
	switch c.Type {
	case CredentialOAuth2:
		return x.oauth2(ctx, c, refreshToken, now)
	case CredentialGitHubApp:
		return x.githubApp(ctx, c, baseURL, now)
	}
	return Token{}, fmt.Errorf("credentials of type %q do not renew", c.Type)
}

func (x *exchanger) oauth2(ctx context.Context, c Credentials, refreshToken string, now time.Time) (Token, error) {
	var (
		tok *oauth2.Token
		err error
	)
	scopes := strings.Fields(c.Scopes)
	if refreshToken != "" {
		conf := x.styles.config(c, scopes)
		// A token without an access token is never valid, so the source
		// refreshes at once, whatever time.Now says.
		tok, err = conf.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	} else {
		cc := clientcredentials.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: c.TokenURL,
			Scopes: scopes, AuthStyle: grantAuthStyle(c.AuthStyle)}
		tok, err = cc.Token(ctx)
	}
	if err != nil {
		return Token{}, err
	}
	if t := tok.Type(); !strings.EqualFold(t, "bearer") {
		return Token{}, fmt.Errorf("token endpoint issued a %q token; only bearer tokens are supported", stripControls(t))
	}
	out := Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, IssuedAt: now}
	if out.RefreshToken == refreshToken && refreshToken == c.RefreshToken {
		out.RefreshToken = "" // not rotated: the grant's own is current
	}
	secs := tok.ExpiresIn
	if secs == 0 { // a form-encoded answer: the library kept it raw
		secs, _ = strconv.ParseInt(fmt.Sprint(tok.Extra("expires_in")), 10, 64)
	}
	if secs > 0 {
		out.ExpiresAt = now.Add(min(time.Duration(secs)*time.Second, maxTokenLife))
	}
	return out, nil
}

// githubApp signs an app JWT (RS256, iss the app ID, iat backdated a
// minute, exp within 10 minutes) and exchanges it at
// {baseURL}/app/installations/{id}/access_tokens.
func (x *exchanger) githubApp(ctx context.Context, c Credentials, baseURL string, now time.Time) (Token, error) {
	key, err := parseAppKey(c.PrivateKey)
	if err != nil {
		return Token{}, fmt.Errorf("private key: %w", err)
	}
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(c.AppID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-appJWTBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(appJWTLife)),
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		return Token{}, fmt.Errorf("sign app JWT: %w", err)
	}
	target := baseURL + "/app/installations/" + strconv.FormatInt(c.InstallationID, 10) + "/access_tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return Token{}, err
	}
	req.Header.Set("Authorization", "Bearer "+signed)
	req.Header.Set("Accept", githubAPIAccept)
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", x.userAgent)
	resp, err := x.client.Do(req)
	if err != nil {
		return Token{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer))
	if err != nil {
		return Token{}, fmt.Errorf("read installation token: %w", err)
	}
	var answer struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
		Message   string    `json:"message"`
	}
	jsonErr := json.Unmarshal(body, &answer)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// GitHub's errors are {"message": …}: in the token endpoint's form.
		return Token{}, &oauth2.RetrieveError{Response: resp, Body: body, ErrorDescription: answer.Message}
	}
	if jsonErr != nil || answer.Token == "" {
		return Token{}, errors.New("installation token answer without a token")
	}
	out := Token{AccessToken: answer.Token, IssuedAt: now}
	if !answer.ExpiresAt.IsZero() {
		// GitHub's clock, not ours: the lifetime is expires_at − Date
		// (design §6), from our now.
		life := answer.ExpiresAt.Sub(now)
		if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			life = answer.ExpiresAt.Sub(date)
		}
		if life > 0 {
			out.ExpiresAt = now.Add(min(life, maxTokenLife))
		}
	}
	return out, nil
}

// stripControls keeps the printable ASCII of s, at most 64 bytes: a
// token endpoint's word quoted in a message.
func stripControls(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 64; i++ {
		if s[i] >= 0x20 && s[i] < 0x7f {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// maxStyleConfigs bounds the configs a styleCache keeps; past it, it
// starts over (a probe more).
const maxStyleConfigs = 10000

// styleCache keeps one golang.org/x/oauth2 config per grant: its
// auto-detected auth style is remembered in the config, so the endpoint is
// probed once per grant, not once per refresh.
type styleCache struct {
	mu sync.Mutex
	m  map[Credentials]*oauth2.Config
}

// config returns the config of the oauth2 grant c.
func (s *styleCache) config(c Credentials, scopes []string) *oauth2.Config {
	c.AccessToken, c.CurrentRefreshToken = "", ""
	s.mu.Lock()
	defer s.mu.Unlock()
	if conf, ok := s.m[c]; ok {
		return conf
	}
	if s.m == nil || len(s.m) >= maxStyleConfigs {
		s.m = map[Credentials]*oauth2.Config{}
	}
	conf := &oauth2.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, Scopes: scopes,
		Endpoint: oauth2.Endpoint{TokenURL: c.TokenURL, AuthStyle: grantAuthStyle(c.AuthStyle)}}
	s.m[c] = conf
	return conf
}
