package scheduler

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"pacer/providers"
)

// CredentialType names how a scope authenticates.
type CredentialType string

// The credential types.
const (
	CredentialNone   CredentialType = ""
	CredentialBearer CredentialType = "bearer"
	CredentialHeader CredentialType = "header"
	CredentialBasic  CredentialType = "basic"
	// CredentialOAuth2 is an OAuth 2.0 grant (design §13): the refresh
	// token grant when RefreshToken is set, the client credentials grant
	// otherwise. Its access token renews itself (tokenKeeper).
	CredentialOAuth2 CredentialType = "oauth2"
	// CredentialGitHubApp is a GitHub App installation: an RS256 app JWT
	// signed with PrivateKey is exchanged for an installation token.
	CredentialGitHubApp CredentialType = "githubApp"
)

// Renews reports whether the type is a grant whose access token pacer
// obtains and renews itself.
func (t CredentialType) Renews() bool { return t == CredentialOAuth2 || t == CredentialGitHubApp }

// Credentials authenticate a scope's requests. They are secret: stored
// encrypted, never returned by the API, never logged. String and GoString
// hide the values so a stray %v cannot print them.
type Credentials struct {
	Type     CredentialType `json:"type,omitempty"`
	Token    string         `json:"token,omitempty"`
	Name     string         `json:"name,omitempty"`
	Value    string         `json:"value,omitempty"`
	Username string         `json:"username,omitempty"`
	Password string         `json:"password,omitempty"`

	// TokenURL, ClientID, ClientSecret, RefreshToken, Scopes and
	// AuthStyle are an oauth2 grant's. Scopes are space-separated (the
	// wire form, RFC 6749 §3.3), so Credentials stay comparable.
	TokenURL     string `json:"tokenURL,omitempty"`
	ClientID     string `json:"clientID,omitempty"`
	ClientSecret string `json:"clientSecret,omitempty"`
	RefreshToken string `json:"refreshToken,omitempty"`
	Scopes       string `json:"scopes,omitempty"`
	// AuthStyle is how the client authenticates to the token endpoint:
	// AuthStyleHeader, AuthStyleParams or AuthStyleAuto (empty).
	AuthStyle string `json:"authStyle,omitempty"`
	// AppID, InstallationID and PrivateKey (PEM, RSA) are a githubApp
	// grant's.
	AppID          int64  `json:"appID,omitempty"`
	InstallationID int64  `json:"installationID,omitempty"`
	PrivateKey     string `json:"privateKey,omitempty"`
	// AccessToken is a renewing grant's current access token (and
	// RefreshToken its current, possibly rotated, refresh token): the
	// token keeper sets them on a claim's copy before its request is
	// built. A scope as configured or stored never carries one.
	AccessToken string `json:"-"`
	// CurrentRefreshToken is the grant's rotated refresh token, set with
	// AccessToken when the endpoint rotated it: secret as well.
	CurrentRefreshToken string `json:"-"`
}

// The authStyle values of an oauth2 grant, as in golang.org/x/oauth2.
const (
	AuthStyleAuto   = "auto"
	AuthStyleHeader = "header"
	AuthStyleParams = "params"
)

// String implements fmt.Stringer without revealing secrets.
func (c Credentials) String() string {
	if c.Type == CredentialNone {
		return "credentials(none)"
	}
	return "credentials(" + string(c.Type) + ", redacted)"
}

// GoString implements fmt.GoStringer without revealing secrets.
func (c Credentials) GoString() string { return c.String() }

// LogValue implements slog.LogValuer: a log line shows the type and
// whether credentials are configured, never a value, with any handler
// (the JSON handler would otherwise marshal the fields).
func (c Credentials) LogValue() slog.Value {
	typ := string(c.Type)
	if typ == "" {
		typ = "none"
	}
	return slog.GroupValue(slog.String("type", typ), slog.Bool("configured", c.Type != CredentialNone))
}

// LogValue implements slog.LogValuer: the scope's configuration with its
// credentials redacted.
func (c ScopeConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", c.Name), slog.String("provider", c.Provider), slog.String("baseURL", c.BaseURL),
		slog.Any("credentials", c.Credentials), slog.Int("maxConcurrent", c.MaxConcurrent),
	)
}

// LogValue implements slog.LogValuer: the scope with its credentials
// redacted.
func (s Scope) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", s.Name), slog.String("provider", s.Provider), slog.String("baseURL", s.BaseURL),
		slog.Any("credentials", s.Credentials), slog.String("holdReason", string(s.HoldReason)),
		slog.Time("pausedUntil", s.PausedUntil), slog.Int("inFlight", s.InFlight),
	)
}

// LogValue implements slog.LogValuer: the scope input with its
// credentials redacted.
func (in ScopeInput) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", in.Name), slog.String("provider", in.Provider), slog.String("baseURL", in.BaseURL),
		slog.Any("credentials", in.Credentials),
	)
}

