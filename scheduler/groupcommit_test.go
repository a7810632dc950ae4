package scheduler

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeWrites is a commit for groupCommit over strings: it records each
// call's inputs, holds call i until hold[i] is closed (when there is one)
// and answers each input with itself upper-cased.
type fakeWrites struct {
	mu      sync.Mutex
	calls   [][]string
	entered chan int // receives i as call i begins
	hold    map[int]chan struct{}
}

func newFakeWrites(holds ...int) *fakeWrites {
	f := &fakeWrites{entered: make(chan int, 100), hold: map[int]chan struct{}{}}
	for _, i := range holds {
		f.hold[i] = make(chan struct{})
	}
	return f
}

func (f *fakeWrites) commit(_ context.Context, ins []string) ([]string, error) {
	f.mu.Lock()
	i := len(f.calls)
	f.calls = append(f.calls, slices.Clone(ins))
	f.mu.Unlock()
	f.entered <- i
	if h, ok := f.hold[i]; ok {
		<-h
	}
	out := make([]string, len(ins))
	for k, in := range ins {
		out[k] = "<" + in + ">"
	}
	return out, nil
}

func (f *fakeWrites) recorded() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

type groupAnswer struct {
	out string
	err error
}

// run runs g.do(ctx, in) and returns its answer's channel.
func run(g *groupCommit[string, string], ctx context.Context, in string) chan groupAnswer {
	c := make(chan groupAnswer, 1)
	go func() {
		out, err := g.do(ctx, in)
		c <- groupAnswer{out, err}
	}()
	return c
}

// lead runs the first call, in, and waits until its commit began.
func (f *fakeWrites) lead(g *groupCommit[string, string], in string) chan groupAnswer {
	c := run(g, context.Background(), in)
	<-f.entered
	return c
}

// start runs g.do(ctx, in) behind a leader and returns its answer's
// channel once the call waits in pending.
func start(t *testing.T, g *groupCommit[string, string], ctx context.Context, in string) chan groupAnswer {
	t.Helper()
	g.mu.Lock()
	want := len(g.pending) + 1
	g.mu.Unlock()
	c := run(g, ctx, in)
	waitPending(t, g, want)
	return c
}

// waitPending waits until n calls wait in pending.
func waitPending(t *testing.T, g *groupCommit[string, string], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		got := len(g.pending)
		g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls pending, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func answer(t *testing.T, c chan groupAnswer) groupAnswer {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s")
		return groupAnswer{}
	}
}

// A group holds members in arrival order up to limit items; a member
// larger than limit commits alone.
func TestGroupCommitBoundsAGroup(t *testing.T) {
	f := newFakeWrites(0)
	g := newGroupCommit(f.commit, func(s string) int { return len(s) }, 3)
	first := f.lead(g, "g")
	var waiting []chan groupAnswer
	for _, in := range []string{"a", "b", "c", "d", "ee", "fffff", "h"} {
		waiting = append(waiting, start(t, g, context.Background(), in))
	}
	close(f.hold[0])
	if a := answer(t, first); a.out != "<g>" || a.err != nil {
		t.Fatalf("g: %+v", a)
	}
	for i, in := range []string{"a", "b", "c", "d", "ee", "fffff", "h"} {
		if a := answer(t, waiting[i]); a.out != "<"+in+">" || a.err != nil {
			t.Fatalf("%s: %+v", in, a)
		}
	}
	want := [][]string{{"g"}, {"a", "b", "c"}, {"d", "ee"}, {"fffff"}, {"h"}}
	if got := f.recorded(); !reflect.DeepEqual(got, want) {
		t.Fatalf("commits: %v, want %v", got, want)
	}
}

