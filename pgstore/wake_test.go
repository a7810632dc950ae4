package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pacer/internal/pgtest"
	"pacer/pgstore"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// An enqueue on one node wakes another node's claim loop, which polls
// only every hour: every send comes within 2 s (the notification, not the
// poll) and the typical one within 100 ms. The slowest is only logged: on
// a loaded machine under the race detector one wake-up in ten may wait
// for a core longer than that, which says nothing about the notification.
func TestEnqueueOnOneNodeWakesAnother(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	p := newProvider(t)
	a, b := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	putScope(t, a, p)
	runEngine(t, b)
	var took []time.Duration
	for i := range 10 {
		id := fmt.Sprintf("op-%d", i)
		enqueued := time.Now()
		storetest.Enqueue(t, a, enqueued, readOp(id, enqueued))
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			if at, ok := p.arrival("/" + id); ok {
				took = append(took, at.Sub(enqueued))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other node did not send it within 2 s", id)
			}
		}
		time.Sleep(20 * time.Millisecond) // beyond the debounce: each enqueue notifies
	}
	slices.Sort(took)
	t.Logf("enqueue on A to send by B: median %s, max %s", took[len(took)/2], took[len(took)-1])
	if median := took[len(took)/2]; median > 100*time.Millisecond {
		t.Fatalf("the median wake-up across nodes took %s, want within 100 ms", median)
	}
}

// Wake-ups are debounced: a burst of enqueues on one node sends at most
// one NOTIFY per debounce interval (5 ms), and claims and completions send
// none (a NOTIFY serializes the commits of every notifying transaction).
func TestWakeUpsAreDebouncedAndClaimsSendNone(t *testing.T) {
	const writers, each = 4, 50
	url := pgtest.URLFrom(t, migrated)
	a, b := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	var wakes atomic.Int64
	b.OnWake(func() { wakes.Add(1) })
	storetest.PutScope(t, a, "a", storetest.ScopeOpts{MaxConcurrent: 1000})
	time.Sleep(50 * time.Millisecond)
	wakes.Store(0)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				storetest.Enqueue(t, a, storetest.T0, storetest.NewOp(fmt.Sprintf("w%d-%d", w, i), "a", storetest.T0))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	time.Sleep(50 * time.Millisecond)
	n := wakes.Load()
	t.Logf("%d enqueues in %s woke the other node %d times", writers*each, took.Round(time.Millisecond), n)
	if limit := int64(took/(5*time.Millisecond)) + 2; n > limit || n == 0 {
		t.Fatalf("%d wake-ups for %d enqueues in %s; want 1..%d", n, writers*each, took, limit)
	}
	wakes.Store(0)
	for claimed := 0; claimed < writers*each; {
		cs := storetest.Claim(t, a, storetest.T0, 100)
		var done []scheduler.Completion
		for _, c := range cs {
			done = append(done, storetest.CompletionOf(c, storetest.T0, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}))
		}
		if _, err := a.Complete(context.Background(), done); err != nil {
			t.Fatal(err)
		}
		claimed += len(cs)
	}
	time.Sleep(50 * time.Millisecond)
	if n := wakes.Load(); n != 0 {
		t.Fatalf("claims and completions woke the other node %d times; want none", n)
	}
}
