// Package stafftest is the behaviour every store of staff accounts and
// sessions keeps (package db on SQLite, package pgstore on PostgreSQL),
// run by each store's tests with Run: the same cases on both.
package stafftest

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"pacer/internal/staff"
	"pacer/scheduler"
)

// Store is a store of staff accounts and their sessions, as the support
// page (httpapi.UserStore) and `pacer users` use it.
type Store interface {
	AddUser(ctx context.Context, u staff.NewUser, now time.Time) error
	SetPassword(ctx context.Context, name, password string, cost int) error
	UnlockUser(ctx context.Context, name string) error
	RemoveUser(ctx context.Context, name string) error
	ListUsers(ctx context.Context) ([]staff.User, error)
	CountUsers(ctx context.Context) (int, error)
	CheckPassword(ctx context.Context, name, password string) (bool, error)
	CreateSession(ctx context.Context, name string, tokenHash []byte, now, expires time.Time) error
	SessionUser(ctx context.Context, tokenHash []byte, now time.Time) (name, role string, err error)
	DeleteSession(ctx context.Context, tokenHash []byte) error
}

// Fixture is one store on a new, empty database, and two looks at its
// tables that bypass it.
type Fixture struct {
	Store
	// StoredHash reads the stored password of the account name.
	StoredHash func(t *testing.T, name string) string
	// Sessions counts the stored sessions.
	Sessions func(t *testing.T) int
}

// Open returns a Fixture on a new, empty database, closed when the test
// ends.
type Open func(t *testing.T) Fixture

// t0 is the tests' start time.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// sessionHash is a stand-in session token's hash.
func sessionHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// Run runs the cases on the stores open returns.
func Run(t *testing.T, open Open) {
	t.Run("Accounts", func(t *testing.T) { accounts(t, open) })
	t.Run("LockAndUnlock", func(t *testing.T) { lockAndUnlock(t, open) })
}

func accounts(t *testing.T, open Open) {
	ctx := context.Background()
	d := open(t)
	const password = "correct horse battery"

	if n, err := d.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("count on a new database = %d, %v", n, err)
	}
	if err := d.AddUser(ctx, staff.NewUser{Name: "alice", Password: password, Cost: bcrypt.MinCost}, t0); err != nil {
		t.Fatal(err)
	}
	if err := d.AddUser(ctx, staff.NewUser{Name: "bob", Password: "another long one", Cost: bcrypt.MinCost, Role: scheduler.RoleViewer}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	t.Run("ListAndCount", func(t *testing.T) {
		users, err := d.ListUsers(ctx)
		if err != nil || len(users) != 2 || users[0].Name != "alice" || !users[0].CreatedAt.Equal(t0) || users[0].Role != scheduler.RoleOperator ||
			users[1].Name != "bob" || users[1].Role != scheduler.RoleViewer || users[0].Locked || users[1].Locked {
			t.Fatalf("users = %+v, %v", users, err)
		}
		if n, err := d.CountUsers(ctx); err != nil || n != 2 {
			t.Fatalf("count = %d, %v", n, err)
		}
	})

	t.Run("PasswordStoredHashed", func(t *testing.T) {
		hash := d.StoredHash(t, "alice")
		if strings.Contains(hash, password) || !strings.HasPrefix(hash, "$2") {
			t.Fatalf("stored %q: want a bcrypt hash", hash)
		}
	})

	t.Run("CheckPassword", func(t *testing.T) {
		for _, tc := range []struct {
			name, password string
			want           bool
		}{
			{"alice", password, true},
			{"alice", password + "x", false},
			{"alice", "", false},
			{"alice", password + strings.Repeat("x", 80), false},
			{"alice", password, true}, // three failures in a row do not lock
			{"bob", password, false},
			{"mallory", password, false},
		} {
			got, err := d.CheckPassword(ctx, tc.name, tc.password)
			if err != nil || got != tc.want {
				t.Errorf("check %s/%q = %v, %v; want %v", tc.name, tc.password, got, err, tc.want)
			}
		}
	})

	t.Run("ErrConflict", func(t *testing.T) {
		if err := d.AddUser(ctx, staff.NewUser{Name: "alice", Password: "yet another password", Cost: bcrypt.MinCost}, t0); !errors.Is(err, scheduler.ErrConflict) {
			t.Fatalf("err = %v, want ErrConflict", err)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		for _, tc := range []struct{ name, password, role, field string }{
			{"", password, "", "name"},
			{"-alice", password, "", "name"},
			{"al ice", password, "", "name"},
			{"carol", "short", "", "password"},
			{"carol", strings.Repeat("p", 73), "", "password"},
			{"carol", password, "boss", "role"},
		} {
			err := d.AddUser(ctx, staff.NewUser{Name: tc.name, Password: tc.password, Role: tc.role, Cost: bcrypt.MinCost}, t0)
			var ve *scheduler.ValidationError
			if !errors.As(err, &ve) || ve.Fields[0].Field != tc.field {
				t.Errorf("add %q/%q/%q: err = %v, want a validation error on %s", tc.name, tc.password, tc.role, err, tc.field)
			}
		}
		if n, err := d.CountUsers(ctx); err != nil || n != 2 {
			t.Fatalf("count after refused adds = %d, %v; want 2", n, err)
		}
	})

	t.Run("Sessions", func(t *testing.T) {
		expires := t0.Add(time.Hour)
		if err := d.CreateSession(ctx, "alice", sessionHash("s1"), t0, expires); err != nil {
			t.Fatal(err)
		}
		if name, role, err := d.SessionUser(ctx, sessionHash("s1"), t0.Add(59*time.Minute)); err != nil || name != "alice" || role != scheduler.RoleOperator {
			t.Fatalf("session user = %q %q, %v", name, role, err)
		}
		if _, _, err := d.SessionUser(ctx, sessionHash("s1"), expires); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("expired session: err = %v, want ErrNotFound", err)
		}
		if _, _, err := d.SessionUser(ctx, sessionHash("other"), t0); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("unknown session: err = %v, want ErrNotFound", err)
		}
		if err := d.CreateSession(ctx, "mallory", sessionHash("s2"), t0, expires); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("session of unknown user: err = %v, want ErrNotFound", err)
		}
		// A new session drops the expired ones.
		if err := d.CreateSession(ctx, "bob", sessionHash("s3"), expires, expires.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if name, role, err := d.SessionUser(ctx, sessionHash("s3"), expires); err != nil || name != "bob" || role != scheduler.RoleViewer {
			t.Fatalf("viewer's session user = %q %q, %v", name, role, err)
		}
		if n := d.Sessions(t); n != 1 {
			t.Fatalf("sessions stored = %d; want 1", n)
		}
		if err := d.DeleteSession(ctx, sessionHash("s3")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.SessionUser(ctx, sessionHash("s3"), expires); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("signed-out session: err = %v, want ErrNotFound", err)
		}
		if err := d.DeleteSession(ctx, sessionHash("s3")); err != nil {
			t.Fatalf("deleting an ended session: %v", err)
		}
	})

	t.Run("RemoveEndsSessions", func(t *testing.T) {
		if err := d.CreateSession(ctx, "bob", sessionHash("b1"), t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := d.RemoveUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.SessionUser(ctx, sessionHash("b1"), t0); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("session of removed user: err = %v, want ErrNotFound", err)
		}
		if ok, err := d.CheckPassword(ctx, "bob", "another long one"); err != nil || ok {
			t.Fatalf("removed user signs in: %v, %v", ok, err)
		}
		if err := d.RemoveUser(ctx, "bob"); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("second remove: err = %v, want ErrNotFound", err)
		}
	})
}

