package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/scheduler"
)

// gatedStore records every Enqueue transaction (the IDs of its
// operations), holds the first one until open is closed, and fails as a
// whole any transaction holding the operation poison.
type gatedStore struct {
	scheduler.Store
	entered chan struct{} // closed when the first Enqueue arrives
	open    chan struct{}
	poison  string

	mu    sync.Mutex
	calls [][]string
}

func newGatedStore(t *testing.T) *gatedStore {
	return &gatedStore{Store: openStore(t), entered: make(chan struct{}), open: make(chan struct{})}
}

func (s *gatedStore) Enqueue(ctx context.Context, ops []scheduler.NewOperation, now time.Time) ([]scheduler.EnqueueResult, error) {
	ids := make([]string, len(ops))
	for i, op := range ops {
		ids[i] = op.ID
	}
	s.mu.Lock()
	s.calls = append(s.calls, ids)
	first := len(s.calls) == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.open
	}
	if slices.Contains(ids, s.poison) {
		return nil, errors.New("disk I/O error")
	}
	return s.Store.Enqueue(ctx, ops, now)
}

// transactions returns the IDs of each Enqueue transaction so far.
func (s *gatedStore) transactions() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// enqueueOutcome is what one Enqueue call got.
type enqueueOutcome struct {
	res []scheduler.EnqueueResult
	err error
}

// groupHarness is a service over a gatedStore: its first enqueue ("gate")
// holds the writer while the calls under test queue up behind it, in an
// order the test chooses, so that they form one group.
type groupHarness struct {
	t     *testing.T
	clock *clock.Mock
	store *gatedStore
	svc   *scheduler.Service
	gate  chan enqueueOutcome
	outs  []chan enqueueOutcome
}

func setupGroup(t *testing.T, store *gatedStore) *groupHarness {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(t0)
	svc := newScheduler(t, store, clk, scheduler.Config{}).Service
	g := &groupHarness{t: t, clock: clk, store: store, svc: svc, gate: make(chan enqueueOutcome, 1)}
	putGroupScopes(t, svc)
	go func() { g.gate <- call(svc, context.Background(), op("gate", "plain", "")) }()
	<-store.entered
	return g
}

// putGroupScopes creates the scopes the group tests enqueue into: "plain",
// whose provider takes no idempotency key, and "keyed", whose provider is
// sent each mutation's request identity as its key.
func putGroupScopes(t *testing.T, svc *scheduler.Service) {
	t.Helper()
	for _, in := range []scheduler.ScopeInput{
		{Name: "plain", Provider: "generic", BaseURL: "https://plain.example"},
		{Name: "keyed", Provider: "generic", BaseURL: "https://keyed.example", IdempotencyHeader: "Idempotency-Key"},
	} {
		if _, _, err := svc.PutScope(context.Background(), in, "test"); err != nil {
			t.Fatal(err)
		}
	}
}

// queue starts an Enqueue call of ins under ctx and waits until it waits
// behind the gate, so calls queue in the order queue is called.
func (g *groupHarness) queue(ctx context.Context, ins ...scheduler.OperationInput) chan enqueueOutcome {
	g.t.Helper()
	out := make(chan enqueueOutcome, 1)
	want := g.svc.PendingEnqueues() + 1
	go func() { out <- call(g.svc, ctx, ins...) }()
	waitFor(g.t, func() bool { return g.svc.PendingEnqueues() == want })
	g.outs = append(g.outs, out)
	return out
}

// release lets the gate's transaction commit and returns every queued
// call's outcome, in queue order.
func (g *groupHarness) release() []enqueueOutcome {
	g.t.Helper()
	close(g.store.open)
	if o := <-g.gate; o.err != nil || o.res[0].Err != nil || !o.res[0].Created {
		g.t.Fatalf("gate: %+v", o)
	}
	outs := make([]enqueueOutcome, len(g.outs))
	for i, c := range g.outs {
		outs[i] = <-c
	}
	return outs
}

