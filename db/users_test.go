package db_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"pacer/db"
	"pacer/scheduler"
)

// sessionHash is a stand-in session token's hash.
func sessionHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func TestUsers(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	const password = "correct horse battery"

	if n, err := d.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("count on a new database = %d, %v", n, err)
	}
	if err := d.AddUser(ctx, db.NewUser{Name: "alice", Password: password, Cost: bcrypt.MinCost}, t0); err != nil {
		t.Fatal(err)
	}
	if err := d.AddUser(ctx, db.NewUser{Name: "bob", Password: "another long one", Cost: bcrypt.MinCost}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	t.Run("ListAndCount", func(t *testing.T) {
		users, err := d.ListUsers(ctx)
		if err != nil || len(users) != 2 || users[0].Name != "alice" || !users[0].CreatedAt.Equal(t0) || users[1].Name != "bob" {
			t.Fatalf("users = %+v, %v", users, err)
		}
		if n, err := d.CountUsers(ctx); err != nil || n != 2 {
			t.Fatalf("count = %d, %v", n, err)
		}
	})

	t.Run("PasswordStoredHashed", func(t *testing.T) {
		var hash string
		if err := rawDB(t, path).QueryRow(`SELECT password_hash FROM users WHERE name = 'alice'`).Scan(&hash); err != nil {
			t.Fatal(err)
		}
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
		if err := d.AddUser(ctx, db.NewUser{Name: "alice", Password: "yet another password", Cost: bcrypt.MinCost}, t0); !errors.Is(err, scheduler.ErrConflict) {
			t.Fatalf("err = %v, want ErrConflict", err)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		for _, tc := range []struct{ name, password, field string }{
			{"", password, "name"},
			{"-alice", password, "name"},
			{"al ice", password, "name"},
			{"carol", "short", "password"},
			{"carol", strings.Repeat("p", 73), "password"},
		} {
			err := d.AddUser(ctx, db.NewUser{Name: tc.name, Password: tc.password, Cost: bcrypt.MinCost}, t0)
			var ve *scheduler.ValidationError
			if !errors.As(err, &ve) || ve.Fields[0].Field != tc.field {
				t.Errorf("add %q/%q: err = %v, want a validation error on %s", tc.name, tc.password, err, tc.field)
			}
		}
	})

	t.Run("Sessions", func(t *testing.T) {
		expires := t0.Add(time.Hour)
		if err := d.CreateSession(ctx, "alice", sessionHash("s1"), t0, expires); err != nil {
			t.Fatal(err)
		}
		if name, role, err := d.SessionUser(ctx, sessionHash("s1"), t0.Add(59*time.Minute)); err != nil || name != "alice" || role != scheduler.RoleOperator {
			t.Fatalf("session user = %q, %v", name, err)
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
		var n int
		if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM sessions`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("sessions stored = %d, %v; want 1", n, err)
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
