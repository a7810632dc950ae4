package pgstore

import (
	"net/url"
	"strings"
)

// IsURL reports whether db, a --db value, names a PostgreSQL database: a
// postgres:// or postgresql:// URL (design §10). Anything else is a SQLite
// file path.
func IsURL(db string) bool {
	s := strings.ToLower(db)
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Redact returns the URL u with its password replaced by "xxxxx", for logs
// and messages; a URL that does not parse is returned as its scheme only.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		scheme, _, _ := strings.Cut(u, ":")
		return scheme + "://…"
	}
	return p.Redacted()
}
