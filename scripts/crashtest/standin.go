package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Bursts: the stand-in holds answers back and sends them together, so that
// pacer's committer gets many completions at once; a kill follows within
// a few milliseconds.
const (
	burstSize = 12                     // answers held before they all leave
	burstWait = 400 * time.Millisecond // or this long after arming, whichever is first
	// burstWindow is how soon after a burst's last answer a kill counts
	// as landing while that burst's completions are being committed.
	burstWindow = 20 * time.Millisecond
	// minBurst is the least answers a burst needs to count.
	minBurst = 4
)

// silentBound is how long the stand-in holds a silent request at most
// (far beyond pacer's request timeout); then it drops the connection.
const silentBound = time.Minute

// standIn is the provider: it applies effects, answers by scope behaviour
// and checks every request against what it told pacer.
type standIn struct {
	mu          sync.Mutex
	rng         *rand.Rand
	ops         map[string]*opRecord
	silent      map[string]bool             // operations whose first request is applied and never answered
	flying      map[string]map[*flight]bool // scope → requests in flight
	pausedUntil map[string]time.Time
	pausedAt    map[string]time.Time
	pausedBy    map[string]int // the process the 429 went to
	scopes      []scopeSpec
	kills       []kill
	outages     []outage // the database's, with the processes alive
	// whose says which pacer process sent a request (its slot, see
	// fleet), or -1 when the sender was gone before it could be told; nil
	// means one process, slot 0.
	whose         func(r *http.Request) int
	burstKills    []burstKill
	gate          *burst // the burst being gathered, nil if none
	total         int
	bySlot        map[int]int // requests by the slot that sent them (-1: a process already gone)
	early         int
	duringPause   int
	overCap       int
	twiceInFlight []string // operations with two requests in flight at once
}

// kill is a SIGKILL (or another death) of the pacer process in slot at
// a moment.
type kill struct {
	at   time.Time
	slot int
}

// String prints a kill for the report's diagnostics.
func (k kill) String() string { return fmt.Sprintf("%d@%s", k.slot, k.at.Format(time.StampMilli)) }

// outage is a time the database was down (stopped as in a crash, then
// restarted).
type outage struct{ down, up time.Time }

// markOutage records that the database was down from down to up.
func (s *standIn) markOutage(down, up time.Time) {
	s.mu.Lock()
	s.outages = append(s.outages, outage{down: down, up: up})
	s.mu.Unlock()
}

// inFlightAtOutage reports whether the operation's last request was in
// flight while the database was down, or answered so shortly before that
// pacer may not have recorded it.
func (s *standIn) inFlightAtOutage(rec *opRecord) bool {
	for _, o := range s.outages {
		if rec.arrivedAt.Before(o.up) && (rec.answeredAt.IsZero() || o.down.Sub(rec.answeredAt) < answerToRecord) {
			return true
		}
	}
	return false
}

// flight is a request in flight at the stand-in.
type flight struct {
	id      string
	arrived time.Time
	slot    int // the process that sent it
}

// live reports whether f is still in flight from pacer's side at now: the
// process that sent it is alive, and pacer's request timeout has not
// passed (then pacer gave up on it; the stand-in notices the closed
// connection a moment later).
func (s *standIn) live(f *flight, now time.Time) bool {
	return !s.killedSince(f.slot, f.arrived) && now.Sub(f.arrived) < requestTimeout
}

type opRecord struct {
	keys       map[string]bool
	effects    int
	cut        bool // a request was cut by a kill before its answer left
	silenced   bool // its first request was applied and is never answered
	timedOut   bool // pacer gave up on a request before its answer left (no kill in between)
	requests   []request
	arrivedAt  time.Time // the last request's arrival
	slot       int       // the process that sent the last request
	answeredAt time.Time // when its answer left; zero if none did
}

// request is one request the stand-in received for an operation.
type request struct {
	arrived, answered time.Time // answered is zero if no answer left
	status            int
	slot              int // the process that sent it
}

