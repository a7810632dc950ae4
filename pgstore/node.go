package pgstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"pacer/scheduler"
)

// Nodes (design §10). Every store is a node: Open registers a row in
// nodes (a new id per start) and takes a session-level advisory lock on
// its id on a connection of its own, held for the store's life; its claims
// stamp their leases with the id. When the process dies its connection
// drops and the lock frees: a surviving node recovers its leases at once
// (ListOrphaned, fenced like any recovery). A heartbeat on the same
// connection keeps the row's expires_at (database time) ahead; a node
// claims only while its row outlasts the longest request it could send
// (claimReserve), so once expires_at has passed, whatever holds its lock,
// none of its requests is still in flight and its leases may be taken too.
//
// A node that loses its session stops claiming (the claim checks, in its
// transaction, that the node's lock is held) until it has its lock again:
// it reconnects and takes the same lock, or registers anew when its row
// lapsed or went. A database restart drops every session at once, so on
// lock evidence a node recovers others' leases only once its own session
// is older than the request timeout plus the lease margin (restartMargin):
// by then a node that was sending when the database went down has either
// its lock back or no request in flight. A starting node is such a node:
// it never takes a live node's leases.
//
// The lock alone is not proof of death: a cut dedicated connection frees
// it while the process, its pool connected, may still have requests in
// flight. Every pooled connection of the process holds a shared lock on
// the process's key (processLockClass, nodes.process) for its life, so a
// node is taken for dead on lock evidence only once its lock is free and
// none of its process's connections is left (nodeGone).

// nodesMigration adds nodes, the leases' node and elections.
//
//go:embed nodes.sql
var nodesMigration string

// Keys of the two-key advisory locks (key1; key2 is the node's id).
const (
	// nodeLockClass ("pnod") is a node's session lock, held by its
	// dedicated connection.
	nodeLockClass int32 = 0x706e6f64
	// guardLockClass ("pgrd") is held shared by each claim of the node, in
	// its transaction, and exclusively by a recovery deciding the node is
	// dead, so that no claim commits under a lock a recovery saw free.
	guardLockClass int32 = 0x70677264
	// processLockClass ("ppro") is held shared by every pooled connection
	// of a node's process, on its process key (Store.process).
	processLockClass int32 = 0x7070726f
)

// nodeProcesses is migration 6 (see migrations): the process key of each
// node; NULL for nodes registered by a binary that held no process lock,
// judged by their node lock alone.
const nodeProcesses = `ALTER TABLE nodes ADD COLUMN process INTEGER`

// Node timing.
const (
	// heartbeatInterval is how often a node renews its row and measures
	// the database's clock.
	heartbeatInterval = time.Second
	// watchInterval is how often a node looks for dead nodes holding
	// leases: a killed node's leases are recovered within about this.
	watchInterval = 250 * time.Millisecond
	// nodeGrace is how long a node goes on claiming without a heartbeat:
	// its row's TTL is the claim reserve plus this.
	nodeGrace = 15 * time.Second
	// nodeQueryTimeout bounds one query of the node's connection: one that
	// takes longer counts the session as lost.
	nodeQueryTimeout = 5 * time.Second
	// maxReconnectWait bounds the wait between two reconnection tries.
	maxReconnectWait = time.Second
)

// dbNowMS is the database's clock, in Unix milliseconds.
const dbNowMS = `(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint`

// wakeChannel is the LISTEN/NOTIFY channel of wake-ups between nodes; the
// payload is the sender's node id.
const wakeChannel = "pacer_wake"

// node is the store's registration and its dedicated connection's state.
type node struct {
	// id is the node's current id; 0 before it registered.
	id atomic.Int64
	// held says the dedicated connection holds the node's lock.
	held atomic.Bool
	// since is when (the store's clock, Unix nanoseconds) the current
	// session took the lock.
	since atomic.Int64
	// orphans says dead nodes may hold leases (ListOrphaned looks).
	orphans atomic.Bool
	// conn is the dedicated connection; only run uses it after Open.
	conn *pgx.Conn
	// clock is the offset to the database's clock.
	clock offsetClock

	stop context.CancelFunc
	done chan struct{}
}

// newProcessKey draws a process key: random and positive, so that the
// lock's objid (an oid) equals it. Two processes drawing the same key
// only make each look alive while the other is, which delays a
// recovery to the node's lapse; it never hastens one.
func newProcessKey() (int32, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("draw a process key: %w", err)
	}
	return int32(binary.BigEndian.Uint32(b[:])&0x7fffffff | 1), nil
}

