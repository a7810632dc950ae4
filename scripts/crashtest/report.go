package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"
)

// checks is the table of results; a row that is not ok is a violation.
type checks struct {
	rows       [][2]string
	violations int
}

func (c *checks) add(name string, n int, ok bool) {
	mark := "ok"
	if !ok {
		mark = "VIOLATION"
		c.violations++
	}
	c.rows = append(c.rows, [2]string{name, fmt.Sprintf("%d\t%s", n, mark)})
}

// runInfo is what the run saw besides the stand-in's log and the views.
type runInfo struct {
	feed       *feedLog
	exits      []exit // processes that exited by themselves
	dbRestarts int    // immediate stops and restarts of PostgreSQL
	procs      int
}

func report(cfg config, sim *standIn, ops map[string]opSpec, views map[string]opView, took time.Duration, info runInfo) error {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	var c checks
	byState := map[string]int{}
	lost := 0
	for _, v := range views {
		byState[v.State]++
		switch v.State {
		case "succeeded", "failed", "canceled", "held":
		default:
			lost++
		}
	}
	c.add("operations accepted", len(ops), true)
	for _, st := range []string{"succeeded", "held", "failed", "canceled"} {
		c.add("  "+st, byState[st], true)
	}
	c.add("lost (not terminal or held)", lost, lost == 0)
	c.add("kills (SIGKILL + restart)", len(sim.kills)-len(info.exits), true)
	if info.procs > 1 {
		perSlot := make([]int, info.procs)
		for _, k := range sim.kills {
			if k.slot >= 0 && k.slot < info.procs {
				perSlot[k.slot]++
			}
		}
		for slot, n := range perSlot {
			c.add(fmt.Sprintf("  of process %d (with exits)", slot), n, true)
		}
	}
	if info.dbRestarts > 0 || len(info.exits) > 0 {
		c.add("database crashes (immediate stop + restart)", info.dbRestarts, true)
		for _, e := range info.exits {
			fmt.Printf("process %d exited by itself, noticed %s: %s\n", e.slot, e.at.Format(time.StampMilli), e.logs)
		}
		c.add("serves that exited by themselves (restarted)", len(info.exits), true)
	}
	c.add("requests seen by the provider", sim.total, true)
	if info.procs > 1 {
		for slot := range info.procs {
			c.add(fmt.Sprintf("  from process %d", slot), sim.bySlot[slot], sim.bySlot[slot] > 0)
		}
		c.add("  from a process gone before it was looked up", sim.bySlot[-1], true)
	}

	dupEffects, keyChanged, heldNotPlain, heldResent := 0, 0, 0, 0
	for id, o := range ops {
		rec := sim.ops[id]
		switch o.scope.kind {
		case "keyed":
			if rec != nil && len(rec.keys) > 1 {
				keyChanged++
			}
			if rec != nil && rec.effects > 1 {
				dupEffects++
			}
		case "plain":
			if rec != nil && rec.effects > 1 {
				dupEffects++
			}
		}
		if views[id].State == "held" {
			if o.scope.kind != "plain" {
				heldNotPlain++
			}
			if rec != nil && rec.effects > 1 {
				heldResent++
			}
		}
	}
	c.add("duplicate effects", dupEffects, dupEffects == 0)
	c.add("resends with a different key", keyChanged, keyChanged == 0)
	c.add("sends before notBefore", sim.early, sim.early == 0)
	early := sendsBeforeNextAttempt(sim, views)
	c.add("sends before the recorded next attempt", early, early == 0)
	c.add("sends during a scope pause", sim.duringPause, sim.duringPause == 0)
	c.add("scope concurrency cap exceeded", sim.overCap, sim.overCap == 0)
	for _, id := range sim.twiceInFlight {
		fmt.Printf("in flight twice at once: %s\n", id)
	}
	c.add("operation in flight twice at once", len(sim.twiceInFlight), len(sim.twiceInFlight) == 0)
	c.add("held other than uncertain non-idempotent", heldNotPlain, heldNotPlain == 0)
	c.add("held operations sent more than once", heldResent, heldResent == 0)
	heldAtKills(&c, sim, ops, views)
	burstKills(&c, cfg, sim, ops, views)
	silentOps(&c, sim, ops, views)
	outageAnswers(&c, sim, ops, views)
	feedChecks(&c, info.feed, views)

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "check\tcount\tresult")
	for _, r := range c.rows {
		fmt.Fprintf(w, "%s\t%s\n", r[0], r[1])
	}
	w.Flush()
	fmt.Printf("settled %s after the first kill\n", took.Round(time.Millisecond))
	// The closing line in the form test runners print.
	fmt.Printf("crashtest: %d passed, %d failed\n", len(c.rows)-c.violations, c.violations)
	if c.violations > 0 {
		return fmt.Errorf("%d violation(s) (seed %d)", c.violations, cfg.seed)
	}
	return nil
}