func call(svc *scheduler.Service, ctx context.Context, ins ...scheduler.OperationInput) enqueueOutcome {
	res, err := svc.Enqueue(ctx, ins, func(i int) string { return fmt.Sprintf("operations[%d].", i) })
	return enqueueOutcome{res, err}
}

func op(id, scope, identity string) scheduler.OperationInput {
	return scheduler.OperationInput{ID: id, Scope: scope, Method: "POST", Path: "/x", RequestIdentity: identity}
}

// Many concurrent single enqueues share transactions: 64 calls queued
// behind one transaction commit in one more, and each call gets its own
// operation, created and stored.
func TestConcurrentEnqueuesShareATransaction(t *testing.T) {
	g := setupGroup(t, newGatedStore(t))
	const n = 64
	for i := range n {
		g.queue(context.Background(), op(fmt.Sprintf("op-%02d", i), "plain", ""))
	}
	outs := g.release()
	for i, o := range outs {
		id := fmt.Sprintf("op-%02d", i)
		if o.err != nil || len(o.res) != 1 || o.res[0].Err != nil || !o.res[0].Created || o.res[0].Operation.ID != id {
			t.Fatalf("call %d: %+v, want %s created", i, o, id)
		}
		if got, err := g.svc.GetOperation(context.Background(), id); err != nil || got.State != scheduler.StateScheduled {
			t.Fatalf("%s: %+v, %v, want it stored, scheduled", id, got, err)
		}
	}
	txs := g.store.transactions()
	if len(txs) != 2 || len(txs[1]) != n {
		t.Fatalf("transactions: %d (sizes %v), want the gate's and one of all %d calls", len(txs), sizes(txs), n)
	}
}

func sizes(txs [][]string) []int {
	out := make([]int, len(txs))
	for i, tx := range txs {
		out[i] = len(tx)
	}
	return out
}

// groupedCalls are calls whose results depend on each other: the same
// operation ID with the same and with other content, the same request
// identity where the provider is sent it as a key, an unknown scope, and
// a batch repeating one of them beside new ones, and a rejected ID
// enqueued again.
var groupedCalls = [][]scheduler.OperationInput{
	{op("x", "plain", "")},
	{op("x", "plain", "")},
	{{ID: "x", Scope: "plain", Method: "PUT", Path: "/x"}},
	{op("y", "keyed", "k-1")},
	{op("z", "keyed", "k-1")},
	{op("u", "nowhere", "")},
	{op("x", "plain", ""), op("w", "keyed", "k-1"), op("v", "keyed", "k-2")},
	{op("z", "keyed", "k-3")},
}

// Calls in one group get exactly what the same calls get one after
// another, in their arrival order: including the same operation ID and the
// same request identity enqueued by different callers.
func TestGroupedEnqueuesAnswerAsSequentialCalls(t *testing.T) {
	g := setupGroup(t, newGatedStore(t))
	for _, ins := range groupedCalls {
		g.queue(context.Background(), ins...)
	}
	grouped := g.release()
	if txs := g.store.transactions(); len(txs) != 2 {
		t.Fatalf("transactions: %v, want the gate's and one of every call", txs)
	}

	clk := clock.NewMock()
	clk.Set(t0)
	seq := newScheduler(t, openStore(t), clk, scheduler.Config{}).Service
	putGroupScopes(t, seq)
	if o := call(seq, context.Background(), op("gate", "plain", "")); o.err != nil {
		t.Fatal(o.err)
	}
	for i, ins := range groupedCalls {
		want := call(seq, context.Background(), ins...)
		if got := grouped[i]; !sameOutcome(got, want) {
			t.Errorf("call %d (%s…): grouped %+v\nwant (one after another) %+v", i, ins[0].ID, got, want)
		}
	}
	// The answers are those of a mix of outcomes, not all alike.
	if !grouped[0].res[0].Created || grouped[1].res[0].Created || !errors.Is(grouped[2].res[0].Err, scheduler.ErrConflict) ||
		!errors.Is(grouped[4].res[0].Err, scheduler.ErrIdentityInUse) || !errors.Is(grouped[5].res[0].Err, scheduler.ErrUnknownScope) ||
		!grouped[7].res[0].Created {
		t.Fatalf("grouped outcomes: %+v", grouped)
	}
}

