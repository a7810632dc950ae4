package scheduler

import (
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
)

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
}

// String implements fmt.Stringer without revealing secrets.
func (c Credentials) String() string {
	if c.Type == CredentialNone {
		return "credentials(none)"
	}
	return "credentials(" + string(c.Type) + ", redacted)"
}

// GoString implements fmt.GoStringer without revealing secrets.
func (c Credentials) GoString() string { return c.String() }

// Secrets lists the secret values, for redacting diagnostics.
func (c Credentials) Secrets() []string {
	var out []string
	for _, s := range []string{c.Token, c.Value, c.Password} {
		if s != "" {
			out = append(out, s)
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
}

// Scope is a provider account with its configuration and admission state.
type Scope struct {
	ScopeConfig
	// HoldReason is set while the scope is held.
	HoldReason HoldReason
	// PausedUntil is the end of the scope's pause; zero or past when open.
	PausedUntil time.Time
	PauseReason string
	// Budget is the last budget figures seen; nil before any.
	Budget *providers.Budget
	// InFlight is derived from leased rows.
	InFlight  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Status is the scope's admission state at now.
func (s Scope) Status(now time.Time) ScopeStatus {
	switch {
	case s.HoldReason != "":
		return ScopeHeld
	case s.PausedUntil.After(now):
		return ScopePaused
	}
	return ScopeOpen
}
