package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"pacer/internal/pgserver"
)

// database is where the run's processes keep their state: a SQLite file,
// or a PostgreSQL database all of them share.
type database struct {
	url string   // pacer's --db
	env []string // added to each process's environment
	// srv is the throwaway PostgreSQL (-db postgres), nil otherwise: only
	// it can be stopped and restarted during the run.
	srv   *pgserver.Server
	close func()
}

// isPostgres reports whether -db names PostgreSQL.
func isPostgres(db string) bool {
	return db == "postgres" || strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openDatabase prepares the run's database: a SQLite file in work when
// db is empty; with "postgres" a throwaway durable PostgreSQL; with a
// postgres:// URL a new database on that server, dropped at the end.
// PostgreSQL needs the credentials key in the environment, the same for
// every process.
func openDatabase(ctx context.Context, db, work string, seed uint64) (*database, error) {
	if db == "" {
		return &database{url: filepath.Join(work, "pacer.db"), close: func() {}}, nil
	}
	if !isPostgres(db) {
		return nil, fmt.Errorf("-db %q: want empty (SQLite), postgres, or a postgres:// URL", db)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	env := []string{"PACER_SECRET_KEY=" + base64.StdEncoding.EncodeToString(key)}
	if db == "postgres" {
		srv, err := pgserver.Start(ctx, pgserver.Options{Durable: true})
		if err != nil {
			return nil, err
		}
		return &database{url: srv.URL(), env: env, srv: srv, close: func() { _ = srv.Stop() }}, nil
	}
	name := fmt.Sprintf("pacer_crashtest_%d", seed)
	u, err := url.Parse(db)
	if err != nil {
		return nil, errors.New("-db: not a valid URL") // its error would repeat the URL, password and all
	}
	admin, err := pgx.Connect(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop := func() {
		conn, err := pgx.Connect(context.Background(), db)
		if err == nil {
			_, err = conn.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
			conn.Close(context.Background())
		}
		if err != nil {
			fmt.Println("crashtest: drop database", name+":", err)
		}
	}
	return &database{url: u.String(), env: env, close: drop}, nil
}

// restart stops the throwaway PostgreSQL as a crash would and starts it
// again after outage.
func (d *database) restart(ctx context.Context, outage func()) error {
	if d.srv == nil {
		return errors.New("not a throwaway server")
	}
	if err := d.srv.StopImmediate(); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	outage()
	if err := d.srv.Restart(ctx); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	return nil
}
