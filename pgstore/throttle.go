package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/staff"
)

// Reserve implements the sign-in throttle (httpapi.SignInThrottle) for every process sharing the
// database: in one transaction it takes an advisory lock per key (in
// order, so two reservations never deadlock), drops the failures older
// than window, and either counts a failure at now for each key or, when a
// key has its limit of failures within window, nothing, returning how
// long until the oldest of those leaves the window.
func (s *Store) Reserve(ctx context.Context, now time.Time, window time.Duration, keys []staff.ThrottleKey) (time.Duration, error) {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b staff.ThrottleKey) int { return strings.Compare(a.Name, b.Name) })
	var wait time.Duration
	err := s.write(ctx, func(tx pgx.Tx) error {
		wait = 0
		if _, err := tx.Exec(ctx, `DELETE FROM signin_failures WHERE at <= $1`, millis(now.Add(-window))); err != nil {
			return err
		}
		for _, k := range keys {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "pacer signin "+k.Name); err != nil {
				return err
			}
			// The failure that must leave the window before the key may
			// try again: the limit-th newest.
			var oldest int64
			err := tx.QueryRow(ctx, `SELECT at FROM signin_failures WHERE key = $1 AND at > $2
				ORDER BY at DESC, id DESC OFFSET $3 LIMIT 1`, k.Name, millis(now.Add(-window)), k.Limit-1).Scan(&oldest)
			switch {
			case err == nil:
				wait = max(wait, fromMillis(oldest).Add(window).Sub(now))
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		if wait > 0 {
			return nil
		}
		for _, k := range keys {
			if _, err := tx.Exec(ctx, `INSERT INTO signin_failures (key, at) VALUES ($1, $2)`, k.Name, millis(now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reserve a sign-in: %w", err)
	}
	return wait, nil
}

// Succeed implements httpapi.SignInThrottle: the account's failures are
// forgotten, and one failure counted at now given back for each of others.
func (s *Store) Succeed(ctx context.Context, now time.Time, user string, others []string) error {
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM signin_failures WHERE key = $1`, user); err != nil {
			return err
		}
		return unreserve(ctx, tx, now, others)
	})
	if err != nil {
		return fmt.Errorf("forget failed sign-ins: %w", err)
	}
	return nil
}

// Release implements httpapi.SignInThrottle: one failure counted at now
// is given back for each of keys.
func (s *Store) Release(ctx context.Context, now time.Time, keys []string) error {
	if err := s.write(ctx, func(tx pgx.Tx) error { return unreserve(ctx, tx, now, keys) }); err != nil {
		return fmt.Errorf("give back a sign-in reservation: %w", err)
	}
	return nil
}

// unreserve deletes one failure counted at now for each of keys.
func unreserve(ctx context.Context, tx pgx.Tx, now time.Time, keys []string) error {
	for _, k := range keys {
		if _, err := tx.Exec(ctx, `DELETE FROM signin_failures WHERE id =
			(SELECT id FROM signin_failures WHERE key = $1 AND at = $2 ORDER BY id DESC LIMIT 1)`, k, millis(now)); err != nil {
			return err
		}
	}
	return nil
}
