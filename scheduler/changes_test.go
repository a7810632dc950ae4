package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/scheduler"
)

// feedStore is the real store that also reports each read of the feed that
// found nothing, so a test knows when a long-poll is about to wait.
type feedStore struct {
	scheduler.Store
	empty chan struct{}
}

func (s feedStore) ListChanges(ctx context.Context, f scheduler.ChangeFilter) (scheduler.ChangeBatch, error) {
	b, err := s.Store.ListChanges(ctx, f)
	if err == nil && len(b.Changes) == 0 {
		select {
		case s.empty <- struct{}{}:
		default:
		}
	}
	return b, err
}

// feedHarness is a Service over a real store on a mock clock that never
// moves unless a test moves it, so a long-poll can only end early through
// a notification.
type feedHarness struct {
	t     *testing.T
	clock *clock.Mock
	store feedStore
	svc   *scheduler.Service
}

func newFeedHarness(t *testing.T) *feedHarness {
	t.Helper()
	d := openStore(t)
	clk := clock.NewMock()
	clk.Set(t0)
	store := feedStore{Store: d, empty: make(chan struct{}, 1)}
	return &feedHarness{t: t, clock: clk, store: store, svc: newScheduler(t, store, clk, scheduler.Config{}).Service}
}

func (h *feedHarness) scope(name, baseURL string) {
	h.t.Helper()
	_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{Name: name, Provider: "generic", BaseURL: baseURL, MaxConcurrent: 8}, "test")
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *feedHarness) enqueue(id, scope string) {
	h.t.Helper()
	res, err := h.svc.Enqueue(context.Background(), []scheduler.OperationInput{{ID: id, Scope: scope, Method: "GET", Path: "/" + id}}, func(int) string { return "" })
	if err != nil || res[0].Err != nil {
		h.t.Fatalf("enqueue %s: %v %v", id, err, res[0].Err)
	}
}

// pageResult is what a long-poll returned.
type pageResult struct {
	page scheduler.ChangePage
	err  error
}

// poll starts a long-poll and returns where its result will arrive.
func (h *feedHarness) poll(ctx context.Context, q scheduler.ChangeQuery) <-chan pageResult {
	done := make(chan pageResult, 1)
	go func() {
		p, err := h.svc.Changes(ctx, q)
		done <- pageResult{p, err}
	}()
	return done
}

// hangGuard bounds a wait that only a bug could make endless.
const hangGuard = 30 * time.Second

func receive(t *testing.T, done <-chan pageResult, what string) pageResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(hangGuard):
		t.Fatalf("%s: the long-poll never returned", what)
		return pageResult{}
	}
}

// newWaitingPoll is a feed harness whose scope a has one operation,
// op-1, and a long-poll after it (30 s) that is waiting.
func newWaitingPoll(t *testing.T) (*feedHarness, <-chan pageResult) {
	t.Helper()
	h := newFeedHarness(t)
	h.scope("a", "https://api.example.com")
	h.enqueue("op-1", "a")
	done := h.poll(context.Background(), scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{After: 1}, Wait: 30 * time.Second})
	h.waitEmptyRead()
	return h, done
}

func (h *feedHarness) waitEmptyRead() {
	h.t.Helper()
	select {
	case <-h.store.empty:
	case <-time.After(hangGuard):
		h.t.Fatal("the long-poll never read the feed")
	}
}

func TestNotifier(t *testing.T) {
	n := scheduler.NewNotifier()
	first := n.Changed()
	n.Notify()
	select {
	case <-first:
	default:
		t.Fatal("Notify did not close the channel taken before it")
	}
	second := n.Changed()
	select {
	case <-second:
		t.Fatal("a channel taken after Notify is already closed")
	default:
	}
	n.Close()
	n.Close() // idempotent
	n.Notify()
	for name, ch := range map[string]<-chan struct{}{"changed": second, "later": n.Changed(), "done": n.Done()} {
		select {
		case <-ch:
		default:
			t.Fatalf("%s channel open after Close", name)
		}
	}
}

