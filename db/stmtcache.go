package db

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
)

// StatementCacheSize bounds the prepared statements each connection keeps.
// The store's statements are a few dozen fixed texts; filtered listings add
// one text per combination of filters used.
const StatementCacheSize = 128

// cachingConnector opens SQLite connections that keep their prepared
// statements. database/sql prepares a statement for every call when the
// driver's connection offers no Exec/Query shortcut, and closes it after; a
// cachingConn answers that Prepare from its cache and that Close by putting
// the statement back, so each SQL text is parsed once per connection
// instead of once per call (parsing was 40 % of the CPU of a claim → send →
// record cycle).
type cachingConnector struct {
	dsn    string
	driver *sqlite.Driver
	// writer, when set (the writer's pool), records the failures that say
	// the database cannot be written, and hears of every commit.
	writer *writerHooks
}

// Connect opens one connection.
func (c cachingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, errors.New("open database: the sqlite driver's connection lacks context methods")
	}
	return &cachingConn{inner: inner, byText: map[string]*cachedStmt{}, idle: list.New(), writer: c.writer}, nil
}

// Driver returns the underlying driver.
func (c cachingConnector) Driver() driver.Driver { return c.driver }

// sqliteConn is the part of modernc.org/sqlite's connection a cachingConn
// forwards to.
type sqliteConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// sqliteStmt is the part of modernc.org/sqlite's statement a cachedStmt
// forwards to.
type sqliteStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// cachingConn is one SQLite connection with a bounded cache of prepared
// statements, least recently used evicted first. database/sql uses a
// connection from one goroutine at a time, so it needs no lock. It offers
// no ExecContext/QueryContext on purpose: that makes database/sql go
// through PrepareContext.
type cachingConn struct {
	inner    sqliteConn
	byText   map[string]*cachedStmt
	idle     *list.List   // of *cachedStmt not in use, most recently used first
	prepared int          // statements SQLite has prepared (compiled) on this connection
	writer   *writerHooks // nil except on the writer
}

// cachedStmt is a prepared statement that a cachingConn lends out: Close
// returns it to the cache (or finalizes it when it is not cached).
type cachedStmt struct {
	conn   *cachingConn
	inner  sqliteStmt
	text   string
	cached bool          // held in conn.byText
	inUse  bool          // lent out: between Prepare and Close
	elem   *list.Element // in conn.idle while not in use
}

// Prepare implements driver.Conn.
func (c *cachingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext lends the cached statement for query, preparing it on
// first use. A statement already lent out (a query nested inside another
// with the same text) gets a fresh, uncached statement.
func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if s, ok := c.byText[query]; ok && !s.inUse {
		c.idle.Remove(s.elem)
		s.elem, s.inUse = nil, true
		return s, nil
	}
	prepared, err := c.inner.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.check(err)
	}
	c.prepared++
	inner, ok := prepared.(sqliteStmt)
	if !ok {
		prepared.Close()
		return nil, errors.New("prepare statement: the sqlite driver's statement lacks context methods")
	}
	s := &cachedStmt{conn: c, inner: inner, text: query, inUse: true}
	if _, taken := c.byText[query]; !taken {
		s.cached = true
		c.byText[query] = s
	}
	return s, nil
}

// release takes back a lent statement, evicting the least recently used
// idle one when the cache is over its bound.
func (c *cachingConn) release(s *cachedStmt) error {
	s.inUse = false
	if !s.cached {
		return s.inner.Close()
	}
	s.elem = c.idle.PushFront(s)
	if len(c.byText) <= StatementCacheSize {
		return nil
	}
	oldest := c.idle.Back().Value.(*cachedStmt)
	c.idle.Remove(oldest.elem)
	delete(c.byText, oldest.text)
	return oldest.inner.Close()
}

// Close finalizes every cached statement and closes the connection.
func (c *cachingConn) Close() error {
	var errs []error
	for _, s := range c.byText {
		errs = append(errs, s.inner.Close())
	}
	clear(c.byText)
	c.idle.Init()
	errs = append(errs, c.inner.Close())
	return errors.Join(errs...)
}

// Begin implements driver.Conn.
func (c *cachingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements driver.ConnBeginTx. Failures of the transaction
// (and of its statements) are classified: see classify.
func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.inner.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.check(err)
	}
	return &checkedTx{inner: tx, conn: c}, nil
}

// Ping implements driver.Pinger.
func (c *cachingConn) Ping(ctx context.Context) error { return c.inner.Ping(ctx) }

// ResetSession implements driver.SessionResetter.
func (c *cachingConn) ResetSession(ctx context.Context) error { return c.inner.ResetSession(ctx) }

// IsValid implements driver.Validator.
func (c *cachingConn) IsValid() bool { return c.inner.IsValid() }

// Close returns the statement to its connection's cache.
func (s *cachedStmt) Close() error { return s.conn.release(s) }

// NumInput implements driver.Stmt.
func (s *cachedStmt) NumInput() int { return s.inner.NumInput() }

// Exec implements driver.Stmt.
func (s *cachedStmt) Exec(args []driver.Value) (driver.Result, error) {
	res, err := s.inner.Exec(args) //nolint:staticcheck // required by driver.Stmt
	return res, s.conn.check(err)
}

// Query implements driver.Stmt.
func (s *cachedStmt) Query(args []driver.Value) (driver.Rows, error) {
	rows, err := s.inner.Query(args) //nolint:staticcheck // required by driver.Stmt
	return rows, s.conn.check(err)
}

// ExecContext implements driver.StmtExecContext.
func (s *cachedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	res, err := s.inner.ExecContext(ctx, args)
	return res, s.conn.check(err)
}

// QueryContext implements driver.StmtQueryContext.
func (s *cachedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := s.inner.QueryContext(ctx, args)
	return rows, s.conn.check(err)
}