// sendsBeforeNextAttempt counts requests that arrived after pacer recorded
// an attempt but before the next attempt time that attempt decided.
func sendsBeforeNextAttempt(sim *standIn, views map[string]opView) int {
	n := 0
	for id, v := range views {
		rec := sim.ops[id]
		if rec == nil {
			continue
		}
		for _, a := range v.Attempts {
			if a.Decision.At.IsZero() || (a.Decision.State != "scheduled" && a.Decision.State != "waitingForBudget") {
				continue
			}
			// FinishedAt is cut to the millisecond: the attempt's own
			// request arrived before FinishedAt + 1ms.
			for _, q := range rec.requests {
				if q.arrived.After(a.FinishedAt.Add(time.Millisecond)) && q.arrived.Before(a.Decision.At) {
					n++
					fmt.Printf("sent before its next attempt: %s attempt %d decided %s, request arrived %s\n",
						id, a.Number, a.Decision.At.Format(time.StampMilli), q.arrived.Format(time.StampMilli))
				}
			}
		}
	}
	return n
}

// heldAtKills checks that held uncertain mutations are exactly those in
// flight at a kill or not answered in time: every request cut by a kill is
// held, and every held one was cut, answered just before a kill (pacer
// died before recording the answer) or given up by pacer's request timeout.
func heldAtKills(c *checks, sim *standIn, ops map[string]opSpec, views map[string]opView) {
	cut, cutNotHeld, heldUnexplained, heldAnswered, heldUnsent, heldTimedOut, heldOutage := 0, 0, 0, 0, 0, 0, 0
	for id, rec := range sim.ops {
		if rec.cut && ops[id].scope.kind == "plain" {
			cut++
			if views[id].State != "held" {
				cutNotHeld++
			}
		}
	}
	for id, v := range views {
		if v.State != "held" {
			continue
		}
		rec := sim.ops[id]
		switch {
		case rec == nil:
			heldUnsent++ // leased (intent written), killed before the request left
		case rec.cut:
		case rec.timedOut:
			heldTimedOut++
		case sim.inFlightAtKill(rec):
			heldAnswered++
		case sim.inFlightAtOutage(rec):
			heldOutage++
		default:
			heldUnexplained++
			fmt.Printf("held but not in flight at a kill: %s arrived %s answered %s kills %v\n", id,
				rec.arrivedAt.Format(time.StampMilli), rec.answeredAt.Format(time.StampMilli), sim.kills)
		}
	}
	c.add("non-idempotent mutations cut by a kill", cut, true)
	c.add("  of them not held", cutNotHeld, cutNotHeld == 0)
	c.add("held: answered around a kill, not yet recorded", heldAnswered, true)
	c.add("held: leased, not yet sent at a kill", heldUnsent, true)
	c.add("held: not answered within pacer's request timeout", heldTimedOut, true)
	if len(sim.outages) > 0 {
		c.add("held: in flight while the database was down", heldOutage, true)
	}
	c.add("held: not in flight at any kill", heldUnexplained, heldUnexplained == 0)
}

