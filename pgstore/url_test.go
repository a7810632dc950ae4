package pgstore_test

import (
	"strings"
	"testing"

	"pacer/pgstore"
)

func TestIsURLAndRedact(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://h/db": true, "postgresql://u@h/db": true, "POSTGRES://h/db": true,
		"./pacer.db": false, "/var/lib/pacer/pacer.db": false, "postgres.db": false, "file:postgres://x": false,
	} {
		if got := pgstore.IsURL(in); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", in, got, want)
		}
	}
	if got := pgstore.Redact("postgres://pacer:s3cret@db.internal:5432/pacer?sslmode=require"); strings.Contains(got, "s3cret") || !strings.Contains(got, "db.internal") {
		t.Errorf("Redact = %q", got)
	}
}
