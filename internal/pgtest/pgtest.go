// Package pgtest gives tests a throwaway PostgreSQL database, one way for
// every package, as pacertest does for SQLite: a fresh database per test,
// cloned from a template, dropped when the test ends.
//
// One server serves a whole test binary. It is started the first time a
// test asks for a database (initdb and postgres from the newest
// /usr/lib/postgresql/N/bin, in a temporary directory, listening on a unix
// socket only, as an unprivileged user when the tests run as root) and
// stopped when the binary's tests end: a package that uses pgtest runs its
// tests through Main from its TestMain. PACER_TEST_POSTGRES=postgres://…
// points the tests at an existing server instead (its user must be allowed
// to create databases). Without PostgreSQL the tests fail, with one line
// saying how to install it: they never skip.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"pacer/internal/pgserver"
)

// EnvURL is the environment variable naming an existing server to use
// instead of a throwaway one.
const EnvURL = "PACER_TEST_POSTGRES"

// InstallHint is the line a test fails with when PostgreSQL is missing.
const InstallHint = pgserver.InstallHint

// Template is a database that fresh databases are cloned from: Setup runs
// once per test binary on a new, empty database named after Name (with
// the server's URL of that database), and must close every connection it
// opens, since PostgreSQL clones only a database no one is connected to.
type Template struct {
	Name  string
	Setup func(ctx context.Context, url string) error
}

// Empty is the template of empty databases.
var Empty = Template{Name: "empty"}

// cluster is the binary's server and the templates made on it. It is the
// package's one piece of state: a test binary has one server, shared by
// every test in it, and Main stops it.
type cluster struct {
	mu        sync.Mutex
	inMain    bool
	started   bool
	err       error
	srv       *pgserver.Server // nil with an existing server (EnvURL)
	admin     *pgxpool.Pool
	baseURL   string // the server's URL, with no database
	templates map[string]*template
	prefix    string // of the names of this binary's databases
	n         atomic.Int64
	// StartTook is how long the server took to be ready (for reports).
	startTook time.Duration
}

// template is one Template made on the server.
type template struct {
	once sync.Once
	db   string
	err  error
}

var the = &cluster{templates: map[string]*template{}}

// Main runs the binary's tests (m.Run) and then stops the server, if a test
// started one, and drops what the tests left on an existing server. Call it
// from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	the.mu.Lock()
	the.inMain = true
	the.mu.Unlock()
	code := m.Run()
	if err := the.close(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// URL returns the URL of a new database cloned from the empty template,
// dropped when tb ends.
func URL(tb testing.TB) string {
	tb.Helper()
	return URLFrom(tb, Empty)
}

// URLFrom returns the URL of a new database cloned from tmpl (made on the
// first call that names it), dropped when tb ends.
func URLFrom(tb testing.TB, tmpl Template) string {
	tb.Helper()
	ctx := context.Background()
	if err := the.start(ctx); err != nil {
		tb.Fatal(err)
	}
	src, err := the.template(ctx, tmpl)
	if err != nil {
		tb.Fatalf("pgtest: template %s: %v", tmpl.Name, err)
	}
	name := fmt.Sprintf("%s_%d", the.prefix, the.n.Add(1))
	if _, err := the.admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE `+pgx.Identifier{src}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if _, err := the.admin.Exec(context.Background(), `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(the.baseURL, name)
}

// StartTook is how long the binary's server took to start and answer (0
// with an existing server, or before a test asked for a database).
func StartTook() time.Duration {
	the.mu.Lock()
	defer the.mu.Unlock()
	return the.startTook
}

// start starts the server, or connects to the existing one, once; a
// failure fails every later call the same way.
func (c *cluster) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inMain {
		return fmt.Errorf("pgtest: run the tests through pgtest.Main (func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }), which stops the server")
	}
	if c.started {
		return c.err
	}
	c.started = true
	began := time.Now()
	c.prefix = fmt.Sprintf("pgtest_%d", os.Getpid())
	if url := os.Getenv(EnvURL); url != "" {
		c.baseURL = url
	} else {
		c.srv, c.err = pgserver.Start(ctx, pgserver.Options{})
		if c.err != nil {
			return c.err
		}
		c.baseURL = c.srv.URL()
	}
	c.admin, c.err = pgxpool.New(ctx, c.baseURL)
	if c.err == nil {
		c.err = c.admin.Ping(ctx)
	}
	if c.err != nil {
		c.err = fmt.Errorf("pgtest: connect to %s: %w", redact(c.baseURL), c.err)
		return c.err
	}
	c.startTook = time.Since(began)
	return nil
}

// template makes tmpl's database once and returns its name.
func (c *cluster) template(ctx context.Context, tmpl Template) (string, error) {
	c.mu.Lock()
	t, ok := c.templates[tmpl.Name]
	if !ok {
		t = &template{db: c.prefix + "_t_" + tmpl.Name}
		c.templates[tmpl.Name] = t
	}
	c.mu.Unlock()
	t.once.Do(func() {
		if _, t.err = c.admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{t.db}.Sanitize()+` TEMPLATE template0`); t.err != nil {
			return
		}
		if tmpl.Setup != nil {
			t.err = tmpl.Setup(ctx, withDatabase(c.baseURL, t.db))
		}
	})
	return t.db, t.err
}

// close drops the templates and stops the server.
func (c *cluster) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return nil
	}
	var errs []string
	if c.admin != nil {
		if c.srv == nil { // an existing server keeps nothing of ours
			for _, t := range c.templates {
				if _, err := c.admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{t.db}.Sanitize()+` WITH (FORCE)`); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
		c.admin.Close()
	}
	if c.srv != nil {
		if err := c.srv.Stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// withDatabase is the server URL u with its database set to name.
func withDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u // the connection that uses it says what is wrong
	}
	p.Path = "/" + name
	return p.String()
}

// redact is u without its password, for messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the server of " + EnvURL
	}
	return p.Redacted()
}
