package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/staff"
	"pacer/scheduler"
)

// The staff accounts of the support page and their sessions, with the
// rules of package staff and the behaviour of package db's (run by
// internal/staff/stafftest on both stores). Every process sharing the
// database sees the same accounts, sessions and failed sign-ins.

// AddUser creates the staff account u.Name with a bcrypt hash of
// u.Password at now. It returns a *scheduler.ValidationError for a bad
// name, password or role and ErrConflict (wrapped) when the name is taken.
func (s *Store) AddUser(ctx context.Context, u staff.NewUser, now time.Time) error {
	u, err := staff.Check(u)
	if err != nil {
		return err
	}
	// A taken name is refused before the (slow, on purpose) hashing; the
	// UNIQUE constraint still decides a race.
	var taken bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE name = $1)`, u.Name).Scan(&taken); err != nil {
		return fmt.Errorf("add user %s: %w", u.Name, err)
	} else if taken {
		return fmt.Errorf("add user %s: %w: the name is taken", u.Name, scheduler.ErrConflict)
	}
	hash, err := staff.Hash(u.Password, u.Cost)
	if err != nil {
		return fmt.Errorf("add user %s: %w", u.Name, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO users (name, password_hash, role, created_at) VALUES ($1, $2, $3, $4)`,
		u.Name, hash, u.Role, millis(now))
	if pgCode(err) == codeUniqueViolation {
		return fmt.Errorf("add user %s: %w: the name is taken", u.Name, scheduler.ErrConflict)
	} else if err != nil {
		return fmt.Errorf("add user %s: %w", u.Name, err)
	}
	return nil
}

// SetPassword replaces the password of the staff account name (at bcrypt
// cost, 0 for the default), unlocks it and ends its sessions. A
// *scheduler.ValidationError for a bad password, ErrNotFound (wrapped)
// for no such account.
func (s *Store) SetPassword(ctx context.Context, name, password string, cost int) error {
	if err := staff.Validate(name, password); err != nil {
		return err
	}
	hash, err := staff.Hash(password, cost)
	if err != nil {
		return fmt.Errorf("set password of %s: %w", name, err)
	}
	return s.updateUser(ctx, name, "set password of", true, `UPDATE users SET password_hash = $2, failed_signins = 0 WHERE name = $1`, name, hash)
}

// UnlockUser lets the staff account name sign in again after failed
// sign-ins locked it; ErrNotFound (wrapped) for no such account.
func (s *Store) UnlockUser(ctx context.Context, name string) error {
	return s.updateUser(ctx, name, "unlock", false, `UPDATE users SET failed_signins = 0 WHERE name = $1`, name)
}

// updateUser runs one UPDATE of the staff account name (what names it,
// for the error; the query's $1 is the name) in a transaction, and ends
// the account's sessions when endSessions is set; ErrNotFound (wrapped)
// when it matched nothing.
func (s *Store) updateUser(ctx context.Context, name, what string, endSessions bool, query string, args ...any) error {
	err := s.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, query, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return scheduler.ErrNotFound
		}
		if endSessions {
			_, err = tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE name = $1)`, name)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	return nil
}

// RemoveUser deletes the staff account name and ends its sessions;
// ErrNotFound (wrapped) when there is none.
func (s *Store) RemoveUser(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM users WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("remove user %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("remove user %s: %w", name, scheduler.ErrNotFound)
	}
	return nil
}

// ListUsers returns every staff account, by name.
func (s *Store) ListUsers(ctx context.Context) ([]staff.User, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, role, failed_signins, created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []staff.User
	for rows.Next() {
		var (
			u      staff.User
			failed int
			at     int64
		)
		if err := rows.Scan(&u.Name, &u.Role, &failed, &at); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		u.Locked, u.CreatedAt = staff.Locked(failed), fromMillis(at)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// CountUsers returns how many staff accounts exist.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// CheckPassword reports whether password is the staff account name's
// (staff.Verify). An unknown name is false, after the same bcrypt work as
// a known one. A wrong password counts against the account, in every
// process alike: after scheduler.MaxFailedSignIns in a row it is locked,
// and every sign-in is refused with scheduler.ErrAccountLocked until
// UnlockUser; a right one resets the count. The error is otherwise for a
// store that cannot answer, never for a wrong password.
func (s *Store) CheckPassword(ctx context.Context, name, password string) (bool, error) {
	var (
		hash   string
		failed int
	)
	err := s.pool.QueryRow(ctx, `SELECT password_hash, failed_signins FROM users WHERE name = $1`, name).Scan(&hash, &failed)
	if errors.Is(err, pgx.ErrNoRows) {
		return staff.Unknown(password), nil
	} else if err != nil {
		return false, fmt.Errorf("check password of %s: %w", name, err)
	}
	ok, count, err := staff.Verify(hash, failed, password)
	switch {
	case errors.Is(err, scheduler.ErrAccountLocked):
		return false, fmt.Errorf("sign in as %s: %w", name, err)
	case err != nil:
		return false, fmt.Errorf("check password of %s: %w", name, err)
	case ok && failed > 0:
		if _, err := s.pool.Exec(ctx, `UPDATE users SET failed_signins = 0 WHERE name = $1`, name); err != nil {
			return false, fmt.Errorf("check password of %s: %w", name, err)
		}
	case count:
		if _, err := s.pool.Exec(ctx, `UPDATE users SET failed_signins = failed_signins + 1 WHERE name = $1`, name); err != nil {
			return false, fmt.Errorf("check password of %s: %w", name, err)
		}
	}
	return ok, nil
}

// CreateSession signs the staff account name in: it stores tokenHash (the
// SHA-256 of the cookie's token, never the token) valid until expires, and
// drops sessions expired at now. ErrNotFound (wrapped) when the account
// does not exist (removed meanwhile).
func (s *Store) CreateSession(ctx context.Context, name string, tokenHash []byte, now, expires time.Time) error {
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, millis(now)); err != nil {
			return fmt.Errorf("drop expired: %w", err)
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO sessions (token_hash, user_id, created_at, expires_at)
			SELECT $1, id, $2, $3 FROM users WHERE name = $4`,
			tokenHash, millis(now), millis(expires), name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("for %s: %w", name, scheduler.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// SessionUser returns the staff account signed in with tokenHash and its
// role, when that session exists and has not expired at now; ErrNotFound
// otherwise.
func (s *Store) SessionUser(ctx context.Context, tokenHash []byte, now time.Time) (name, role string, err error) {
	err = s.pool.QueryRow(ctx, `
		SELECT u.name, u.role FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = $1 AND s.expires_at > $2`, tokenHash, millis(now)).Scan(&name, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", scheduler.ErrNotFound
	} else if err != nil {
		return "", "", fmt.Errorf("find session: %w", err)
	}
	return name, role, nil
}

// DeleteSession ends the session tokenHash (signing out); ending one that
// does not exist is not an error.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
