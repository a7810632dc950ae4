package db_test

import (
	"testing"

	"pacer/internal/staff/stafftest"
)

// TestUsers runs the staff accounts' cases, the same as on PostgreSQL
// (pgstore's TestUsers).
func TestUsers(t *testing.T) {
	stafftest.Run(t, func(t *testing.T) stafftest.Fixture {
		d, path := newTestDB(t)
		raw := rawDB(t, path)
		return stafftest.Fixture{
			Store: d,
			StoredHash: func(t *testing.T, name string) string {
				var hash string
				if err := raw.QueryRow(`SELECT password_hash FROM users WHERE name = ?`, name).Scan(&hash); err != nil {
					t.Fatal(err)
				}
				return hash
			},
			Sessions: func(t *testing.T) int {
				var n int
				if err := raw.QueryRow(`SELECT COUNT(*) FROM sessions`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
		}
	})
}