func TestChangesLongPoll(t *testing.T) {
	ctx := context.Background()

	t.Run("AnswersAtOnceWhenChangesExist", func(t *testing.T) {
		h := newFeedHarness(t)
		h.scope("a", "https://api.example.com")
		h.enqueue("op-1", "a")
		h.enqueue("op-2", "a")
		p, err := h.svc.Changes(ctx, scheduler.ChangeQuery{Wait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Changes) != 2 || p.Changes[0].OperationID != "op-1" || p.Changes[1].State != scheduler.StateScheduled || p.Next != p.Changes[1].Seq {
			t.Fatalf("page %+v", p)
		}
	})

	t.Run("ReturnsPromptlyOnANewChange", func(t *testing.T) {
		h, done := newWaitingPoll(t)
		h.enqueue("op-2", "a")
		r := receive(t, done, "after a new change")
		if r.err != nil || len(r.page.Changes) != 1 || r.page.Changes[0].OperationID != "op-2" || r.page.Next != 2 {
			t.Fatalf("page %+v, err %v", r.page, r.err)
		}
		if got := h.clock.Now(); !got.Equal(t0) {
			t.Fatalf("the clock moved to %v: the wait did not end by the notification", got)
		}
	})

	// Notification comes from the store's commits, not from the writer:
	// a write through another Scheduler's Service, or straight to the
	// store, wakes the poll as promptly as the Service's own.
	for name, write := range map[string]func(h *feedHarness){
		"AnotherService": func(h *feedHarness) {
			other := newScheduler(t, h.store, h.clock, scheduler.Config{}).Service
			if _, err := other.Cancel(ctx, "op-1", "no longer wanted", "test"); err != nil {
				t.Error(err)
			}
		},
		"TheStoreItself": func(h *feedHarness) {
			if _, err := h.store.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: 1, LeaseFor: time.Minute}); err != nil {
				t.Error(err)
			}
		},
	} {
		t.Run("ReturnsPromptlyOnACommitBy"+name, func(t *testing.T) {
			h, done := newWaitingPoll(t)
			write(h)
			r := receive(t, done, "after a commit by "+name)
			if r.err != nil || len(r.page.Changes) != 1 || r.page.Changes[0].OperationID != "op-1" || r.page.Next != 2 {
				t.Fatalf("page %+v, err %v", r.page, r.err)
			}
			if got := h.clock.Now(); !got.Equal(t0) {
				t.Fatalf("the clock moved to %v: the wait did not end by the notification", got)
			}
		})
	}

	t.Run("ScopeFilterWaitsForItsScope", func(t *testing.T) {
		h := newFeedHarness(t)
		h.scope("a", "https://api.example.com")
		h.scope("b", "https://api.example.com")
		done := h.poll(ctx, scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{Scope: "b"}, Wait: 30 * time.Second})
		h.waitEmptyRead()
		h.enqueue("a-1", "a") // wakes the poll, which finds nothing of b
		h.waitEmptyRead()
		h.enqueue("b-1", "b")
		r := receive(t, done, "scope b")
		if r.err != nil || len(r.page.Changes) != 1 || r.page.Changes[0].OperationID != "b-1" || r.page.Changes[0].Scope != "b" || r.page.Next != 2 {
			t.Fatalf("page %+v, err %v", r.page, r.err)
		}
	})

	// A read of b that passed over a's change waits on from after it, and
	// answers at the end of the wait with Next past it: a reader of a
	// quiet scope advances, and was not answered at a's commit.
	t.Run("ScopeFilterWaitsOnPastOtherScopes", func(t *testing.T) {
		h := newFeedHarness(t)
		h.scope("a", "https://api.example.com")
		h.scope("b", "https://api.example.com")
		done := h.poll(ctx, scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{Scope: "b"}, Wait: 30 * time.Second})
		h.waitEmptyRead()
		h.enqueue("a-1", "a") // wakes the poll, which finds nothing of b
		h.waitEmptyRead()
		r := h.advanceUntil(t, done)
		if r.err != nil || len(r.page.Changes) != 0 || r.page.Next != 1 {
			t.Fatalf("page %+v, err %v: want empty with next 1 (past a-1)", r.page, r.err)
		}
		if waited := h.clock.Now().Sub(t0); waited < 30*time.Second {
			t.Fatalf("returned after %v of clock time, before the 30s wait", waited)
		}
	})

	// Behind more of a's changes than one read examines, a poll of b
	// answers at once, empty, with Next where the read stopped: each
	// query does bounded work, and the next one goes on from there.
	t.Run("ScopeFilterBehindABacklogAnswersAtOnce", func(t *testing.T) {
		h := newFeedHarness(t)
		h.scope("a", "https://api.example.com")
		h.scope("b", "https://api.example.com")
		for n := 0; n < scheduler.MaxChangeScan+1; {
			var in []scheduler.OperationInput
			for ; n < scheduler.MaxChangeScan+1 && len(in) < scheduler.MaxBatch; n++ {
				in = append(in, scheduler.OperationInput{ID: fmt.Sprintf("a-%d", n), Scope: "a", Method: "GET", Path: "/x"})
			}
			if _, err := h.svc.Enqueue(ctx, in, func(int) string { return "" }); err != nil {
				t.Fatal(err)
			}
		}
		r := receive(t, h.poll(ctx, scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{Scope: "b"}, Wait: 30 * time.Second}), "behind a backlog")
		if r.err != nil || len(r.page.Changes) != 0 || r.page.Next != scheduler.MaxChangeScan {
			t.Fatalf("page %+v, err %v: want empty with next %d", r.page, r.err, scheduler.MaxChangeScan)
		}
		if got := h.clock.Now(); !got.Equal(t0) {
			t.Fatalf("the clock moved to %v: the poll waited", got)
		}
	})

	t.Run("AfterTheEndWaitsThenReturnsEmpty", func(t *testing.T) {
		h := newFeedHarness(t)
		h.scope("a", "https://api.example.com")
		h.enqueue("op-1", "a")
		done := h.poll(ctx, scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{After: 1}, Wait: 30 * time.Second})
		r := h.advanceUntil(t, done)
		if r.err != nil || len(r.page.Changes) != 0 || r.page.Next != 1 {
			t.Fatalf("page %+v, err %v: want empty with next 1", r.page, r.err)
		}
		if waited := h.clock.Now().Sub(t0); waited < 30*time.Second {
			t.Fatalf("returned after %v of clock time, before the 30s wait", waited)
		}
	})

	t.Run("WaitIsCapped", func(t *testing.T) {
		h := newFeedHarness(t)
		done := h.poll(ctx, scheduler.ChangeQuery{Wait: 24 * time.Hour})
		r := h.advanceUntil(t, done)
		if r.err != nil || len(r.page.Changes) != 0 {
			t.Fatalf("page %+v, err %v", r.page, r.err)
		}
		if waited := h.clock.Now().Sub(t0); waited < scheduler.MaxChangeWait || waited > time.Hour {
			t.Fatalf("waited %v of clock time, want about %v", waited, scheduler.MaxChangeWait)
		}
	})

	t.Run("EndsWhenTheClientGoesAway", func(t *testing.T) {
		h := newFeedHarness(t)
		cctx, cancel := context.WithCancel(ctx)
		done := h.poll(cctx, scheduler.ChangeQuery{Wait: 30 * time.Second})
		h.waitEmptyRead()
		cancel()
		if r := receive(t, done, "client gone"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", r.err)
		}
	})

	t.Run("EndsWhenTheNotifierCloses", func(t *testing.T) {
		h, done := newWaitingPoll(t)
		h.svc.Notifier().Close()
		r := receive(t, done, "shutdown")
		if r.err != nil || len(r.page.Changes) != 0 || r.page.Next != 1 {
			t.Fatalf("page %+v, err %v", r.page, r.err)
		}
		// Later polls do not wait at all.
		r = receive(t, h.poll(ctx, scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{After: 1}, Wait: 30 * time.Second}), "after shutdown")
		if r.err != nil || len(r.page.Changes) != 0 {
			t.Fatalf("page %+v, err %v", r.page, r.err)
		}
	})

	t.Run("ErrValidation", func(t *testing.T) {
		h := newFeedHarness(t)
		_, err := h.svc.Changes(ctx, scheduler.ChangeQuery{
			ChangeFilter: scheduler.ChangeFilter{After: -1, Limit: 1001, Scope: "no spaces"}, Wait: -time.Second,
		})
		var v *scheduler.ValidationError
		if !errors.As(err, &v) || len(v.Fields) != 4 {
			t.Fatalf("err %v, want 4 field errors", err)
		}
	})
}