// sameOutcome compares two calls' outcomes, errors by their text.
func sameOutcome(a, b enqueueOutcome) bool {
	if fmt.Sprint(a.err) != fmt.Sprint(b.err) || len(a.res) != len(b.res) {
		return false
	}
	for i := range a.res {
		x, y := a.res[i], b.res[i]
		if x.Created != y.Created || fmt.Sprint(x.Err) != fmt.Sprint(y.Err) || !reflect.DeepEqual(x.Operation, y.Operation) {
			return false
		}
	}
	return true
}

// When a group's transaction fails as a whole (not a rejection of one
// item), each call is committed again alone: the call that fails alone
// gets its error, every other its own result, and a batch stays one
// transaction of its own operations.
func TestFailingGroupFallsBackToEachCallAlone(t *testing.T) {
	store := newGatedStore(t)
	store.poison = "bad"
	g := setupGroup(t, store)
	g.queue(context.Background(), op("a", "plain", ""))
	g.queue(context.Background(), op("bad", "plain", ""))
	g.queue(context.Background(), op("b1", "plain", ""), op("b2", "keyed", ""))
	g.queue(context.Background(), op("c", "plain", ""))
	outs := g.release()

	if outs[1].err == nil || outs[1].res != nil {
		t.Fatalf("the failing call: %+v, want its error", outs[1])
	}
	for _, i := range []int{0, 2, 3} {
		if o := outs[i]; o.err != nil || !o.res[0].Created || !o.res[len(o.res)-1].Created {
			t.Fatalf("call %d: %+v, want its operations created", i, o)
		}
	}
	if _, err := g.svc.GetOperation(context.Background(), "bad"); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("bad: %v, want not stored", err)
	}
	want := [][]string{{"gate"}, {"a", "bad", "b1", "b2", "c"}, {"a"}, {"bad"}, {"b1", "b2"}, {"c"}}
	if got := g.store.transactions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("transactions: %v, want %v", got, want)
	}
}

// A call whose context ends while it waits returns the context's error;
// when no group took it yet, nothing of it is stored, and the calls
// behind it still commit.
func TestEnqueueLeavesItsGroupWhenItsContextEnds(t *testing.T) {
	g := setupGroup(t, newGatedStore(t))
	ctx, cancel := context.WithCancel(context.Background())
	gone := g.queue(ctx, op("gone", "plain", ""))
	g.queue(context.Background(), op("stays", "plain", ""))
	cancel()
	if o := <-gone; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("canceled call: %+v, want context.Canceled", o)
	}
	g.outs = g.outs[1:]
	outs := g.release()
	if o := outs[0]; o.err != nil || !o.res[0].Created {
		t.Fatalf("the call behind: %+v, want created", o)
	}
	if _, err := g.svc.GetOperation(context.Background(), "gone"); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("gone: %v, want not stored", err)
	}
}

// A group's transaction takes the earliest of its calls' times: no
// operation is created after the time its call read, nor after its
// notBefore.
func TestGroupedEnqueuesAreCreatedByTheirCallsTimes(t *testing.T) {
	g := setupGroup(t, newGatedStore(t))
	g.clock.Add(time.Second)
	g.queue(context.Background(), op("early", "plain", ""))
	g.clock.Add(time.Second)
	g.queue(context.Background(), op("late", "plain", ""))
	outs := g.release()
	for i, at := range []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second)} {
		o := outs[i].res[0].Operation
		if o.CreatedAt.After(at) || o.CreatedAt.After(o.NextAttemptAt) || !o.NextAttemptAt.Equal(at) {
			t.Errorf("%s: created %s, next attempt %s; want created by %s, due then", o.ID, o.CreatedAt, o.NextAttemptAt, at)
		}
	}
	if txs := g.store.transactions(); len(txs) != 2 {
		t.Fatalf("transactions: %v, want the gate's and one of both calls", txs)
	}
}