// burstKills checks the answers of every burst a kill followed within
// burstWindow: each is recorded with its answer, or treated as
// interrupted (a read resent, a keyed mutation resent with its key or
// held, a plain one held and not resent).
func burstKills(c *checks, cfg config, sim *standIn, ops map[string]opSpec, views map[string]opView) {
	inWindow, answers, recorded, resent, held, wrong := 0, 0, 0, 0, 0, 0
	midBatch, beforeAny, afterAll := 0, 0, 0
	for _, k := range sim.burstKills {
		if len(k.answers) == 0 {
			fmt.Printf("kill of process %d after a burst with no answer to it\n", k.slot)
		} else {
			fmt.Printf("kill of process %d %s after a burst of %d answers to it\n", k.slot, k.at.Sub(k.last).Round(10*time.Microsecond), len(k.answers))
		}
		if !k.inWindow() {
			continue
		}
		inWindow++
		rec0 := recorded
		for _, a := range k.answers {
			answers++
			switch answerFate("burst answer", a, views[a.id], sim.ops[a.id], ops[a.id].scope.kind) {
			case fateRecorded:
				recorded++
			case fateResent:
				resent++
			case fateHeld:
				held++
			default:
				wrong++
			}
		}
		switch n := recorded - rec0; {
		case n == 0:
			beforeAny++
		case n == len(k.answers):
			afterAll++
		default:
			midBatch++
		}
	}
	c.add("kills right after a burst of answers", len(sim.burstKills), true)
	// Coverage: with two kills or more, at least one lands in the window.
	c.add(fmt.Sprintf("  within %s of the last answer (≥%d answers)", burstWindow, minBurst), inWindow, inWindow > 0 || cfg.kills < 2)
	c.add("    before any answer was recorded", beforeAny, true)
	c.add("    after part was recorded (mid-batch)", midBatch, true)
	c.add("    after all were recorded", afterAll, true)
	c.add("  their answers", answers, true)
	c.add("    recorded with the answer", recorded, true)
	c.add("    interrupted, then resent (same key)", resent, true)
	c.add("    interrupted, then held", held, true)
	c.add("    recorded otherwise, or not resent/held", wrong, wrong == 0)
}

// What became of an answer pacer may have had no time to record.
const (
	fateRecorded = "recorded" // recorded with the answer
	fateResent   = "resent"   // interrupted, then resent (a read, or a mutation with its key)
	fateHeld     = "held"     // interrupted, then held (a mutation; one without a key not resent)
	fateWrong    = "wrong"    // recorded as another answer, or interrupted and neither resent nor held
)

// answerFate judges what pacer did with answer a of an operation of kind
// (the stand-in's rec, pacer's v), printing what it finds wrong under
// what: the answer is recorded, or its attempt is interrupted and then
// the operation resent (a read, a keyed mutation) or held (a mutation;
// one without a key never resent).
func answerFate(what string, a burstAnswer, v opView, rec *opRecord, kind string) string {
	att, found := attemptFor(v.Attempts, a.arrived)
	later := rec != nil && rec.requests[len(rec.requests)-1].arrived.After(a.arrived)
	switch {
	case found && att.Status == a.status:
		return fateRecorded
	case !found || att.Status != 0 || att.Reason != "interrupted":
		fmt.Printf("%s %s (%d) recorded as %d %q\n", what, a.id, a.status, att.Status, att.Reason)
		return fateWrong
	case kind == "read" && later, kind == "keyed" && later:
		return fateResent
	case kind != "read" && v.State == "held" && (kind == "keyed" || !later):
		return fateHeld
	default:
		fmt.Printf("%s %s (%d) interrupted, then %s, resent %v\n", what, a.id, a.status, v.State, later)
		return fateWrong
	}
}

// outageAnswers checks the answers that left while the database was down
// (pacer unable to record them): each is recorded once the database is
// back, or treated as interrupted, as after a kill. It counts the
// requests of live processes in flight when the database went down.
func outageAnswers(c *checks, sim *standIn, ops map[string]opSpec, views map[string]opView) {
	if len(sim.outages) == 0 {
		return
	}
	inFlight, fates := 0, map[string]int{}
	for id, rec := range sim.ops {
		for _, q := range rec.requests {
			for _, o := range sim.outages {
				if q.arrived.Before(o.down) && (q.answered.IsZero() || q.answered.After(o.down)) && !sim.killedBetween(q.slot, q.arrived, o.down) {
					inFlight++
				}
				if q.answered.IsZero() || q.answered.Before(o.down) || !q.answered.Before(o.up) {
					continue
				}
				a := burstAnswer{id: id, status: q.status, arrived: q.arrived, answered: q.answered, slot: q.slot}
				fates[answerFate("answer during the database outage", a, views[id], rec, ops[id].scope.kind)]++
			}
		}
	}
	n := fates[fateRecorded] + fates[fateResent] + fates[fateHeld] + fates[fateWrong]
	c.add("requests in flight when the database went down", inFlight, true)
	c.add("answers while the database was down", n, true)
	c.add("    recorded with the answer", fates[fateRecorded], true)
	c.add("    interrupted, then resent (same key)", fates[fateResent], true)
	c.add("    interrupted, then held", fates[fateHeld], true)
	c.add("    recorded otherwise, or not resent/held", fates[fateWrong], fates[fateWrong] == 0)
}

