package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"pacer/internal/pgtest"
	"pacer/pgstore"
)

// The first process to open a database fixes its credentials key: a
// process with another key is refused even before any scope stores
// credentials (design §10: the same key everywhere).
func TestOpenRefusesAnotherKeyOnAnEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openStoreAt(t, url)
	if scopes, err := s.ListScopes(ctx); err != nil || len(scopes) != 0 {
		t.Fatalf("scopes = %v, %v; want none", scopes, err)
	}
	other := []byte("fedcba9876543210fedcba9876543210")
	if _, err := pgstore.Open(ctx, url, pgstore.Options{Key: other}); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("open with another key: %v, want refused", err)
	}
	openStoreAt(t, url) // the first key still opens it
}
