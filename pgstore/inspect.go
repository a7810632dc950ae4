package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pacerTables are tables every schema version has: Check reports those
// missing.
var pacerTables = []string{"scopes", "operations", "attempts", "audit", "changes"}

// Check inspects the pacer database at url (`pacer check`) without the
// credentials key and without writing: it connects, reads the schema
// version and looks for pacer's tables, in one read-only transaction. It
// returns the version found, and an error for a database that holds no
// pacer database (ErrNoDatabase), another application's
// (*NotPacerError), a newer schema (*SchemaTooNewError), an older one
// (run pacer serve to migrate it) or missing tables.
func Check(ctx context.Context, url string) (version int, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, fmt.Errorf("check: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if version, err = schemaVersion(ctx, tx); err != nil {
		return 0, err
	}
	switch known := SchemaVersion(); {
	case version == 0:
		return 0, fmt.Errorf("it has no pacer schema yet: %w", ErrNoDatabase)
	case version > known:
		return version, &SchemaTooNewError{Found: version, Known: known}
	case version < known:
		return version, fmt.Errorf("schema version is %d, this binary expects %d: pacer serve migrates it", version, known)
	}
	var missing []string
	for _, t := range pacerTables {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&ok); err != nil {
			return version, fmt.Errorf("check: %w", err)
		}
		if !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return version, errors.New("tables missing: " + strings.Join(missing, ", "))
	}
	return version, nil
}
