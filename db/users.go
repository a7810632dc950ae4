package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pacer/internal/staff"
	"pacer/scheduler"
)

// Bounds of staff accounts (package staff's, where both stores find them).
const (
	// MinPasswordLength is the fewest characters a staff password may have.
	MinPasswordLength = staff.MinPasswordLength
	// MaxPasswordBytes is the most bytes bcrypt reads of a password.
	MaxPasswordBytes = staff.MaxPasswordBytes
	// DefaultPasswordCost is the bcrypt cost of new passwords.
	DefaultPasswordCost = staff.DefaultPasswordCost
)

// User is a staff account of the support page (staff.User). Its password
// hash never leaves this package.
type User = staff.User

// NewUser is a staff account to add (staff.NewUser).
type NewUser = staff.NewUser

// ValidateUser checks a new account's name and password (staff.Validate):
// a *scheduler.ValidationError naming the fields at fault, or nil.
func ValidateUser(name, password string) error { return staff.Validate(name, password) }

// AddUser creates the staff account u.Name with a bcrypt hash of
// u.Password at now. It returns a *scheduler.ValidationError for a bad
// name or password and ErrConflict (wrapped) when the name is taken.
func (db *DB) AddUser(ctx context.Context, u NewUser, now time.Time) error {
	u, err := staff.Check(u)
	if err != nil {
		return err
	}
	name := u.Name
	// A taken name is refused before the (slow, on purpose) hashing; the
	// UNIQUE constraint still decides a race.
	var taken int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE name = ?`, name).Scan(&taken); err != nil {
		return fmt.Errorf("add user %s: %w", name, err)
	} else if taken > 0 {
		return fmt.Errorf("add user %s: %w: the name is taken", name, scheduler.ErrConflict)
	}
	hash, err := staff.Hash(u.Password, u.Cost)
	if err != nil {
		return fmt.Errorf("add user %s: %w", name, err)
	}
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("add user %s: %w", name, err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO users (name, password_hash, role, created_at) VALUES (?, ?, ?, ?)`,
		name, hash, u.Role, millis(now))
	if isUniqueViolation(err) {
		return fmt.Errorf("add user %s: %w: the name is taken", name, scheduler.ErrConflict)
	} else if err != nil {
		return fmt.Errorf("add user %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add user %s: %w", name, err)
	}
	return nil
}

// SetPassword replaces the password of the staff account name (at bcrypt
// cost, 0 for the default), unlocks it and ends its sessions. A
// *scheduler.ValidationError for a bad password, ErrNotFound (wrapped)
// for no such account.
func (db *DB) SetPassword(ctx context.Context, name, password string, cost int) error {
	if err := ValidateUser(name, password); err != nil {
		return err
	}
	hash, err := staff.Hash(password, cost)
	if err != nil {
		return fmt.Errorf("set password of %s: %w", name, err)
	}
	return db.updateUser(ctx, name, "set password of", true, `UPDATE users SET password_hash = ?, failed_signins = 0 WHERE name = ?`, hash, name)
}

// UnlockUser lets the staff account name sign in again after failed
// sign-ins locked it; ErrNotFound (wrapped) for no such account.
func (db *DB) UnlockUser(ctx context.Context, name string) error {
	return db.updateUser(ctx, name, "unlock", false, `UPDATE users SET failed_signins = 0 WHERE name = ?`, name)
}