// lockAndUnlock: scheduler.MaxFailedSignIns wrong passwords in a row lock
// an account, even against the right one; unlocking or a new password
// lets it in again, and a new password ends its sessions.
func lockAndUnlock(t *testing.T, open Open) {
	ctx := context.Background()
	d := open(t)
	const password, newPassword = "a long staff password", "another long password"
	if err := d.AddUser(ctx, staff.NewUser{Name: "vic", Password: password, Cost: bcrypt.MinCost}, t0); err != nil {
		t.Fatal(err)
	}
	lock := func() {
		t.Helper()
		for range scheduler.MaxFailedSignIns {
			if ok, err := d.CheckPassword(ctx, "vic", "wrong password!"); ok || err != nil {
				t.Fatalf("wrong password: %v %v", ok, err)
			}
		}
		if ok, err := d.CheckPassword(ctx, "vic", password); ok || !errors.Is(err, scheduler.ErrAccountLocked) {
			t.Fatalf("after %d failures: %v %v, want ErrAccountLocked", scheduler.MaxFailedSignIns, ok, err)
		}
		if users, err := d.ListUsers(ctx); err != nil || len(users) != 1 || !users[0].Locked {
			t.Fatalf("users = %+v, %v; want vic locked", users, err)
		}
	}
	lock()
	if err := d.UnlockUser(ctx, "vic"); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.CheckPassword(ctx, "vic", password); !ok || err != nil {
		t.Fatalf("after unlock: %v %v", ok, err)
	}
	if err := d.UnlockUser(ctx, "nobody"); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("unlock nobody: %v, want ErrNotFound", err)
	}

	// A success resets the count: failures short of the limit, a success,
	// and as many failures again do not lock.
	for range 2 {
		for range scheduler.MaxFailedSignIns - 1 {
			if ok, err := d.CheckPassword(ctx, "vic", "wrong password!"); ok || err != nil {
				t.Fatalf("wrong password: %v %v", ok, err)
			}
		}
		if ok, err := d.CheckPassword(ctx, "vic", password); !ok || err != nil {
			t.Fatalf("a right password after %d failures: %v %v", scheduler.MaxFailedSignIns-1, ok, err)
		}
	}

	lock()
	if err := d.CreateSession(ctx, "vic", sessionHash("v1"), t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := d.SetPassword(ctx, "vic", newPassword, bcrypt.MinCost); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.SessionUser(ctx, sessionHash("v1"), t0); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("session after a new password: %v, want ErrNotFound", err)
	}
	if ok, err := d.CheckPassword(ctx, "vic", newPassword); !ok || err != nil {
		t.Fatalf("the new password: %v %v", ok, err)
	}
	if ok, err := d.CheckPassword(ctx, "vic", password); ok || err != nil {
		t.Fatalf("the old password: %v %v", ok, err)
	}
	var ve *scheduler.ValidationError
	if err := d.SetPassword(ctx, "vic", "short", bcrypt.MinCost); !errors.As(err, &ve) {
		t.Fatalf("short password: %v, want a validation error", err)
	}
	if err := d.SetPassword(ctx, "nobody", newPassword, bcrypt.MinCost); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("passwd nobody: %v, want ErrNotFound", err)
	}
}