// burst is a group of answers held back and sent at once.
type burst struct {
	release  chan struct{}
	once     sync.Once
	held     int
	flushing sync.WaitGroup // the held handlers, until their answer left
	answers  []burstAnswer  // guarded by standIn.mu
}

// burstAnswer is one answer that left in a burst.
type burstAnswer struct {
	id                string
	status            int
	arrived, answered time.Time
	slot              int // the process it went to
}

// burstKill is a kill aimed right after a burst, at the process most of
// its answers went to.
type burstKill struct {
	at      time.Time
	slot    int
	answers []burstAnswer // those that went to slot
	last    time.Time     // when the last of them left
}

// inWindow reports whether the kill landed while the burst's completions
// were being read and committed.
func (k burstKill) inWindow() bool {
	return len(k.answers) >= minBurst && k.at.Sub(k.last) <= burstWindow
}

func newStandIn(seed uint64) *standIn {
	return &standIn{rng: rand.New(rand.NewPCG(seed+1, seed+2)), ops: map[string]*opRecord{}, silent: map[string]bool{},
		flying: map[string]map[*flight]bool{}, pausedUntil: map[string]time.Time{},
		pausedAt: map[string]time.Time{}, pausedBy: map[string]int{}, bySlot: map[int]int{}, scopes: scopeSpecs()}
}

// silence makes the first request of operation id apply and never answer.
func (s *standIn) silence(id string) {
	s.mu.Lock()
	s.silent[id] = true
	s.mu.Unlock()
}

// markKill records that the process in slot dies now (the caller kills
// it right after) or died (a process that exited by itself, noticed
// later: it sent nothing since).
func (s *standIn) markKill(slot int) {
	s.mu.Lock()
	s.kills = append(s.kills, kill{at: time.Now(), slot: slot})
	s.mu.Unlock()
}

// awaitTraffic waits until at least n requests arrived within one period
// of every, or bound passed.
func (s *standIn) awaitTraffic(n int, every, bound time.Duration) {
	for end := time.Now().Add(bound); time.Now().Before(end); {
		s.mu.Lock()
		before := s.total
		s.mu.Unlock()
		time.Sleep(every)
		s.mu.Lock()
		after := s.total
		s.mu.Unlock()
		if after-before >= n {
			return
		}
	}
}

// armBurst starts gathering answers; the burst opens when burstSize are
// held or after burstWait.
func (s *standIn) armBurst() *burst {
	b := &burst{release: make(chan struct{})}
	s.mu.Lock()
	s.gate = b
	s.mu.Unlock()
	time.AfterFunc(burstWait, func() {
		s.mu.Lock()
		s.openLocked(b)
		s.mu.Unlock()
	})
	return b
}

// openLocked lets b's answers go; no further answer joins it.
func (s *standIn) openLocked(b *burst) {
	b.once.Do(func() { close(b.release) })
	if s.gate == b {
		s.gate = nil
	}
}

