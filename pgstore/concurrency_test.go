package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/pgtest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// Several processes (stores with pools of their own) claiming from the
// same scopes at once never run more of a scope than its cap: a claim
// counts a scope's running operations only once it holds the scope's row.
func TestClaimersOfSeveralProcessesKeepTheCap(t *testing.T) {
	const (
		processes, workers = 3, 4
		scopes, opsPer     = 8, 12
		maxConcurrent      = 3
	)
	url := pgtest.URLFrom(t, migrated)
	stores := make([]scheduler.Store, processes)
	for i := range stores {
		stores[i] = openStoreAt(t, url)
	}
	for i := range scopes {
		name := fmt.Sprintf("s%d", i)
		storetest.PutScope(t, stores[0], name, storetest.ScopeOpts{MaxConcurrent: maxConcurrent})
		var ops []scheduler.NewOperation
		for j := range opsPer {
			ops = append(ops, storetest.NewOp(fmt.Sprintf("%s-%d", name, j), name, storetest.T0))
		}
		storetest.Enqueue(t, stores[0], storetest.T0, ops...)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed = map[string]int{}
		errs    []error
	)
	start := make(chan struct{})
	for p := range processes {
		for range workers {
			wg.Go(func() {
				<-start
				for idle := 0; idle < 3; {
					cs, err := stores[p].ClaimDue(context.Background(), scheduler.ClaimParams{Now: storetest.T0.Add(time.Second), Limit: 4, LeaseFor: time.Hour})
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					}
					for _, c := range cs {
						claimed[c.Scope.Name]++
					}
					mu.Unlock()
					if err != nil || len(cs) == 0 {
						idle++
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("claim: %v", err)
	}
	for i := range scopes {
		name := fmt.Sprintf("s%d", i)
		s, err := stores[0].GetScope(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if claimed[name] != maxConcurrent || s.InFlight != maxConcurrent {
			t.Errorf("scope %s: %d claimed, %d running; want %d (its cap)", name, claimed[name], s.InFlight, maxConcurrent)
		}
	}
}

// A change whose transaction commits after a later one's is read after
// it, never skipped: the feed numbers changes when they are committed.
func TestFeedSkipsNothingCommittedLate(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	d := openStoreAt(t, url)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, storetest.T0, storetest.NewOp("first", "a", storetest.T0))

	// Another process's transaction writes a change and stays open.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	late, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	if _, err := late.Exec(ctx, `UPDATE operations SET state = 'canceled', next_attempt_at = NULL, updated_at = updated_at + 1
		WHERE operation_id = 'first'`); err != nil {
		t.Fatal(err)
	}
	storetest.Enqueue(t, d, storetest.T0, storetest.NewOp("second", "a", storetest.T0))

	b, err := d.ListChanges(ctx, scheduler.ChangeFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := feed(b), "1:first:scheduled 2:second:scheduled"; got != want {
		t.Fatalf("while the late transaction is open: got %q, want %q", got, want)
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := d.ListChanges(ctx, scheduler.ChangeFilter{After: b.Next, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := feed(after), "3:first:canceled"; got != want {
		t.Fatalf("after it committed, resuming after %d: got %q, want %q", b.Next, got, want)
	}
}

// feed renders a batch as "seq:op:state …".
func feed(b scheduler.ChangeBatch) string {
	s := ""
	for i, c := range b.Changes {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%s:%s", c.Seq, c.OperationID, c.State)
	}
	return s
}

// A cancel racing a claim of another process never overwrites the running
// operation: either the claim took it (the cancel is refused) or the
// cancel ended it (the claim gets nothing).
func TestCancelRacingAClaim(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	claimer, canceler := openStoreAt(t, url), openStoreAt(t, url)
	storetest.PutScope(t, claimer, "a", storetest.ScopeOpts{MaxConcurrent: 100})
	const n = 40
	for i := range n {
		id := fmt.Sprintf("op-%d", i)
		storetest.Enqueue(t, claimer, storetest.T0, storetest.NewOp(id, "a", storetest.T0))
		var (
			wg        sync.WaitGroup
			claims    []scheduler.Claim
			claimErr  error
			cancelErr error
		)
		wg.Go(func() {
			claims, claimErr = claimer.ClaimDue(ctx, scheduler.ClaimParams{Now: storetest.T0, Limit: 1, LeaseFor: time.Hour})
		})
		wg.Go(func() {
			_, cancelErr = canceler.CancelOperation(ctx, id, scheduler.Action{Actor: "x", At: storetest.T0, Reason: "race"})
		})
		wg.Wait()
		if claimErr != nil {
			t.Fatal(claimErr)
		}
		state := storetest.GetOp(t, claimer, id).State
		switch {
		case len(claims) == 1 && errors.Is(cancelErr, scheduler.ErrInvalidTransition) && state == scheduler.StateRunning:
		case len(claims) == 0 && cancelErr == nil && state == scheduler.StateCanceled:
		default:
			t.Fatalf("%s: claimed %d, cancel %v, ends %s", id, len(claims), cancelErr, state)
		}
	}
}

// Processes enqueueing at once keep one identity per intent: of
// operations sending the same request identity as an idempotency key, one
// is created and the others are rejected (ErrIdentityInUse); of the same
// operation ID, one is created and the others find it.
func TestEnqueuersOfSeveralProcessesKeepOneIdentity(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	const processes = 4
	stores := make([]scheduler.Store, processes)
	for i := range stores {
		stores[i] = openStoreAt(t, url)
	}
	if _, _, err := stores[0].PutScope(ctx, scheduler.ScopeConfig{Name: "pay", Provider: "generic", BaseURL: "https://pay.example",
		MaxConcurrent: 4, IdempotencyHeader: "X-Request-Key"}, scheduler.Action{Actor: "test", At: storetest.T0, Reason: "setup"}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		key := fmt.Sprintf("k%d", round)
		var (
			wg      sync.WaitGroup
			results = make([][]scheduler.EnqueueResult, processes)
			errs    = make([]error, processes)
		)
		for p := range processes {
			wg.Go(func() {
				byIdentity := storetest.NewOp(fmt.Sprintf("%s-by-%d", key, p), "pay", storetest.T0)
				byIdentity.RequestIdentity = key
				sameID := storetest.NewOp(key+"-same", "pay", storetest.T0)
				sameID.RequestIdentity = key + "-same"
				results[p], errs[p] = stores[p].Enqueue(ctx, []scheduler.NewOperation{byIdentity, sameID}, storetest.T0)
			})
		}
		wg.Wait()
		created, inUse, sameCreated, sameFound := 0, 0, 0, 0
		for p := range processes {
			if errs[p] != nil {
				t.Fatalf("round %d, process %d: %v", round, p, errs[p])
			}
			switch r := results[p][0]; {
			case r.Err == nil && r.Created:
				created++
			case errors.Is(r.Err, scheduler.ErrIdentityInUse):
				inUse++
			default:
				t.Fatalf("round %d, process %d: %+v", round, p, r)
			}
			switch r := results[p][1]; {
			case r.Err == nil && r.Created:
				sameCreated++
			case r.Err == nil:
				sameFound++
			default:
				t.Fatalf("round %d, process %d, same ID: %v", round, p, r.Err)
			}
		}
		if got, want := [4]int{created, inUse, sameCreated, sameFound}, [4]int{1, processes - 1, 1, processes - 1}; got != want {
			t.Fatalf("round %d: identity created, in use; same ID created, found: got %v, want %v", round, got, want)
		}
	}
}
