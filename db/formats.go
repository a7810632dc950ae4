package db

import (
	"database/sql"

	"pacer/internal/stored"
	"pacer/providers"
	"pacer/scheduler"
)

// The stored formats of the JSON columns are package stored's, shared with
// the PostgreSQL store (one definition of each format): these are the
// names the rest of db calls them by.
//
//	operation_requests.headers  encodeHeaders
//	attempts.hint               encodeHint
//	attempts.response           encodeResult
//	attempts.answer             encodeResult
//	scopes.profile_spec         encodeProfileSpec
//	scopes.credentials          sealed (secret.go)

func encodeHeaders(h map[string]string) (sql.NullString, error) { return stored.EncodeHeaders(h) }

func decodeHeaders(v sql.NullString) (map[string]string, error) { return stored.DecodeHeaders(v) }

func encodeHint(h *providers.Hint) (sql.NullString, error) { return stored.EncodeHint(h) }

func decodeHint(v sql.NullString) (*providers.Hint, error) { return stored.DecodeHint(v) }

func encodeResult(r *scheduler.Result) (sql.NullString, error) { return stored.EncodeResult(r) }

func decodeResult(v sql.NullString) (*scheduler.Result, error) { return stored.DecodeResult(v) }

func encodeProfileSpec(spec *providers.Spec) (sql.NullString, error) {
	return stored.EncodeProfileSpec(spec)
}

func decodeProfileSpec(v sql.NullString) (*providers.Spec, error) {
	return stored.DecodeProfileSpec(v)
}