// A leader answers once its own group commits: the next group is led by
// its first member, not by a caller that is done.
func TestGroupCommitHandsTheLeadOn(t *testing.T) {
	f := newFakeWrites(0, 1)
	g := newGroupCommit(f.commit, nil, 0)
	first := f.lead(g, "g")
	a := start(t, g, context.Background(), "a")
	b := start(t, g, context.Background(), "b")
	close(f.hold[0])
	if got := answer(t, first); got.out != "<g>" {
		t.Fatalf("g: %+v", got)
	}
	if i := <-f.entered; i != 1 {
		t.Fatalf("call %d began, want 1", i)
	}
	// g answered while a and b's group still commits.
	close(f.hold[1])
	if got := answer(t, a); got.out != "<a>" {
		t.Fatalf("a: %+v", got)
	}
	if got := answer(t, b); got.out != "<b>" {
		t.Fatalf("b: %+v", got)
	}
	if got, want := f.recorded(), [][]string{{"g"}, {"a", "b"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("commits: %v, want %v", got, want)
	}
}

// A member whose context ends while its group commits (led by another)
// returns at once with the context's error, and its input is still
// written; the others of the group get their answers.
func TestGroupCommitMemberLeavesACommittingGroup(t *testing.T) {
	f := newFakeWrites(0, 1)
	g := newGroupCommit(f.commit, nil, 0)
	first := f.lead(g, "g")
	a := start(t, g, context.Background(), "a")
	ctx, cancel := context.WithCancel(context.Background())
	b := start(t, g, ctx, "b")
	close(f.hold[0])
	answer(t, first)
	<-f.entered // a leads a and b's group
	cancel()
	if got := answer(t, b); !errors.Is(got.err, context.Canceled) {
		t.Fatalf("b: %+v, want context.Canceled", got)
	}
	close(f.hold[1])
	if got := answer(t, a); got.out != "<a>" {
		t.Fatalf("a: %+v", got)
	}
	if got, want := f.recorded(), [][]string{{"g"}, {"a", "b"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("commits: %v, want %v", got, want)
	}
}

// A member elected to lead that leaves before it leads hands the lead to
// the next pending member; with none pending, the next caller leads.
func TestGroupCommitElectedMemberLeaving(t *testing.T) {
	f := newFakeWrites()
	g := newGroupCommit(f.commit, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m1 := &groupMember[string, string]{ctx: ctx, in: "m1", lead: true, wake: make(chan struct{})}
	m2 := &groupMember[string, string]{ctx: context.Background(), in: "m2", wake: make(chan struct{})}
	g.leading, g.pending = true, []*groupMember[string, string]{m1, m2}
	if _, err := g.leave(m1); !errors.Is(err, context.Canceled) {
		t.Fatalf("leave: %v", err)
	}
	select {
	case <-m2.wake:
	default:
		t.Fatal("m2 not woken to lead")
	}
	if !m2.lead || !g.leading || len(g.pending) != 1 {
		t.Fatalf("m2.lead %v, leading %v, pending %d: want m2 elected, alone pending", m2.lead, g.leading, len(g.pending))
	}
	if out, err := g.lead(m2); out != "<m2>" || err != nil {
		t.Fatalf("m2 leads: %q, %v", out, err)
	}
	if g.leading {
		t.Fatal("still leading with none pending")
	}
	if out, err := g.do(context.Background(), "m3"); out != "<m3>" || err != nil {
		t.Fatalf("m3: %q, %v", out, err)
	}
}

// A member whose context ended before its group was taken is answered
// with the context's error and not written.
func TestGroupCommitSkipsEndedMembers(t *testing.T) {
	f := newFakeWrites()
	g := newGroupCommit(f.commit, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m0 := &groupMember[string, string]{ctx: context.Background(), in: "m0", lead: true, wake: make(chan struct{})}
	m1 := &groupMember[string, string]{ctx: ctx, in: "m1", wake: make(chan struct{})}
	m2 := &groupMember[string, string]{ctx: context.Background(), in: "m2", wake: make(chan struct{})}
	g.leading, g.pending = true, []*groupMember[string, string]{m0, m1, m2}
	if out, err := g.lead(m0); out != "<m0>" || err != nil {
		t.Fatalf("m0: %q, %v", out, err)
	}
	<-m1.wake
	<-m2.wake
	if !errors.Is(m1.err, context.Canceled) || m2.out != "<m2>" || m2.err != nil {
		t.Fatalf("m1: %q, %v; m2: %q, %v", m1.out, m1.err, m2.out, m2.err)
	}
	if got, want := f.recorded(), [][]string{{"m0", "m2"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("commits: %v, want %v", got, want)
	}
}

// A commit that panics (in the leader's goroutine) still answers the
// group's other members, with an error, and hands the lead on: later
// calls commit.
func TestGroupCommitSurvivesAPanickingCommit(t *testing.T) {
	f := newFakeWrites(0)
	commit := func(ctx context.Context, ins []string) ([]string, error) {
		if slices.Contains(ins, "boom") {
			panic("boom")
		}
		return f.commit(ctx, ins)
	}
	g := newGroupCommit(commit, nil, 0)
	first := f.lead(g, "g")
	panicked := make(chan any, 1)
	g.mu.Lock()
	want := len(g.pending) + 1
	g.mu.Unlock()
	go func() {
		defer func() { panicked <- recover() }()
		g.do(context.Background(), "boom")
	}()
	waitPending(t, g, want)
	other := start(t, g, context.Background(), "other")
	close(f.hold[0])
	answer(t, first)
	if p := <-panicked; p != "boom" {
		t.Fatalf("leader recovered %v, want the commit's panic", p)
	}
	if got := answer(t, other); !errors.Is(got.err, errCommitPanicked) {
		t.Fatalf("other: %+v, want errCommitPanicked", got)
	}
	if out, err := g.do(context.Background(), "after"); out != "<after>" || err != nil {
		t.Fatalf("after: %q, %v", out, err)
	}
}
