package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// groupCommit shares one store transaction among concurrent calls of the
// same write (the API's enqueues: newEnqueueGroup). The first caller to
// arrive leads: it takes what is pending (up to limit items), writes it in
// one call of commit and answers every member of the group; callers that
// arrive meanwhile wait, and the first of them leads the next group once
// this one is answered, so no caller stays behind to commit for others.
// It has no goroutine of its own.
//
// Every member gets what it would get called alone, in its arrival order:
// commit processes its inputs in order, each seeing the writes of those
// before it, and gives each its own outcome (a per-item rejection is an
// outcome, not an error). When the shared call fails as a whole, which
// writes nothing, each member is committed again alone and answered with
// its own result, so that no caller gets an error of another's making.
// When the store fails every transaction (unavailable, or another process
// holding its write lock), that costs as many failed transactions as the
// group has members: as many as the calls would have made without the
// group, each under its caller's own ctx.
//
// A caller whose ctx ends while it waits gets ctx.Err(): when its group
// had not been taken yet nothing of it is written; when its group was
// being committed (by another caller) it may still commit, as when a
// client goes away while its own transaction commits. A leader writes its
// group to the end whatever its ctx. A group of several members is
// written under a context without cancellation (the first member's
// values), so one member's end does not roll back the others; commit's
// own bounds (the store's busy timeout) still apply. A member alone is
// written under its own ctx, as it would be without the group.
type groupCommit[In, Out any] struct {
	// commit writes ins in one transaction and returns one output per
	// input, in order.
	commit func(ctx context.Context, ins []In) ([]Out, error)
	// size is how many items an input carries, for limit (nil: one).
	size func(In) int
	// limit bounds the items of one group (0: no bound); a member larger
	// than limit commits alone.
	limit int

	mu      sync.Mutex
	leading bool // a leader is elected or committing; false only when pending is empty
	pending []*groupMember[In, Out]
}

// errCommitPanicked answers the members of a group whose commit panicked;
// the panic goes on in the leader's goroutine.
var errCommitPanicked = errors.New("group commit: the commit panicked")

// groupMember is one waiting call.
type groupMember[In, Out any] struct {
	ctx context.Context
	in  In
	// Guarded by the groupCommit's mu:
	lead     bool // elected to lead (the first of pending)
	taken    bool // in a group being committed
	answered bool // out and err are set
	out      Out
	err      error
	wake     chan struct{} // closed once: when elected, or answered
}

// newGroupCommit returns a group commit of commit (see groupCommit).
func newGroupCommit[In, Out any](commit func(context.Context, []In) ([]Out, error), size func(In) int, limit int) *groupCommit[In, Out] {
	return &groupCommit[In, Out]{commit: commit, size: size, limit: limit}
}

// do writes in, with whatever else is pending, and returns its own output.
func (g *groupCommit[In, Out]) do(ctx context.Context, in In) (Out, error) {
	m := &groupMember[In, Out]{ctx: ctx, in: in, wake: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, m)
	if !g.leading {
		g.leading, m.lead = true, true
		g.mu.Unlock()
		return g.lead(m)
	}
	g.mu.Unlock()
	select {
	case <-m.wake:
	case <-ctx.Done():
		return g.leave(m)
	}
	if m.lead {
		return g.lead(m)
	}
	return m.out, m.err
}

// leave answers m, whose ctx ended while it waited: with its answer when
// it has one, else with ctx.Err(), taking it out of pending (and handing
// on its election) when no group took it yet.
func (g *groupCommit[In, Out]) leave(m *groupMember[In, Out]) (Out, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.answered {
		return m.out, m.err
	}
	var zero Out
	if m.taken {
		return zero, m.ctx.Err()
	}
	g.pending = slices.DeleteFunc(g.pending, func(p *groupMember[In, Out]) bool { return p == m })
	if m.lead {
		g.handOn()
	}
	return zero, m.ctx.Err()
}

// handOn elects the first pending member to lead the next group, or ends
// the leading when none waits. The caller holds mu.
func (g *groupCommit[In, Out]) handOn() {
	if len(g.pending) == 0 {
		g.leading = false
		return
	}
	next := g.pending[0]
	next.lead = true
	close(next.wake)
}

// lead commits one group starting with m (the first pending member),
// answers its members, hands the lead on and returns m's answer.
func (g *groupCommit[In, Out]) lead(m *groupMember[In, Out]) (Out, error) {
	// Callers that are running (those the last group answered, coming
	// back) join this group instead of the next: under load groups of 4
	// became groups of 16 (BenchmarkConcurrentSingleEnqueues). Alone, the
	// yield returns at once.
	runtime.Gosched()
	g.mu.Lock()
	group := g.take()
	g.mu.Unlock()
	defer g.answer(group, m) // even when commit panics, so nobody waits for ever
	g.write(group)
	return m.out, m.err
}

// answer answers the members of group but m (the leader, which returns
// its own) and hands the lead on.
func (g *groupCommit[In, Out]) answer(group []*groupMember[In, Out], m *groupMember[In, Out]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range group {
		b.answered = true
		if b != m {
			close(b.wake)
		}
	}
	g.handOn()
}

// take removes the next group from pending: members in arrival order up
// to limit items (at least one). A member whose ctx has ended is answered
// with ctx.Err() and not written. The caller holds mu.
func (g *groupCommit[In, Out]) take() []*groupMember[In, Out] {
	var group []*groupMember[In, Out]
	n, items := 0, 0
	for ; n < len(g.pending); n++ {
		p := g.pending[n]
		if err := p.ctx.Err(); err != nil {
			p.err = err
			group = append(group, p) // answered with the group, not written
			continue
		}
		k := 1
		if g.size != nil {
			k = g.size(p.in)
		}
		if items > 0 && g.limit > 0 && items+k > g.limit {
			break
		}
		items += k
		p.taken = true
		group = append(group, p)
	}
	g.pending = slices.Clone(g.pending[n:])
	return group
}

// write commits the group's members that are to be written (those without
// an error yet) in one call of commit, or each alone when that call fails.
func (g *groupCommit[In, Out]) write(group []*groupMember[In, Out]) {
	var live []*groupMember[In, Out]
	for _, b := range group {
		if b.err == nil {
			live = append(live, b)
		}
	}
	for _, b := range live {
		b.err = errCommitPanicked // until settled
	}
	switch len(live) {
	case 0:
		return
	case 1:
		g.writeAlone(live[0])
		return
	}
	ins := make([]In, len(live))
	for i, b := range live {
		ins[i] = b.in
	}
	outs, err := g.commit(context.WithoutCancel(live[0].ctx), ins)
	if err == nil && len(outs) != len(ins) {
		err = fmt.Errorf("group commit: %d outputs for %d inputs", len(outs), len(ins))
	}
	if err != nil {
		for _, b := range live {
			g.writeAlone(b)
		}
		return
	}
	for i, b := range live {
		b.out, b.err = outs[i], nil
	}
}

// writeAlone commits b in a transaction of its own, under its own ctx.
func (g *groupCommit[In, Out]) writeAlone(b *groupMember[In, Out]) {
	outs, err := g.commit(b.ctx, []In{b.in})
	switch {
	case err != nil:
		b.err = err
	case len(outs) != 1:
		b.err = fmt.Errorf("group commit: %d outputs for 1 input", len(outs))
	default:
		b.out, b.err = outs[0], nil
	}
}