// attemptFor returns the attempt that sent a request arriving at t: the
// last one started (claimed) at or before t.
func attemptFor(atts []attemptView, t time.Time) (attemptView, bool) {
	var found attemptView
	ok := false
	for _, a := range atts {
		if !a.StartedAt.After(t) && (!ok || a.Number > found.Number) {
			found, ok = a, true
		}
	}
	return found, ok
}

// silentOps checks the mutations whose first request was applied and
// never answered: without idempotency keys each ends held/unknownOutcome,
// sent once; with keys each is resent with the same key, applied once,
// and succeeds.
func silentOps(c *checks, sim *standIn, ops map[string]opSpec, views map[string]opView) {
	var plain, plainTimedOut, plainHeld, plainWrong, keyed, keyedTimedOut, keyedOK, keyedWrong int
	for id, o := range ops {
		rec := sim.ops[id]
		if !o.silent || rec == nil || !rec.silenced {
			continue
		}
		v := views[id]
		if o.scope.kind == "plain" {
			plain++
			if rec.timedOut {
				plainTimedOut++
			}
			if v.State == "held" && v.HoldReason == "unknownOutcome" && len(rec.requests) == 1 && rec.effects == 1 {
				plainHeld++
				continue
			}
			plainWrong++
		} else {
			keyed++
			if rec.timedOut {
				keyedTimedOut++
			}
			if v.State == "succeeded" && len(rec.requests) >= 2 && len(rec.keys) == 1 && rec.effects == 1 {
				keyedOK++
				continue
			}
			keyedWrong++
		}
		fmt.Printf("silent mutation %s (%s) ended %s %s%s after %d requests, %d effects, %d keys\n", id, o.scope.kind,
			v.State, v.HoldReason, v.FailureReason, len(rec.requests), rec.effects, len(rec.keys))
	}
	c.add("silent mutations, no idempotency key", plain, true)
	c.add("  timed out by pacer (not a kill)", plainTimedOut, plainTimedOut > 0)
	c.add("  held unknownOutcome, sent once", plainHeld, true)
	c.add("  ended otherwise (failed, resent, …)", plainWrong, plainWrong == 0)
	c.add("silent mutations, idempotency key", keyed, true)
	c.add("  timed out by pacer (not a kill)", keyedTimedOut, keyedTimedOut > 0)
	c.add("  resent with its key, applied once, succeeded", keyedOK, true)
	c.add("  ended otherwise (failed, held, duplicated, …)", keyedWrong, keyedWrong == 0)
}

// feedChecks checks the change feed as the follower read it: seq grows
// strictly from each change to the next, across pages and processes, and
// every operation that ended or is held has, as its last change in the
// feed, the state it is in.
func feedChecks(c *checks, feed *feedLog, views map[string]opView) {
	notIncreasing := 0
	last := map[string]feedChange{}
	for i, ch := range feed.changes {
		if i > 0 && ch.Seq <= feed.changes[i-1].Seq {
			notIncreasing++
			fmt.Printf("change feed: seq %d (%s %s) after seq %d\n", ch.Seq, ch.OperationID, ch.State, feed.changes[i-1].Seq)
		}
		last[ch.OperationID] = ch
	}
	settled, missing := 0, 0
	for id, v := range views {
		switch v.State {
		case "succeeded", "failed", "canceled", "held":
		default:
			continue
		}
		settled++
		if ch, ok := last[id]; !ok || ch.State != v.State {
			missing++
			fmt.Printf("change feed: %s is %s, its last change %q (seq %d)\n", id, v.State, ch.State, ch.Seq)
		}
	}
	c.add("changes read from the feed", len(feed.changes), true)
	for slot, n := range feed.pages {
		c.add(fmt.Sprintf("  pages read through process %d", slot), n, n > 0)
	}
	c.add("  seq not above the one before", notIncreasing, notIncreasing == 0)
	c.add("  settled operations", settled, true)
	c.add("    whose state is not their last change", missing, missing == 0)
}
