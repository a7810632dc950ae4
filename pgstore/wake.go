package pgstore

import (
	"context"
	"strconv"
	"time"
)

// Wake-ups across nodes (design §10). A commit that makes work due for any
// node (an enqueue, a release, a resume, a scope replaced) announces it:
// the store's announcer sends one NOTIFY on wakeChannel, and then at most
// one more per wakeDebounce however many commits announce meanwhile (a
// NOTIFY serializes the commits of every notifying transaction of the
// cluster, so never one per commit, and never inside the writer's
// transaction). Every other node hears it on its dedicated connection
// (runNode) and calls its OnWake functions; polls stay the fallback when a
// notification is lost.

// wakeDebounce is the least time between two NOTIFYs of one node.
const wakeDebounce = 5 * time.Millisecond

// OnWake adds fn to the functions called when another node announces work,
// when this node may claim again after its session was lost, and when
// dead nodes' leases may be recovered (see scheduler.Store). They are
// called on the node's goroutine.
func (s *Store) OnWake(fn func()) { s.wakes.add(fn) }

// announce tells the other nodes that work may be due; it never blocks.
func (s *Store) announce() {
	select {
	case s.announcements <- struct{}{}:
	default:
	}
}

// runAnnouncer sends the announced wake-ups until ctx ends, at most one
// per wakeDebounce; one that fails is dropped (the others' polls find the
// work).
func (s *Store) runAnnouncer(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.announcements:
		}
		nctx, cancel := s.clock.WithTimeout(ctx, nodeQueryTimeout)
		_, _ = s.pool.Exec(nctx, `SELECT pg_notify($1, $2)`, wakeChannel, strconv.FormatInt(s.node.id.Load(), 10))
		cancel()
		timer := s.clock.Timer(wakeDebounce)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}
