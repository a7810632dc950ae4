package httpapi

import (
	"encoding/json"
	"strings"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// PutScopeRequest is the body of PUT /v1/scopes/{providerScope}.
type PutScopeRequest struct {
	// Provider names the provider profile ("github", "stripe", "generic").
	Provider string `json:"provider"`
	// BaseURL is the absolute http(s) URL operation paths are relative to.
	BaseURL string `json:"baseURL"`
	// Credentials authenticate the scope's requests; nil for none.
	Credentials *CredentialsRequest `json:"credentials,omitempty"`
	// MaxConcurrent bounds the scope's requests in flight; 0 for the
	// profile's default.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// RateLimit is the scope's configured budget; nil for the profile's.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// IdempotencyHeader tells a generic scope its provider honours
	// idempotency keys in this header.
	IdempotencyHeader string `json:"idempotencyHeader,omitempty"`
	// Group names the scopes sharing a provider-wide limit; empty for the
	// provider name.
	Group string `json:"group,omitempty"`
	// BudgetReserve is how many requests of the provider's reported budget
	// are kept back before the scope waits for the reset.
	BudgetReserve int `json:"budgetReserve,omitempty"`
	// Profile is the declarative profile a "custom" scope requires (and
	// only such a scope takes): its JSON is providers.Spec's.
	Profile *providers.Spec `json:"profile,omitempty"`
}

// CredentialsRequest is a scope's credentials as written. They are
// write-only: no response ever carries them.
type CredentialsRequest struct {
	// Type is "bearer" (Token), "header" (Name, Value), "basic"
	// (Username, Password), "oauth2" (TokenURL, ClientID, ClientSecret,
	// RefreshToken, Scopes, AuthStyle) or "githubApp" (AppID,
	// InstallationID, PrivateKey): design §13.
	Type     string `json:"type"`
	Token    string `json:"token,omitempty"`
	Name     string `json:"name,omitempty"`
	Value    string `json:"value,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	TokenURL       string   `json:"tokenURL,omitempty"`
	ClientID       string   `json:"clientID,omitempty"`
	ClientSecret   string   `json:"clientSecret,omitempty"`
	RefreshToken   string   `json:"refreshToken,omitempty"`
	Scopes         []string `json:"scopes,omitempty"`
	AuthStyle      string   `json:"authStyle,omitempty"`
	AppID          int64    `json:"appID,omitempty"`
	InstallationID int64    `json:"installationID,omitempty"`
	PrivateKey     string   `json:"privateKey,omitempty"`
}

// Credentials is the domain form of the request; the scopes go apart
// (ScopeInput.GrantScopes), so that each is checked.
func (c CredentialsRequest) Credentials() scheduler.Credentials {
	return scheduler.Credentials{
		Type: scheduler.CredentialType(c.Type), Token: c.Token, Name: c.Name,
		Value: c.Value, Username: c.Username, Password: c.Password,
		TokenURL: c.TokenURL, ClientID: c.ClientID, ClientSecret: c.ClientSecret, RefreshToken: c.RefreshToken,
		AuthStyle: c.AuthStyle, AppID: c.AppID, InstallationID: c.InstallationID, PrivateKey: c.PrivateKey,
	}
}

// RateLimit is a budget of Requests sends per window Per, a Go duration
// string such as "1h" or "15m".
type RateLimit struct {
	Requests int    `json:"requests"`
	Per      string `json:"per"`
}

// PauseScopeRequest is the body of POST /v1/scopes/{providerScope}/pause.
type PauseScopeRequest struct {
	// Until is the RFC 3339 time the pause ends. Required.
	Until string `json:"until"`
	// Reason says why, for the audit trail. Required.
	Reason string `json:"reason"`
}

// input converts the body, noting a time that does not parse.
func (b PauseScopeRequest) input() scheduler.PauseInput {
	in := scheduler.PauseInput{Reason: b.Reason}
	if b.Until != "" {
		t, err := time.Parse(time.RFC3339Nano, b.Until)
		if err != nil {
			in.Invalid = append(in.Invalid, scheduler.FieldError{Field: "until", Message: "must be an RFC 3339 time such as 2026-09-11T02:00:00Z"})
		}
		in.Until = t
	}
	return in
}

// ResumeScopeRequest is the body of POST /v1/scopes/{providerScope}/resume.
type ResumeScopeRequest struct {
	// Reason says why, for the audit trail. Required.
	Reason string `json:"reason"`
}

// Scope is a scope as the API shows it. It never carries credentials, only
// whether they are configured.
type Scope struct {
	ProviderScope     string            `json:"providerScope"`
	Provider          string            `json:"provider"`
	BaseURL           string            `json:"baseURL"`
	Credentials       CredentialsStatus `json:"credentials"`
	IdempotencyHeader *string           `json:"idempotencyHeader"`
	MaxConcurrent     int               `json:"maxConcurrent"`
	RateLimit         *RateLimit        `json:"rateLimit"`
	Group             string            `json:"group"`
	BudgetReserve     int               `json:"budgetReserve"`
	// Profile is a custom scope's declarative profile; absent for
	// built-in providers.
	Profile *providers.Spec `json:"profile,omitempty"`
	// Status is "open", "paused" or "held" at the time of the response.
	Status      string     `json:"status"`
	PausedUntil *time.Time `json:"pausedUntil"`
	PauseReason *string    `json:"pauseReason"`
	HoldReason  *string    `json:"holdReason"`
	// Remaining, Limit and ResetAt are the last budget figures the provider
	// reported; null when unknown.
	Remaining *int64     `json:"remaining"`
	Limit     *int64     `json:"limit"`
	ResetAt   *time.Time `json:"resetAt"`
	// Resources are the budgets of the other resources the provider named
	// (design §12: GitHub's search, graphql, …), each holding back only the
	// requests that spend it; absent before any.
	Resources []ResourceBudget `json:"resources,omitempty"`
	// InFlight counts the scope's requests being sent now.
	InFlight  int        `json:"inFlight"`
	CreatedAt *time.Time `json:"createdAt"`
	UpdatedAt *time.Time `json:"updatedAt"`
}

// ResourceBudget is the learned budget of one resource the provider names.
type ResourceBudget struct {
	Resource string `json:"resource"`
	// Status is "open" or "paused" at the time of the response.
	Status      string     `json:"status"`
	PausedUntil *time.Time `json:"pausedUntil"`
	PauseReason *string    `json:"pauseReason"`
	Remaining   *int64     `json:"remaining"`
	Limit       *int64     `json:"limit"`
	ResetAt     *time.Time `json:"resetAt"`
}

// CredentialsStatus shows whether a scope has credentials, never what they
// are.
type CredentialsStatus struct {
	// Type is the credential type; omitted when none are configured.
	Type       string `json:"type,omitempty"`
	Configured bool   `json:"configured"`
	// TokenExpiresAt is when a renewing grant's current access token
	// expires (null before the first, or when the endpoint did not say);
	// LastRefreshAt and LastRefreshResult are its last refresh ("ok", or
	// the token endpoint's refusal). Absent for other credentials.
	TokenExpiresAt    *time.Time `json:"tokenExpiresAt,omitempty"`
	LastRefreshAt     *time.Time `json:"lastRefreshAt,omitempty"`
	LastRefreshResult *string    `json:"lastRefreshResult,omitempty"`
}

// MarshalJSON writes the status; a renewing grant's always names its
// token's expiry and last refresh, null before the first.
func (c CredentialsStatus) MarshalJSON() ([]byte, error) {
	type plain CredentialsStatus
	if !scheduler.CredentialType(c.Type).Renews() {
		return json.Marshal(plain(c))
	}
	return json.Marshal(struct {
		plain
		TokenExpiresAt    *time.Time `json:"tokenExpiresAt"`
		LastRefreshAt     *time.Time `json:"lastRefreshAt"`
		LastRefreshResult *string    `json:"lastRefreshResult"`
	}{plain(c), c.TokenExpiresAt, c.LastRefreshAt, c.LastRefreshResult})
}

// credentialsStatus shows sc's credentials: their type, and for a
// renewing grant its token's expiry and last refresh.
func credentialsStatus(sc scheduler.Scope) CredentialsStatus {
	out := CredentialsStatus{Type: string(sc.Credentials.Type), Configured: sc.Credentials.Type != scheduler.CredentialNone}
	if sc.Credentials.Type.Renews() {
		out.TokenExpiresAt, out.LastRefreshAt = optTime(sc.Token.ExpiresAt), optTime(sc.Token.RefreshedAt)
		out.LastRefreshResult = optString(sc.Token.RefreshResult)
	}
	return out
}

// ScopeList is the body of GET /v1/scopes.
type ScopeList struct {
	Scopes []Scope `json:"scopes"`
}

// input converts the body of a PUT for scope name. A duration that does
// not parse goes into the input's Invalid fields, which the scheduler
// reports together with everything else it validates.
func (b PutScopeRequest) input(name string) scheduler.ScopeInput {
	in := scheduler.ScopeInput{
		Name: name, Provider: b.Provider, BaseURL: b.BaseURL,
		IdempotencyHeader: b.IdempotencyHeader, MaxConcurrent: b.MaxConcurrent,
		Group: b.Group, BudgetReserve: b.BudgetReserve, Profile: b.Profile,
	}
	if c := b.Credentials; c != nil {
		in.Credentials, in.GrantScopes = c.Credentials(), c.Scopes
	}
	if rl := b.RateLimit; rl != nil {
		per, ok := parseDuration(rl.Per)
		if !ok {
			in.Invalid = append(in.Invalid, scheduler.FieldError{Field: "rateLimit.per", Message: `must be a duration such as "1h" or "15m"`})
		}
		in.RateLimit = &scheduler.RateLimit{Requests: rl.Requests, Per: per}
	}
	return in
}

// newScope converts a domain scope for a response at now.
func newScope(sc scheduler.Scope, now time.Time) Scope {
	out := Scope{
		ProviderScope:     sc.Name,
		Provider:          sc.Provider,
		BaseURL:           sc.BaseURL,
		Credentials:       credentialsStatus(sc),
		IdempotencyHeader: optString(sc.IdempotencyHeader),
		MaxConcurrent:     sc.MaxConcurrent,
		Group:             sc.Group,
		BudgetReserve:     sc.BudgetReserve,
		Profile:           sc.Profile,
		Status:            string(sc.Status(now)),
		HoldReason:        optString(string(sc.HoldReason)),
		InFlight:          sc.InFlight,
		CreatedAt:         optTime(sc.CreatedAt),
		UpdatedAt:         optTime(sc.UpdatedAt),
	}
	if rl := sc.RateLimit; rl != nil {
		out.RateLimit = &RateLimit{Requests: rl.Requests, Per: formatDuration(rl.Per)}
	}
	if until, why := sc.Pause(now); !until.IsZero() {
		out.PausedUntil = optTime(until)
		out.PauseReason = optString(why)
	}
	out.Remaining, out.Limit, out.ResetAt = budgetFigures(sc.Budget)
	for _, r := range sc.Resources {
		rb := ResourceBudget{Resource: r.Resource, Status: string(scheduler.ScopeOpen)}
		if until, why := r.Pause(now, sc.BudgetReserve); !until.IsZero() {
			rb.Status, rb.PausedUntil, rb.PauseReason = string(scheduler.ScopePaused), optTime(until), optString(why)
		}
		rb.Remaining, rb.Limit, rb.ResetAt = budgetFigures(r.Budget)
		out.Resources = append(out.Resources, rb)
	}
	return out
}

// budgetFigures shows a learned budget's figures; nil for each unknown.
func budgetFigures(b *providers.Budget) (remaining, limit *int64, resetAt *time.Time) {
	if b == nil {
		return nil, nil, nil
	}
	r := b.Remaining
	remaining = &r
	if b.Limit > 0 {
		l := b.Limit
		limit = &l
	}
	return remaining, limit, optTime(b.ResetAt)
}

// optTime returns t in UTC, or nil when t is zero (shown as null). A
// stored time outside the bounds every accepted time keeps (design §11) is
// shown at the nearest bound: JSON has no year 10000, and one such value
// must not make a listing fail.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := scheduler.ClampTime(t.UTC())
	return &u
}

// optString returns &s, or nil when s is empty (shown as null).
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// parseDuration parses a Go duration string; ok is false when s is not one.
func parseDuration(s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// formatDuration writes d as a Go duration string without zero tails:
// "1h", "1h30m", "90s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