// updateUser runs one UPDATE of a staff account (what names it, for the
// error) in a transaction, and ends the account's sessions when
// endSessions is set (its password changed); ErrNotFound (wrapped) when
// it matched nothing.
func (db *DB) updateUser(ctx context.Context, name, what string, endSessions bool, query string, args ...any) error {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	} else if n == 0 {
		return fmt.Errorf("%s %s: %w", what, name, scheduler.ErrNotFound)
	}
	if endSessions {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE name = ?)`, name); err != nil {
			return fmt.Errorf("%s %s: %w", what, name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	return nil
}

// RemoveUser deletes the staff account name and ends its sessions;
// ErrNotFound (wrapped) when there is none.
func (db *DB) RemoveUser(ctx context.Context, name string) error {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("remove user %s: %w", name, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM users WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("remove user %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("remove user %s: %w", name, err)
	} else if n == 0 {
		return fmt.Errorf("remove user %s: %w", name, scheduler.ErrNotFound)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("remove user %s: %w", name, err)
	}
	return nil
}

// ListUsers returns every staff account, by name.
func (db *DB) ListUsers(ctx context.Context) ([]User, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT name, role, failed_signins, created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var (
			u          User
			failed, at int64
		)
		if err := rows.Scan(&u.Name, &u.Role, &failed, &at); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		u.Locked, u.CreatedAt = staff.Locked(int(failed)), fromMillis(at)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// CountUsers returns how many staff accounts exist.
func (db *DB) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// CheckPassword reports whether password is the staff account name's. An
// unknown name is false, after the same bcrypt work as a known one. A
// wrong password counts against the account: after
// scheduler.MaxFailedSignIns in a row it is locked, and every sign-in is
// refused with scheduler.ErrAccountLocked until UnlockUser; a right one
// resets the count. The error is otherwise for a store that cannot answer,
// never for a wrong password.
func (db *DB) CheckPassword(ctx context.Context, name, password string) (bool, error) {
	var (
		hash   string
		failed int
	)
	err := db.read.QueryRowContext(ctx, `SELECT password_hash, failed_signins FROM users WHERE name = ?`, name).Scan(&hash, &failed)
	if errors.Is(err, sql.ErrNoRows) {
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
		if _, err := db.write.ExecContext(ctx, `UPDATE users SET failed_signins = 0 WHERE name = ?`, name); err != nil {
			return false, fmt.Errorf("check password of %s: %w", name, err)
		}
	case count:
		if _, err := db.write.ExecContext(ctx, `UPDATE users SET failed_signins = failed_signins + 1 WHERE name = ?`, name); err != nil {
			return false, fmt.Errorf("check password of %s: %w", name, err)
		}
	}
	return ok, nil
}

// CreateSession signs the staff account name in: it stores tokenHash (the
// SHA-256 of the cookie's token, never the token) valid until expires, and
// drops sessions expired at now. ErrNotFound (wrapped) when the account
// does not exist (removed meanwhile).
func (db *DB) CreateSession(ctx context.Context, name string, tokenHash []byte, now, expires time.Time) error {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, millis(now)); err != nil {
		return fmt.Errorf("create session: drop expired: %w", err)
	}
	res, err := tx.ExecContext(ctx, `
		INSERT INTO sessions (token_hash, user_id, created_at, expires_at)
		SELECT ?, id, ?, ? FROM users WHERE name = ?`,
		tokenHash, millis(now), millis(expires), name)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create session: %w", err)
	} else if n == 0 {
		return fmt.Errorf("create session for %s: %w", name, scheduler.ErrNotFound)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// SessionUser returns the staff account signed in with tokenHash and its
// role, when that session exists and has not expired at now; ErrNotFound
// otherwise.
func (db *DB) SessionUser(ctx context.Context, tokenHash []byte, now time.Time) (name, role string, err error) {
	err = db.read.QueryRowContext(ctx, `
		SELECT u.name, u.role FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = ? AND s.expires_at > ?`, tokenHash, millis(now)).Scan(&name, &role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", scheduler.ErrNotFound
	} else if err != nil {
		return "", "", fmt.Errorf("find session: %w", err)
	}
	return name, role, nil
}

// DeleteSession ends the session tokenHash (signing out); ending one that
// does not exist is not an error.
func (db *DB) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if _, err := db.write.ExecContext(ctx, `DELETE FROM sessions WHERE token_hash = ?`, tokenHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
