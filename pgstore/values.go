package pgstore

import "database/sql"

// deref is *p, or the zero value for nil (a NULL column).
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// sqlString is a nullable text column as package stored's decoders take
// it.
func sqlString(p *string) sql.NullString {
	if p == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *p, Valid: true}
}

// pgString is what package stored's encoders return as the column's
// value: nil (NULL) when not valid.
func pgString(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}