// advanceUntil moves the mock clock on in small steps until the poll
// returns (bounded).
func (h *feedHarness) advanceUntil(t *testing.T, done <-chan pageResult) pageResult {
	t.Helper()
	for range 100_000 {
		select {
		case r := <-done:
			return r
		default:
			h.clock.Add(250 * time.Millisecond)
		}
	}
	t.Fatal("the long-poll never returned")
	return pageResult{}
}

// The feed under concurrent writers: goroutines enqueue while an engine
// claims and completes, and a follower long-polls with small pages. The
// follower must see every change the table holds, once each, in order,
// and each operation's states in their life-cycle order.
func TestChangesUnderConcurrentWriters(t *testing.T) {
	const (
		writers   = 8
		perWriter = 15
		total     = writers * perWriter
	)
	h := newFeedHarness(t)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(provider.Close)
	h.scope("a", provider.URL)
	h.scope("b", provider.URL)
	// An engine of its own: its commits wake h.svc's long-polls through
	// the store.
	engine := newScheduler(t, h.store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Workers: 16}}).Engine

	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()

	// Writers.
	var writing sync.WaitGroup
	for w := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			for i := range perWriter {
				scope := []string{"a", "b"}[(w+i)%2]
				id := fmt.Sprintf("w%d-%d", w, i)
				res, err := h.svc.Enqueue(ctx, []scheduler.OperationInput{{ID: id, Scope: scope, Method: "GET", Path: "/" + id}}, func(int) string { return "" })
				if err != nil || res[0].Err != nil {
					t.Errorf("enqueue %s: %v %v", id, err, res)
					return
				}
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { writing.Wait(); close(writersDone) }()

	// The engine: claim and complete until the writers are done and
	// nothing is left to claim.
	engineDone := make(chan error, 1)
	go func() {
		idle := false
		for {
			n, err := engine.RunOnce(ctx)
			if err != nil {
				engineDone <- err
				return
			}
			engine.Wait()
			select {
			case <-writersDone:
				if n == 0 && idle {
					engineDone <- nil
					return
				}
				idle = n == 0
			default:
			}
		}
	}()

	// The follower: 3 changes per operation (scheduled, running,
	// succeeded), in pages of 7.
	var (
		seen   []scheduler.Change
		after  int64
		states = map[string][]scheduler.State{}
	)
	for len(seen) < 3*total {
		p, err := h.svc.Changes(ctx, scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{After: after, Limit: 7}, Wait: scheduler.MaxChangeWait})
		if err != nil {
			t.Fatalf("follow after %d (seen %d of %d): %v", after, len(seen), 3*total, err)
		}
		if len(p.Changes) == 0 {
			t.Fatalf("an empty page after %d: the mock clock does not move, so only a missed notification ends a wait", after)
		}
		for _, c := range p.Changes {
			if c.Seq != after+1 {
				t.Fatalf("change %d follows %d: a gap or a repeat", c.Seq, after)
			}
			after = c.Seq
			seen = append(seen, c)
			states[c.OperationID] = append(states[c.OperationID], c.State)
		}
		if p.Next != after {
			t.Fatalf("next %d, want %d", p.Next, after)
		}
	}
	if err := <-engineDone; err != nil {
		t.Fatal(err)
	}

	// Nothing more, and what was followed is what the table holds.
	if p, err := h.svc.Changes(ctx, scheduler.ChangeQuery{ChangeFilter: scheduler.ChangeFilter{After: after}}); err != nil || len(p.Changes) != 0 {
		t.Fatalf("after the last: %+v, %v", p, err)
	}
	b, err := h.store.ListChanges(ctx, scheduler.ChangeFilter{Limit: scheduler.MaxChangeLimit})
	if err != nil {
		t.Fatal(err)
	}
	all := b.Changes
	if len(all) != len(seen) {
		t.Fatalf("table holds %d changes, follower saw %d", len(all), len(seen))
	}
	for i := range all {
		if all[i] != seen[i] {
			t.Fatalf("change %d: table %+v, follower %+v", i, all[i], seen[i])
		}
	}
	if len(states) != total {
		t.Fatalf("%d operations in the feed, want %d", len(states), total)
	}
	for id, s := range states {
		if fmt.Sprint(s) != "[scheduled running succeeded]" {
			t.Fatalf("%s went %v", id, s)
		}
	}
}

