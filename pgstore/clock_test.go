package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/pgtest"
	"pacer/pgstore"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// skewed is a clock running ahead of the real one.
type skewed struct {
	clock.Clock
	by time.Duration
}

func (c skewed) Now() time.Time { return c.Clock.Now().Add(c.by) }

// A node whose clock is 5 s ahead never claims early, nor takes a lease
// before it expired: the claim admits by the earlier of its clock and the
// database's. Its Clock reads the database's time.
func TestSkewedNodeNeverClaimsEarly(t *testing.T) {
	const skew = 5 * time.Second
	url := pgtest.URLFrom(t, migrated)
	fast := skewed{Clock: clock.New(), by: skew}
	s := openNode(t, url, pgstore.Options{Clock: fast})
	storetest.PutScope(t, s, "a", storetest.ScopeOpts{})
	due := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	storetest.Enqueue(t, s, time.Now(), storetest.NewOp("later", "a", due))

	claim := func() []scheduler.Claim {
		cs, err := s.ClaimDue(context.Background(), scheduler.ClaimParams{Now: fast.Now(), Limit: 1, LeaseFor: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	if cs := claim(); len(cs) != 0 {
		t.Fatalf("a node 5 s ahead claimed an operation due in 2 s")
	}
	var c scheduler.Claim
	for {
		cs := claim()
		if len(cs) == 1 {
			c = cs[0]
			break
		}
		if time.Now().After(due.Add(2 * time.Second)) {
			t.Fatal("never claimed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sent := c.Operation.FirstSentAt; sent.Before(due) {
		t.Fatalf("claimed at %s, before it was due at %s", sent, due)
	}
	// Its lease (1 s) has not expired by the database's clock.
	if running, err := s.ListRunning(context.Background(), fast.Now(), 0); err != nil || len(running) != 0 {
		t.Fatalf("a clock 5 s ahead found %d expired leases (%v); want none", len(running), err)
	}
	// Store.Clock corrects the skew.
	if off := s.ClockOffset(); off > -skew+200*time.Millisecond || off < -skew-200*time.Millisecond {
		t.Fatalf("offset %s, want about %s", off, -skew)
	}
	if d := s.Clock(fast).Now().Sub(time.Now()); d > 200*time.Millisecond || d < -200*time.Millisecond {
		t.Fatalf("the database's clock read %s off", d)
	}
}

// A claim loop on a node whose clock is 5 s ahead, reading the database's
// time through Store.Clock, sends an operation neither early nor late, and
// does not spin on claims that admit nothing while it waits.
func TestSkewedNodesEngineSendsOnTime(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	fast := skewed{Clock: clock.New(), by: 5 * time.Second}
	p := newProvider(t)
	s := openNode(t, url, pgstore.Options{Clock: fast})
	putScope(t, s, p)
	var claims atomic.Int64
	s.OnClaimCommitting(func([]scheduler.Claim, string, string) { claims.Add(1) })
	sched := runEngineOn(t, s, s.Clock(fast))
	due := time.Now().Add(time.Second).Truncate(time.Millisecond)
	storetest.Enqueue(t, s, s.Clock(fast).Now(), readOp("soon", due))
	sched.Engine.WakeFor(due) // as the Service does after an enqueue
	for deadline := due.Add(3 * time.Second); ; time.Sleep(time.Millisecond) {
		if at, ok := p.arrival("/soon"); ok {
			t.Logf("sent %s after it was due, %d claim transactions", at.Sub(due), claims.Load())
			if at.Before(due) || at.Sub(due) > 100*time.Millisecond {
				t.Fatalf("sent at %s, due at %s: want within 100 ms after", at, due)
			}
			if n := claims.Load(); n > 10 {
				t.Fatalf("%d claim transactions for one operation: the loop spun, its clock ahead of the database's", n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("never sent")
		}
	}
}
