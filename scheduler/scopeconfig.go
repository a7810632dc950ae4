package scheduler

import (
	"fmt"
	"time"
)

// LimitGroup is the scope's group for shared limits: its own Group, or
// its provider.
func (c ScopeConfig) LimitGroup() string {
	if c.Group != "" {
		return c.Group
	}
	return c.Provider
}

// Describe summarizes the scope's limits for the audit trail; it never
// mentions credential values.
func (c ScopeConfig) Describe() string {
	s := fmt.Sprintf("base URL %s, max concurrent %d", c.BaseURL, c.MaxConcurrent)
	if c.RateLimit != nil {
		s += fmt.Sprintf(", rate %d per %s", c.RateLimit.Requests, c.RateLimit.Per)
	}
	if c.Credentials.Type != CredentialNone {
		s += ", " + string(c.Credentials.Type) + " credentials"
	}
	if c.Profile != nil {
		s += ", declarative profile " + c.Profile.Key()[:12]
	}
	return s
}

// CheckLimits reports limits a store cannot keep: a MaxConcurrent below
// 1, or a rate limit of less than 1 request or per less than a
// millisecond (stores count rates in milliseconds).
func (c ScopeConfig) CheckLimits() error {
	if c.MaxConcurrent < 1 {
		return fmt.Errorf("max concurrent must be at least 1, got %d", c.MaxConcurrent)
	}
	if rl := c.RateLimit; rl != nil && (rl.Requests < 1 || rl.Per < time.Millisecond) {
		return fmt.Errorf("rate limit needs at least 1 request per millisecond or longer, got %d per %s", rl.Requests, rl.Per)
	}
	return nil
}
