// Package staff holds the rules of the support page's staff accounts that
// every store keeps alike (package db on SQLite, package pgstore on
// PostgreSQL): what a name and a password may be, how a password is
// hashed and checked, and when failed sign-ins lock an account. The
// stores own the tables and the SQL; this package owns no state.
package staff

import (
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"pacer/scheduler"
)

// Bounds of staff accounts.
const (
	// MinPasswordLength is the fewest characters a staff password may have.
	MinPasswordLength = 10
	// MaxPasswordBytes is the most bytes bcrypt reads of a password.
	MaxPasswordBytes = 72
)

// DefaultPasswordCost is the bcrypt cost of new passwords.
const DefaultPasswordCost = bcrypt.DefaultCost

// namePattern is what a staff account name may look like.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// timingHash is a bcrypt hash (of a throwaway value) compared against when
// a sign-in names no account, so an unknown name costs as much time as a
// wrong password and the timing does not reveal which names exist.
const timingHash = "$2a$10$xlkOGlo1rXYoIbebt1V1ae1WPYrGlyRyZL6diDXNHJbUk4qoWy5fm"

// User is a staff account of the support page as the stores list it. Its
// password hash never leaves the store.
type User struct {
	Name string
	// Role is scheduler.RoleViewer or scheduler.RoleOperator.
	Role string
	// Locked is true after scheduler.MaxFailedSignIns failed sign-ins in a
	// row, until the account is unlocked.
	Locked    bool
	CreatedAt time.Time
}

// NewUser is a staff account to add.
type NewUser struct {
	Name     string
	Password string
	// Role is scheduler.RoleViewer or scheduler.RoleOperator; empty means
	// operator.
	Role string
	// Cost is the bcrypt cost (bcrypt.MinCost to bcrypt.MaxCost); 0 means
	// DefaultPasswordCost. Tests lower it: hashing is slow on purpose.
	Cost int
}

// Validate checks a new account's name and password: a
// *scheduler.ValidationError naming the fields at fault, or nil.
func Validate(name, password string) error {
	v := &scheduler.ValidationError{}
	if !namePattern.MatchString(name) {
		v.Fields = append(v.Fields, scheduler.FieldError{Field: "name", Message: "must be 1-64 characters: letters, digits and . _ @ - (starting with a letter or digit)"})
	}
	switch {
	case utf8.RuneCountInString(password) < MinPasswordLength:
		v.Fields = append(v.Fields, scheduler.FieldError{Field: "password", Message: fmt.Sprintf("must have at least %d characters", MinPasswordLength)})
	case len(password) > MaxPasswordBytes:
		v.Fields = append(v.Fields, scheduler.FieldError{Field: "password", Message: fmt.Sprintf("must be at most %d bytes", MaxPasswordBytes)})
	}
	if len(v.Fields) > 0 {
		return v
	}
	return nil
}

// Check validates the account u to add (name, password, role) and fills
// in its default role: a *scheduler.ValidationError naming the fields at
// fault, or nil. A store then hashes u.Password (Hash) and writes it.
func Check(u NewUser) (NewUser, error) {
	if u.Role == "" {
		u.Role = scheduler.RoleOperator
	}
	if err := Validate(u.Name, u.Password); err != nil {
		return u, err
	}
	if u.Role != scheduler.RoleViewer && u.Role != scheduler.RoleOperator {
		return u, &scheduler.ValidationError{Fields: []scheduler.FieldError{{Field: "role", Message: "must be viewer (looks, acts on nothing) or operator (looks and acts)"}}}
	}
	return u, nil
}

// Hash is the bcrypt hash of password at cost (0: DefaultPasswordCost).
func Hash(password string, cost int) (string, error) {
	if cost == 0 {
		cost = DefaultPasswordCost
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(hash), nil
}

// Locked reports whether an account with failed failed sign-ins in a row
// is locked.
func Locked(failed int) bool { return failed >= scheduler.MaxFailedSignIns }

// Verify decides a sign-in of an account whose stored hash is hash and
// whose failed sign-ins in a row are failed: ok when password is right;
// scheduler.ErrAccountLocked (wrapped) for a locked account, whatever the
// password; another error only when the hash cannot be compared. The store
// then resets the count after a success that followed failures, and adds
// one after a failure (count).
func Verify(hash string, failed int, password string) (ok, count bool, err error) {
	if Locked(failed) {
		return false, false, scheduler.ErrAccountLocked
	}
	switch err = bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)); {
	case err == nil && len(password) <= MaxPasswordBytes:
		return true, false, nil
	case err == nil, errors.Is(err, bcrypt.ErrMismatchedHashAndPassword), errors.Is(err, bcrypt.ErrPasswordTooLong):
		return false, true, nil
	}
	return false, false, err
}

// Unknown spends on a sign-in that names no account the bcrypt work of
// one that does, and reports it wrong.
func Unknown(password string) bool {
	_ = bcrypt.CompareHashAndPassword([]byte(timingHash), []byte(password[:min(len(password), MaxPasswordBytes)]))
	return false
}

// ThrottleKey is a key of the sign-in throttle (httpapi.SignInThrottle),
// such as "user:NAME" or "client:ADDR", with its limit: the failed
// sign-ins within the window that block it.
type ThrottleKey struct {
	Name  string
	Limit int
}
