package demo_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"pacer/demo"
	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// TestSeedShowsEveryStateWithinAMinute seeds the demo against the
// simulated provider and runs the engine for one minute of (mock) time:
// every operation state and the paused and held scope statuses must show,
// and the end states must be the ones the seed promises.
func TestSeedShowsEveryStateWithinAMinute(t *testing.T) {
	ctx := context.Background()
	prov, clk := startProvider(t)
	store := pacertest.OpenStore(t)
	sched, err := scheduler.New(store, clk, scheduler.Config{Engine: scheduler.EngineConfig{Random: func() float64 { return 0.5 }}})
	if err != nil {
		t.Fatal(err)
	}
	engine, svc := sched.Engine, sched.Service
	seeded, err := demo.Seed(ctx, svc, prov.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(seeded.Scopes) != 5 || seeded.Operations < 20 {
		t.Fatalf("seeded %+v", seeded)
	}

	seen := map[string]bool{}
	for range 60 {
		if _, err := engine.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		engine.Wait()
		page, err := svc.ListOperations(ctx, scheduler.OperationFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range page.Operations {
			seen["op:"+string(op.State)] = true
		}
		scopes, err := svc.ListScopes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range scopes {
			seen["scope:"+string(s.Status(clk.Now()))] = true
		}
		clk.Add(time.Second)
	}
	for _, want := range []string{"op:succeeded", "op:waitingForBudget", "op:scheduled", "op:held", "op:failed", "op:canceled", "scope:paused", "scope:held", "scope:open"} {
		if !seen[want] {
			t.Errorf("%s never showed in the first minute (saw %v)", want, keys(seen))
		}
	}

	want := map[string]scheduler.State{
		"charge":          scheduler.StateHeld,
		"contact-0":       scheduler.StateHeld,
		"contact-1":       scheduler.StateScheduled, // its scope is held
		"issue-invalid":   scheduler.StateFailed,
		"obsolete-export": scheduler.StateCanceled,
		"nightly-report":  scheduler.StateScheduled,
		"refund":          scheduler.StateSucceeded, // resent with its key after the 502
		"charge-read":     scheduler.StateSucceeded,
		"sync-0":          scheduler.StateSucceeded, // after two 503s
		"repo-0":          scheduler.StateSucceeded,
		"order-0":         scheduler.StateSucceeded,
	}
	for name, st := range want {
		op, err := svc.GetOperation(ctx, seeded.Prefix+name)
		if err != nil {
			t.Fatal(err)
		}
		if op.State != st {
			t.Errorf("%s: state %s, want %s (hold %q, last %+v)", name, op.State, st, op.HoldReason, op.LastOutcome)
		}
	}
	if op, _ := svc.GetOperation(ctx, seeded.Prefix+"charge"); op.HoldReason != scheduler.HoldUnknownOutcome {
		t.Errorf("charge hold reason %q, want unknownOutcome", op.HoldReason)
	}
	if op, _ := svc.GetOperation(ctx, seeded.Prefix+"contact-0"); op.HoldReason != scheduler.HoldAuthRevoked {
		t.Errorf("contact-0 hold reason %q, want authRevoked", op.HoldReason)
	}
	if attempts, _ := svc.ListAttempts(ctx, seeded.Prefix+"refund"); len(attempts) != 2 {
		t.Errorf("refund took %d attempts, want 2 (502, then the same key again)", len(attempts))
	}
}

// TestTrafficEnqueuesUntilCanceled runs the traffic generator for a few
// ticks of the mock clock.
func TestTrafficEnqueuesUntilCanceled(t *testing.T) {
	prov, clk := startProvider(t)
	store := pacertest.OpenStore(t)
	sched, err := scheduler.New(store, clk, scheduler.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc := sched.Service
	if _, err := demo.Seed(context.Background(), svc, prov.URL()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { demo.Traffic(ctx, svc, clk, 10*time.Second, nil); close(done) }()
	count := func() int {
		page, err := svc.ListOperations(context.Background(), scheduler.OperationFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, op := range page.Operations {
			if strings.HasPrefix(op.ID, "demo-traffic-") {
				n++
			}
		}
		return n
	}
	for tick := 1; tick <= 3; tick++ {
		time.Sleep(10 * time.Millisecond) // let the goroutine reach its ticker
		clk.Add(10 * time.Second)
		deadline := time.Now().Add(5 * time.Second)
		for count() < 5*tick && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := count(); got != 5*tick {
			t.Fatalf("after %d ticks: %d traffic operations, want %d", tick, got, 5*tick)
		}
	}
	cancel()
	<-done
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSeedTwiceWithinASecondAdds seeds twice 300 ms apart (a quick
// `serve --demo-force` rerun): the second seed adds its operations under
// a prefix of its own instead of colliding with the first's IDs.
func TestSeedTwiceWithinASecondAdds(t *testing.T) {
	ctx := context.Background()
	prov, clk := startProvider(t)
	sched, err := scheduler.New(pacertest.OpenStore(t), clk, scheduler.Config{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := demo.Seed(ctx, sched.Service, prov.URL())
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(300 * time.Millisecond)
	second, err := demo.Seed(ctx, sched.Service, prov.URL())
	if err != nil {
		t.Fatalf("second seed 300 ms after the first: %v", err)
	}
	if first.Prefix == second.Prefix {
		t.Fatalf("both seeds used prefix %q", first.Prefix)
	}
	page, err := sched.Service.ListOperations(ctx, scheduler.OperationFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(page.Operations), first.Operations+second.Operations; got != want {
		t.Fatalf("%d operations after two seeds, want %d", got, want)
	}
}
