package scheduler

import (
	"context"
	"fmt"
)

// ReleaseHeldInScope releases every held operation of the scope to run now,
// in one transaction: each keeps its request identity and gets a fresh
// retry budget and an audit entry, and the scope gets one entry for the
// whole act. It returns how many were released. reason is required. The
// scope's own hold or pause stays: resume the scope to lift it.
func (s *Service) ReleaseHeldInScope(ctx context.Context, scope, reason, actor string) (int, error) {
	if err := requireReason(reason); err != nil {
		return 0, err
	}
	now := s.Now()
	n, err := s.store.ReleaseHeldInScope(ctx, scope, now, Action{Actor: actor, At: now, Reason: reason})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.wake()
	}
	return n, nil
}

// ReplaceCredentials replaces the scope's credentials and nothing else of
// its configuration, recording reason and actor. As with PutScope, new
// credentials lift an authRevoked hold. Invalid credentials are a
// *ValidationError; an unknown scope ErrNotFound.
func (s *Service) ReplaceCredentials(ctx context.Context, scope string, creds Credentials, reason, actor string) (Scope, error) {
	v := &ValidationError{}
	checkReason(v, reason)
	validateCredentials(v, creds)
	if err := v.err(); err != nil {
		return Scope{}, err
	}
	sc, err := s.store.GetScope(ctx, scope)
	if err != nil {
		return Scope{}, fmt.Errorf("replace credentials: %w", err)
	}
	cfg := sc.ScopeConfig
	cfg.Credentials = creds
	out, _, err := s.store.PutScope(ctx, cfg, Action{Actor: actor, At: s.Now(), Reason: reason})
	if err != nil {
		return Scope{}, fmt.Errorf("replace credentials: %w", err)
	}
	s.wake()
	return out, nil
}

// CountOperations counts the operations f selects over all pages.
func (s *Service) CountOperations(ctx context.Context, f OperationFilter) (int, error) {
	if f.State != "" && !f.State.Valid() {
		return 0, &ValidationError{Fields: []FieldError{{"state", "must be one of scheduled, waitingForBudget, running, held, succeeded, failed, canceled"}}}
	}
	return s.store.CountOperations(ctx, f)
}

// ListScopeAudit returns the audit trail of a scope's own actions.
func (s *Service) ListScopeAudit(ctx context.Context, scope string) ([]AuditEntry, error) {
	return s.store.ListScopeAudit(ctx, scope)
}