// holdProcessLock makes every connection of the pool cfg configures take
// the process lock on key for its life, and keeps at least one connection
// open, so that a live process shows one. (When the pool closes its last
// one, at the end of its lifetime, it opens the next within about half a
// second: a dedicated session cut in that moment is taken for the
// process's death, as before processes held this lock.)
func holdProcessLock(cfg *pgxpool.Config, key int32) {
	cfg.MinConns = max(cfg.MinConns, 1)
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1, $2)`, processLockClass, key)
		return err
	}
}

// claimReserve is how long a node's row must outlast a claim: the longest
// a request it sends may take, plus the lease margin.
func (s *Store) claimReserve() time.Duration { return s.requestTimeout + scheduler.LeaseMargin }

// nodeTTL is how far ahead of the database's clock a heartbeat puts a
// node's expires_at.
func (s *Store) nodeTTL() time.Duration { return s.claimReserve() + nodeGrace }

// startNode registers the node on a connection of its own and starts the
// goroutine that keeps it (runNode).
func (s *Store) startNode(ctx context.Context) error {
	s.node.orphans.Store(true) // the first recovery looks
	if err := s.connectNode(ctx); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.node.stop, s.node.done = cancel, make(chan struct{})
	go s.runNode(runCtx)
	return nil
}

// stopNode stops runNode and, unless kill, ends the node: its row expires
// at once (so its remaining leases, if any, are recovered by any node
// without waiting), or goes when it holds none, its elections end (another
// node takes its tasks over at once) and its lock is given up.
func (s *Store) stopNode(kill bool) {
	if s.node.stop == nil {
		return
	}
	s.node.stop()
	<-s.node.done
	conn := s.node.conn
	s.node.conn = nil
	s.node.held.Store(false)
	if conn == nil {
		return
	}
	if kill {
		_ = conn.PgConn().Conn().Close()
		return
	}
	ctx, cancel := s.clock.WithTimeout(context.Background(), nodeQueryTimeout)
	defer cancel()
	_, _ = conn.Exec(ctx, `
		WITH gone AS (
			DELETE FROM nodes n WHERE id = $1
			AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.state = 'running' AND o.lease_node = n.id)
			RETURNING id
		), resigned AS (
			DELETE FROM elections WHERE node = $1
		)
		UPDATE nodes SET expires_at = 0 WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM gone)`, s.node.id.Load())
	_ = conn.Close(ctx)
}

// errLockBusy says the node's lock is held by another session (its own
// old one, not yet ended by the server, or a recovery's check).
var errLockBusy = errors.New("the node's lock is held by another session")

// connectNode opens the dedicated connection, takes the node's lock again
// (or registers a new node when its row lapsed or went), listens for
// wake-ups and measures the database's clock.
func (s *Store) connectNode(ctx context.Context) error {
	ctx, cancel := s.clock.WithTimeout(ctx, nodeQueryTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	id := s.node.id.Load()
	resumed := false
	if id != 0 {
		if resumed, err = s.resumeNode(ctx, conn, id); err != nil {
			return err
		}
	}
	if !resumed {
		if id, err = s.registerNode(ctx, conn); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, `LISTEN `+wakeChannel); err != nil {
		return err
	}
	s.node.conn = conn
	s.node.id.Store(id)
	s.node.since.Store(s.clock.Now().UnixNano())
	s.node.held.Store(true)
	if err := s.beat(ctx); err != nil {
		s.node.conn, ok = nil, false
		s.node.held.Store(false)
		return err
	}
	ok = true
	return nil
}

// registerNode inserts a new node row and takes its lock in one
// transaction: the row is never seen without its lock held.
func (s *Store) registerNode(ctx context.Context, conn *pgx.Conn) (int64, error) {
	host, _ := os.Hostname()
	var id int64
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO nodes (started_at, beat_at, expires_at, host, pid, process)
			VALUES (`+dbNowMS+`, `+dbNowMS+`, `+dbNowMS+` + $1, $2, $3, $4) RETURNING id`,
			s.nodeTTL().Milliseconds(), host, os.Getpid(), s.process).Scan(&id)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, nodeLockClass, int32(id))
		return err
	})
	return id, err
}