func TestCheckFeedCursor(t *testing.T) {
	for _, tc := range []struct {
		name                string
		after, oldest, last int64
		want                error
		resume              int64
	}{
		{"Fresh", 0, 0, 0, nil, 0},
		{"FromTheStart", 0, 40, 90, nil, 0},
		{"Next", 39, 40, 90, nil, 0},
		{"Inside", 60, 40, 90, nil, 0},
		{"AtTheEnd", 90, 40, 90, nil, 0},
		{"CaughtUpAllPruned", 90, 0, 90, nil, 0},
		{"Pruned", 38, 40, 90, scheduler.ErrFeedPruned, 39},
		{"AllPruned", 50, 0, 90, scheduler.ErrFeedPruned, 90},
		{"Ahead", 91, 40, 90, scheduler.ErrFeedAhead, 90},
		{"AheadOfNothing", 5, 0, 0, scheduler.ErrFeedAhead, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := scheduler.CheckFeedCursor(tc.after, tc.oldest, tc.last)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var ge *scheduler.FeedGapError
			if !errors.As(err, &ge) || !errors.Is(err, tc.want) || ge.Resume != tc.resume || ge.After != tc.after {
				t.Fatalf("got %v, want %v resuming at %d", err, tc.want, tc.resume)
			}
		})
	}
}
