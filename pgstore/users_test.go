package pgstore_test

import (
	"context"
	"testing"

	"pacer/internal/staff/stafftest"
)

// TestUsers runs the staff accounts' cases, the same as on SQLite (db's
// TestUsers).
func TestUsers(t *testing.T) {
	stafftest.Run(t, func(t *testing.T) stafftest.Fixture {
		s := openStore(t)
		ctx := context.Background()
		return stafftest.Fixture{
			Store: s,
			StoredHash: func(t *testing.T, name string) string {
				var hash string
				if err := s.Pool().QueryRow(ctx, `SELECT password_hash FROM users WHERE name = $1`, name).Scan(&hash); err != nil {
					t.Fatal(err)
				}
				return hash
			},
			Sessions: func(t *testing.T) int {
				var n int
				if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM sessions`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
		}
	})
}
