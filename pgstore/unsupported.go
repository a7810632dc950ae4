package pgstore

import (
	"context"
	"errors"
	"time"

	"pacer/scheduler"
)

// ErrNotYetSupported is returned by the methods the PostgreSQL store does
// not implement yet.
var ErrNotYetSupported = errors.New("not yet supported by the PostgreSQL store")

func (s *Store) PutScope(ctx context.Context, cfg scheduler.ScopeConfig, act scheduler.Action) (scheduler.Scope, bool, error) {
	return scheduler.Scope{}, false, ErrNotYetSupported
}
func (s *Store) GetScope(ctx context.Context, name string) (scheduler.Scope, error) {
	return scheduler.Scope{}, ErrNotYetSupported
}
func (s *Store) ListScopes(ctx context.Context) ([]scheduler.Scope, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) ResumeScope(ctx context.Context, name string, act scheduler.Action) (scheduler.Scope, error) {
	return scheduler.Scope{}, ErrNotYetSupported
}
func (s *Store) PauseScope(ctx context.Context, name string, until time.Time, act scheduler.Action) (scheduler.Scope, error) {
	return scheduler.Scope{}, ErrNotYetSupported
}
func (s *Store) Enqueue(ctx context.Context, ops []scheduler.NewOperation, now time.Time) ([]scheduler.EnqueueResult, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) GetOperation(ctx context.Context, id string) (scheduler.Operation, error) {
	return scheduler.Operation{}, ErrNotYetSupported
}
func (s *Store) ListOperations(ctx context.Context, f scheduler.OperationFilter) (scheduler.OperationPage, error) {
	return scheduler.OperationPage{}, ErrNotYetSupported
}
func (s *Store) FindOperations(ctx context.Context, prefix string, limit int) ([]scheduler.Operation, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) ListAttempts(ctx context.Context, id string) ([]scheduler.Attempt, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) ListAudit(ctx context.Context, operationID string) ([]scheduler.AuditEntry, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) ListScopeAudit(ctx context.Context, scope string) ([]scheduler.AuditEntry, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) CountOperations(ctx context.Context, f scheduler.OperationFilter) (int, error) {
	return 0, ErrNotYetSupported
}
func (s *Store) ReleaseHeldInScope(ctx context.Context, scope string, at time.Time, act scheduler.Action) (int, error) {
	return 0, ErrNotYetSupported
}
func (s *Store) ReleaseOperation(ctx context.Context, id string, at time.Time, act scheduler.Action) (scheduler.Operation, error) {
	return scheduler.Operation{}, ErrNotYetSupported
}
func (s *Store) ReleaseUnapplied(ctx context.Context, id string, at time.Time, act scheduler.Action) (scheduler.Operation, error) {
	return scheduler.Operation{}, ErrNotYetSupported
}
func (s *Store) ActOnOperations(ctx context.Context, a scheduler.ManualAction, ids []string, at time.Time, act scheduler.Action) (int, error) {
	return 0, ErrNotYetSupported
}
func (s *Store) UnreleaseOperation(ctx context.Context, id string, act scheduler.Action) (scheduler.Operation, error) {
	return scheduler.Operation{}, ErrNotYetSupported
}
func (s *Store) ResolveOperation(ctx context.Context, id string, succeeded bool, act scheduler.Action) (scheduler.Operation, error) {
	return scheduler.Operation{}, ErrNotYetSupported
}
func (s *Store) CancelOperation(ctx context.Context, id string, act scheduler.Action) (scheduler.Operation, error) {
	return scheduler.Operation{}, ErrNotYetSupported
}
func (s *Store) ClaimDue(ctx context.Context, p scheduler.ClaimParams) ([]scheduler.Claim, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) Complete(ctx context.Context, cs []scheduler.Completion) ([]bool, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) CompleteAndClaim(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	return nil, nil, ErrNotYetSupported
}
func (s *Store) ListRunning(ctx context.Context, expiredBy time.Time, limit int) ([]scheduler.Claim, error) {
	return nil, ErrNotYetSupported
}
func (s *Store) ExpireOverdue(ctx context.Context, p scheduler.ExpireParams) (scheduler.ExpireResult, error) {
	return scheduler.ExpireResult{}, ErrNotYetSupported
}
func (s *Store) NextWake(ctx context.Context) (time.Time, bool, error) {
	return time.Time{}, false, ErrNotYetSupported
}
func (s *Store) PruneFinished(ctx context.Context, p scheduler.PruneParams) (scheduler.PruneResult, error) {
	return scheduler.PruneResult{}, ErrNotYetSupported
}
func (s *Store) CountByState(ctx context.Context, now time.Time) (scheduler.Counts, error) {
	return scheduler.Counts{}, ErrNotYetSupported
}
func (s *Store) ListChanges(ctx context.Context, f scheduler.ChangeFilter) (scheduler.ChangeBatch, error) {
	return scheduler.ChangeBatch{}, ErrNotYetSupported
}