// killAfterBurst waits until b opened and its answers left, waits delay
// and records the kill of the process of slots that most of them went to
// (lowest slot first on a tie), and returns that slot: the caller kills
// it right after.
func (s *standIn) killAfterBurst(b *burst, delay time.Duration, slots int) int {
	<-b.release
	sent := make(chan struct{})
	go func() { b.flushing.Wait(); close(sent) }()
	select {
	case <-sent:
	case <-time.After(2 * time.Second): // an answer stuck on a dead connection
	}
	time.Sleep(delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := burstKill{at: time.Now(), slot: busiestSlot(b.answers, slots)}
	for _, a := range b.answers {
		if a.slot != k.slot {
			continue
		}
		k.answers = append(k.answers, a)
		if a.answered.After(k.last) {
			k.last = a.answered
		}
	}
	s.kills = append(s.kills, kill{at: k.at, slot: k.slot})
	s.burstKills = append(s.burstKills, k)
	return k.slot
}

// busiestSlot is the slot (of 0..slots-1) most answers went to, the
// lowest of those tied.
func busiestSlot(answers []burstAnswer, slots int) int {
	n := make([]int, slots)
	for _, a := range answers {
		if a.slot >= 0 && a.slot < slots {
			n[a.slot]++
		}
	}
	best := 0
	for i := range n {
		if n[i] > n[best] {
			best = i
		}
	}
	return best
}

// killedSince reports whether the process of slot was killed after t:
// then it may have died before recording what it was told at t. A
// request whose sender was unknown (slot -1) came from a process already
// gone.
func (s *standIn) killedSince(slot int, t time.Time) bool {
	if slot < 0 {
		return true
	}
	for i := len(s.kills) - 1; i >= 0 && s.kills[i].at.After(t); i-- {
		if s.kills[i].slot == slot {
			return true
		}
	}
	return false
}

// answerToRecord bounds the time pacer may take from reading an answer to
// committing it (generous: CI machines are shared and loaded).
const answerToRecord = 2 * time.Second

// killedBetween reports whether the process of slot was killed after
// from and at or before to (-1, a process already gone, always was).
func (s *standIn) killedBetween(slot int, from, to time.Time) bool {
	if slot < 0 {
		return true
	}
	for _, k := range s.kills {
		if k.slot == slot && k.at.After(from) && !k.at.After(to) {
			return true
		}
	}
	return false
}

// inFlightAtKill reports whether the operation's last request was in
// flight at a kill from pacer's side: it arrived before the kill and its
// answer left after the kill (the server noticed the dead connection too
// late to count it as cut) or so shortly before it that pacer may have
// died before recording it.
func (s *standIn) inFlightAtKill(rec *opRecord) bool {
	for _, k := range s.kills {
		if k.slot != rec.slot && rec.slot >= 0 {
			continue
		}
		if !rec.arrivedAt.After(k.at) && (rec.answeredAt.IsZero() || k.at.Sub(rec.answeredAt) < answerToRecord) {
			return true
		}
	}
	return false
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	var spec scopeSpec
	for _, sc := range s.scopes {
		if sc.name == parts[0] {
			spec = sc
		}
	}
	id := parts[1]
	// Read the body first: only then does the server notice a client that
	// goes away (a kill) and cancel the request's context.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	now := time.Now()
	key := r.Header.Get("Idempotency-Key")
	slot := 0
	if s.whose != nil {
		slot = s.whose(r)
	}

	s.mu.Lock()
	s.total++
	s.bySlot[slot]++
	rec := s.ops[id]
	if rec == nil {
		rec = &opRecord{keys: map[string]bool{}}
		s.ops[id] = rec
	}
	if key != "" {
		rec.keys[key] = true
	}
	rec.requests = append(rec.requests, request{arrived: now, slot: slot})
	n := len(rec.requests) - 1
	rec.arrivedAt, rec.answeredAt, rec.slot = now, time.Time{}, slot
	if nb := r.Header.Get("X-Not-Before"); nb != "" {
		if t, err := time.Parse(time.RFC3339Nano, nb); err == nil && now.Before(t) {
			s.early++
		}
	}
	if now.Before(s.pausedUntil[spec.name]) && !s.killedSince(s.pausedBy[spec.name], s.pausedAt[spec.name]) {
		s.duringPause++ // pacer had recorded the 429 (no kill since) yet sent
		fmt.Printf("sent during a pause of %s: %s arrived %s after the 429 left (its request %d)\n", spec.name, id, now.Sub(s.pausedAt[spec.name]), n+1)
	}
	silent := s.silent[id] && n == 0
	if s.flying[spec.name] == nil {
		s.flying[spec.name] = map[*flight]bool{}
	}
	scopeLive, opLive := []string{id}, 0
	for f := range s.flying[spec.name] {
		if s.live(f, now) {
			scopeLive = append(scopeLive, f.id)
			if f.id == id {
				opLive++
			}
		}
	}
	if len(scopeLive) > spec.maxConcurrent {
		s.overCap++
		fmt.Printf("over the cap of %s (%d) at %s: %v\n", spec.name, spec.maxConcurrent, now.Format(time.StampMicro), scopeLive)
	}
	if opLive > 0 {
		s.twiceInFlight = append(s.twiceInFlight, id)
	}
	me := &flight{id: id, arrived: now, slot: slot}
	s.flying[spec.name][me] = true
	roll := s.rng.IntN(100)
	latency := time.Duration(s.rng.IntN(120)) * time.Millisecond
	status := http.StatusOK
	applies := false
	switch {
	case silent:
		applies, rec.silenced = true, true
	case spec.rateLimits && roll < 4:
		status = http.StatusTooManyRequests
	case spec.kind == "read" && roll < 8:
		status = http.StatusServiceUnavailable
	case spec.kind == "read":
	case spec.kind == "keyed":
		status = http.StatusCreated
		applies = !rec.keysApplied(key)
		if spec.uncertain && roll < 10 {
			status = http.StatusBadGateway // applied, but the answer is lost
		}
	default: // plain
		status, applies = http.StatusCreated, true
	}
	if applies {
		rec.effects++
	}
	s.mu.Unlock()

	// The request leaves the flight just before its answer is written:
	// from then on pacer may send the next one.
	landed := false
	land := func() {
		s.mu.Lock()
		if !landed {
			delete(s.flying[spec.name], me)
			landed = true
		}
		s.mu.Unlock()
	}
	defer land()
	if silent {
		s.holdSilent(r, rec, slot, now)
		return
	}
	select {
	case <-time.After(latency):
	case <-r.Context().Done():
		s.dropped(rec, slot, now)
		return
	}
	s.mu.Lock()
	b := s.gate
	if b != nil {
		b.held++
		b.flushing.Add(1)
		if b.held >= burstSize {
			s.openLocked(b)
		}
	}
	s.mu.Unlock()
	if b != nil {
		defer b.flushing.Done()
		select {
		case <-b.release:
		case <-r.Context().Done():
			s.dropped(rec, slot, now)
			return
		}
	}
	// After a stall of this process both may be ready: pacer's timeout
	// wins, and an answer it cannot be waiting for any more is not sent.
	if r.Context().Err() != nil || time.Since(now) >= requestTimeout {
		s.dropped(rec, slot, now)
		panic(http.ErrAbortHandler) // close the connection without an answer
	}
	land()
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"id":%q}`, id)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	s.mu.Lock()
	if status == http.StatusTooManyRequests {
		// The pause counts from the moment the answer left.
		s.pausedAt[spec.name], s.pausedBy[spec.name] = time.Now(), slot
		s.pausedUntil[spec.name] = s.pausedAt[spec.name].Add(time.Second)
	}
	rec.answeredAt = time.Now()
	rec.requests[n].answered, rec.requests[n].status = rec.answeredAt, status
	if b != nil {
		b.answers = append(b.answers, burstAnswer{id: id, status: status, arrived: now, answered: rec.answeredAt, slot: slot})
	}
	s.mu.Unlock()
}

// holdSilent keeps a request whose effect was applied unanswered until
// pacer gives up on it (its request timeout) or dies (a kill).
func (s *standIn) holdSilent(r *http.Request, rec *opRecord, slot int, arrived time.Time) {
	select {
	case <-r.Context().Done():
	case <-time.After(silentBound):
		panic(http.ErrAbortHandler) // drop the connection without an answer
	}
	s.dropped(rec, slot, arrived)
}

// dropped records that the request slot sent at t ended without an
// answer: cut by a kill, or given up by pacer (its request timeout).
func (s *standIn) dropped(rec *opRecord, slot int, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.killedSince(slot, t) {
		rec.cut = true
	} else {
		rec.timedOut = true
	}
}

// keysApplied reports whether an effect was already applied under key.
func (r *opRecord) keysApplied(key string) bool { return r.effects > 0 && key != "" }