// Secrets lists the secret values, for redacting diagnostics.
func (c Credentials) Secrets() []string {
	var out []string
	for _, s := range []string{c.Token, c.Value, c.Password, c.ClientSecret, c.RefreshToken, c.PrivateKey, c.AccessToken, c.CurrentRefreshToken} {
		if s != "" {
			out = append(out, s)
		}
	}
	// A private key echoed in part, or without its line breaks, is
	// still secret: each line of its body is searched for too.
	for _, line := range strings.Split(c.PrivateKey, "\n") {
		if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}

// RateLimit is a configured budget: at most Requests sends in any window
// of length Per.
type RateLimit struct {
	Requests int           `json:"requests"`
	Per      time.Duration `json:"per"`
}

// ScopeConfig is what a person sets on a scope.
type ScopeConfig struct {
	Name              string
	Provider          string
	BaseURL           string
	Credentials       Credentials
	IdempotencyHeader string
	// MaxConcurrent is at least 1 after normalization.
	MaxConcurrent int
	// RateLimit is nil when the scope has no configured budget.
	RateLimit *RateLimit
	// Group names the scopes that share a provider-wide limit (one app's
	// quota): a rate limit the profile reports as shared pauses every scope
	// of the group, and only those. Defaults to the provider name.
	Group string
	// BudgetReserve is how many requests of the provider's learned budget
	// are kept back: once the remaining figure falls to it, the scope waits
	// for the reset instead of spending the rest.
	BudgetReserve int
	// Profile is the declarative profile of a "custom" scope
	// (providers.CustomName); nil for every built-in provider.
	Profile *providers.Spec
}

// Scope is a provider account with its configuration and admission state.
// Read from the Store it carries only its credentials' Type, except in a
// Claim, whose request is sent with them (see Store).
type Scope struct {
	ScopeConfig
	// HoldReason is set while the scope is held.
	HoldReason HoldReason
	// PausedUntil is the end of the scope's own pause (a rate limit); zero
	// or past when it has none.
	PausedUntil time.Time
	PauseReason string
	// BudgetPausedUntil is the end of its default budget's own pause (a
	// limit of that budget, design §12), and BudgetPauseReason why.
	BudgetPausedUntil time.Time
	BudgetPauseReason string
	// PauseEnds is when every pause of the scope ends: its own, and its
	// default budget's (its own pause, and while it is spent down to the
	// reserve, the provider's reset). The store
	// computes it with the rule its claims admit by; zero or past when the
	// scope is not paused.
	PauseEnds time.Time
	// Budget is the last figures seen of the scope's default budget (the
	// one every request spends unless the provider named another resource
	// for its route); nil before any.
	Budget *providers.Budget
	// Resources are the learned budgets of the other resources the
	// provider named (design §12: GitHub's search, graphql, …), by name;
	// each holds back only the requests that spend it. Filled by the
	// scope reads, not by claims.
	Resources []ResourceBudget
	// Token is what may be shown of a renewing grant's token (its expiry,
	// its last refresh); zero for other credentials. Filled by the scope
	// reads, not by claims.
	Token TokenStatus
	// InFlight is derived from leased rows.
	InFlight  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ResourceBudget is the learned budget of one resource a provider names
// within a scope.
type ResourceBudget struct {
	// Resource is the provider's name for it (x-ratelimit-resource).
	Resource string
	// Budget is its last figures; nil when the provider's answers named
	// the resource without figures.
	Budget *providers.Budget
	// PausedUntil is the end of its own pause (a limit of the resource),
	// and PauseReason why.
	PausedUntil time.Time
	PauseReason string
	// PauseEnds is when the requests spending it may go again: its own
	// pause or, while it is spent down to the scope's reserve, the
	// provider's reset. Zero or past when open.
	PauseEnds time.Time
}

// Pause says until when and why the requests spending the budget wait, at
// now, for a scope keeping reserve requests back; zero when they do not.
func (r ResourceBudget) Pause(now time.Time, reserve int) (time.Time, string) {
	switch {
	case !r.PauseEnds.After(now):
		return time.Time{}, ""
	case r.PauseEnds.Equal(r.PausedUntil) || r.Budget == nil:
		return r.PauseEnds, r.PauseReason
	}
	return r.PauseEnds, budgetSpent(*r.Budget, reserve)
}

// budgetSpent says why a learned budget holds its requests back.
func budgetSpent(b providers.Budget, reserve int) string {
	return fmt.Sprintf("budget spent: %d remaining (reserve %d) until the provider's reset", b.Remaining, reserve)
}

// Status is the scope's admission state at now.
func (s Scope) Status(now time.Time) ScopeStatus {
	if s.HoldReason != "" {
		return ScopeHeld
	}
	if until, _ := s.Pause(now); !until.IsZero() {
		return ScopePaused
	}
	return ScopeOpen
}

// Pause says until when and why nothing of the scope is sent, at now: its
// PauseEnds, explained by its own pause (a rate limit, possibly shared by
// its group) or by its learned budget spent down to the reserve until the
// provider's reset. Zero when the scope is not paused.
func (s Scope) Pause(now time.Time) (time.Time, string) {
	if !s.PauseEnds.After(now) {
		return time.Time{}, ""
	}
	switch {
	case s.PauseEnds.Equal(s.PausedUntil):
		return s.PauseEnds, s.PauseReason
	case s.BudgetPauseReason != "" && s.PauseEnds.Equal(s.BudgetPausedUntil):
		return s.PauseEnds, s.BudgetPauseReason
	case s.Budget != nil:
		return s.PauseEnds, budgetSpent(*s.Budget, s.BudgetReserve)
	}
	return s.PauseEnds, s.PauseReason
}