// resumeNode takes node id's lock again on a new connection and renews
// its row; false (lock given back) when the row lapsed or went, and
// errLockBusy while another session holds the lock.
func (s *Store) resumeNode(ctx context.Context, conn *pgx.Conn, id int64) (bool, error) {
	var live bool
	err := conn.QueryRow(ctx, `SELECT COALESCE((SELECT expires_at >= `+dbNowMS+` FROM nodes WHERE id = $1), false)`, id).Scan(&live)
	if err != nil || !live {
		return false, err
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, nodeLockClass, int32(id)).Scan(&got); err != nil {
		return false, err
	}
	if !got {
		return false, errLockBusy
	}
	tag, err := conn.Exec(ctx, `UPDATE nodes SET beat_at = `+dbNowMS+`, expires_at = `+dbNowMS+` + $2
		WHERE id = $1 AND expires_at >= `+dbNowMS, id, s.nodeTTL().Milliseconds())
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 0 {
		_, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, nodeLockClass, int32(id))
		return false, err
	}
	return true, nil
}

// errNodeLapsed says the node's row lapsed or went: it registers anew.
var errNodeLapsed = errors.New("the node's registration lapsed")

// beat renews the node's row and measures the offset to the database's
// clock on the dedicated connection.
func (s *Store) beat(ctx context.Context) error {
	ctx, cancel := s.clock.WithTimeout(ctx, nodeQueryTimeout)
	defer cancel()
	before := s.clock.Now()
	var dbMicros int64
	err := s.node.conn.QueryRow(ctx, `
		UPDATE nodes SET beat_at = `+dbNowMS+`, expires_at = `+dbNowMS+` + $2
		WHERE id = $1 AND expires_at >= `+dbNowMS+`
		RETURNING (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`,
		s.node.id.Load(), s.nodeTTL().Milliseconds()).Scan(&dbMicros)
	after := s.clock.Now()
	if errors.Is(err, pgx.ErrNoRows) {
		return errNodeLapsed
	} else if err != nil {
		return err
	}
	s.node.clock.note(before, after, time.UnixMicro(dbMicros))
	return nil
}

// runNode keeps the node until ctx ends: it waits for wake-ups from other
// nodes on the dedicated connection, beats every heartbeatInterval, looks
// for dead nodes every watchInterval, and when the session is lost stops
// claiming and reconnects.
func (s *Store) runNode(ctx context.Context) {
	defer close(s.node.done)
	failures := 0
	now := s.clock.Now()
	nextBeat, nextWatch := now.Add(heartbeatInterval), now.Add(watchInterval)
	for ctx.Err() == nil {
		if s.node.conn == nil {
			if err := s.connectNode(ctx); err != nil {
				failures++
				wait := min(time.Duration(failures)*100*time.Millisecond, maxReconnectWait)
				timer := s.clock.Timer(wait)
				select {
				case <-ctx.Done():
				case <-timer.C:
				}
				timer.Stop()
				continue
			}
			failures = 0
			s.wakes.committed() // this node may claim again
		}
		now := s.clock.Now()
		err := s.waitForWake(ctx, min(nextBeat.Sub(now), nextWatch.Sub(now)))
		now = s.clock.Now()
		if err == nil && !now.Before(nextBeat) {
			err = s.beat(ctx)
			if err == nil {
				err = s.forgetDeadNodes(ctx)
			}
			nextBeat = now.Add(heartbeatInterval)
		}
		if err == nil && !now.Before(nextWatch) {
			err = s.watchNodes(ctx)
			nextWatch = now.Add(watchInterval)
		}
		if err != nil && ctx.Err() == nil {
			s.loseSession(errors.Is(err, errNodeLapsed))
		}
	}
}

// loseSession closes the dedicated connection after an error: the node
// stops claiming until it has its lock again; when its registration
// lapsed it registers anew.
func (s *Store) loseSession(lapsed bool) {
	s.node.held.Store(false)
	if conn := s.node.conn; conn != nil {
		_ = conn.PgConn().Conn().Close() // frees the lock if the server still held it
		s.node.conn = nil
	}
	if lapsed {
		s.node.id.Store(0)
	}
}

// waitForWake waits up to d for a wake-up from another node and passes it
// on (the OnWake functions); nil when d passed or a wake-up came, an error
// when the session is lost.
func (s *Store) waitForWake(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	wctx, cancel := s.clock.WithTimeout(ctx, d)
	defer cancel()
	n, err := s.node.conn.WaitForNotification(wctx)
	if err != nil {
		if ctx.Err() == nil && (wctx.Err() != nil || pgconn.Timeout(err)) {
			return nil
		}
		return err
	}
	if n != nil && n.Payload != strconv.FormatInt(s.node.id.Load(), 10) {
		s.wakes.committed()
	}
	return nil
}
