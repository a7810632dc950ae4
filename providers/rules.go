package providers

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// table is a profile made of rules: the one classification path of every
// built-in and declarative profile. Classify tries the profile's rules in
// order, then the standard rules; the first match decides the class and
// reason, and names where the timing hint is read. Describe lists the same
// rules, so what a profile says it recognises is what it does.
type table struct {
	name  string
	title string
	ref   string
	// rules are the provider's rules followed by the standard rules; the
	// first own of them are the provider's.
	rules []rule
	own   int
	// rateHints and transientHints are the hint sources, highest precedence
	// first, of rate limits and transient failures whose rule names none.
	rateHints      []hinter
	transientHints []hinter
	// budgets are read from every response; the most constrained wins.
	budgets []budgetReader
	// diag adds profile-wide diagnostic notes (request IDs, resources).
	diag func(r *reading) []string

	idem         Idempotency
	idemNote     string
	defaults     Defaults
	defaultsNote string
	notes        []string
}

// rule is one documented signal: its description and how to recognise it.
type rule struct {
	Signal
	status statusSet
	// match is the condition beyond the status; nil matches every response
	// with the status.
	match func(r *reading) bool
	// reasonOf names the reason when it depends on the response; nil uses
	// Signal.Reason.
	reasonOf func(r *reading) string
	// hints are the rule's own hint sources; nil uses the table's for the
	// class.
	hints []hinter
	// diag adds diagnostic notes.
	diag func(r *reading) []string
}

// reading is one response as the rules see it.
type reading struct {
	ex   Exchange
	st   int
	h    http.Header
	date string
	now  time.Time
	body *bodyFields // parsed on first use
}

func newReading(ex Exchange) *reading {
	return &reading{ex: ex, st: ex.Response.StatusCode, h: ex.Response.Header, date: ex.Response.Header.Get("Date"), now: ex.Now}
}

// fields is the flattened body.
func (r *reading) fields() *bodyFields {
	if r.body == nil {
		r.body = parseBody(r.ex.Body)
	}
	return r.body
}

// header is the value of header name.
func (r *reading) header(name string) string { return r.h.Get(name) }

// mentions reports whether the raw body contains token: a cheap test that
// spares parsing a large success body no rule can match.
func (r *reading) mentions(token string) bool { return bytes.Contains(r.ex.Body, []byte(token)) }

// newTable compiles rules (the provider's own, then the standard ones). A
// malformed status pattern is a programming error in a built-in profile
// (declarative ones are validated first), so it panics, like
// regexp.MustCompile.
func newTable(t table, own []rule) *table {
	t.own = len(own)
	t.rules = append(append([]rule(nil), own...), standardRules()...)
	for i := range t.rules {
		set, err := parseStatusPattern(t.rules[i].Status)
		if err != nil {
			panic(fmt.Sprintf("providers: profile %s rule %d: %v", t.name, i, err))
		}
		t.rules[i].status = set
	}
	if t.rateHints == nil {
		t.rateHints = []hinter{retryAfter()}
	}
	if t.transientHints == nil {
		t.transientHints = []hinter{retryAfter()}
	}
	return &t
}

// Name implements Profile.
func (t *table) Name() string { return t.name }

// Idempotency implements Profile.
func (t *table) Idempotency() Idempotency { return t.idem }

// Defaults implements Profile.
func (t *table) Defaults() Defaults { return t.defaults }

// Describe implements Profile.
func (t *table) Describe() Description { return t.describe() }

// Classify implements Profile.
func (t *table) Classify(ex Exchange) Outcome {
	if ex.Response == nil {
		return ClassifyTransport(ex)
	}
	r := newReading(ex)
	o := Outcome{Status: r.st, Budget: t.readBudget(r)}
	ru := &t.rules[t.match(r)]
	o.Class = ru.classFor(ex)
	o.Reason = ru.Reason
	if ru.reasonOf != nil {
		o.Reason = ru.reasonOf(r)
	}
	o.Shared = ru.Shared && o.Class == ClassRateLimited
	o.KeyBound = ru.KeyBound && o.Class == ClassUnknownOutcome && ex.IdempotencyKeySent
	o.Ambiguous = ex.Mutation && ru.Class == ClassUnknownOutcome
	var notes []string
	if t.diag != nil {
		notes = append(notes, t.diag(r)...)
	}
	if ru.diag != nil {
		notes = append(notes, ru.diag(r)...)
	}
	if chain := t.hintChain(ru, o.Class); len(chain) > 0 {
		hints := make([]Hint, len(chain))
		for i, h := range chain {
			hints[i] = h.hint(r)
		}
		o.Hint = ChooseHint(hints...)
		notes = append(notes, hintNotes(hints...)...)
	}
	o.Detail = describe(ex.Response, ex.Body, notes...)
	return o
}

// match returns the index of the first rule matching r. The standard rules
// end with catch-alls, so some rule always matches.
func (t *table) match(r *reading) int {
	for i := range t.rules {
		ru := &t.rules[i]
		if ru.status.has(r.st) && (ru.match == nil || ru.match(r)) {
			return i
		}
	}
	return len(t.rules) - 1
}

// hintChain is where the wait of an outcome of class c is read.
func (t *table) hintChain(ru *rule, c Class) []hinter {
	switch {
	case c != ClassRateLimited && c != ClassTransient:
		return nil
	case ru.hints != nil:
		return ru.hints
	case c == ClassRateLimited:
		return t.rateHints
	}
	return t.transientHints
}

// readBudget reads every budget source and keeps the most constrained:
// least remaining, then latest reset.
func (t *table) readBudget(r *reading) *Budget {
	var best *Budget
	for _, br := range t.budgets {
		b := br.read(r)
		if b == nil {
			continue
		}
		if best == nil || b.Remaining < best.Remaining || b.Remaining == best.Remaining && b.ResetAt.After(best.ResetAt) {
			best = b
		}
	}
	return best
}

// classFor is the signal's class for ex. Whatever the signal says, a read
// is never an unknown outcome: it has no effect to doubt.
func (s Signal) classFor(ex Exchange) Class {
	c := s.Class
	switch {
	case !ex.Mutation && s.ReadClass != "":
		c = s.ReadClass
	case ex.Mutation && ex.IdempotencyKeySent && s.KeyedClass != "":
		c = s.KeyedClass
	}
	if c == ClassUnknownOutcome && !ex.Mutation {
		c = ClassTransient
	}
	return c
}

func (t *table) describe() Description {
	d := Description{
		Name: t.name, Title: t.title, Reference: t.ref,
		Signals:     make([]Signal, 0, t.own),
		Idempotency: describeIdempotency(t.idem, t.idemNote),
		Defaults:    describeDefaults(t.defaults, t.defaultsNote),
		Notes:       append([]string(nil), t.notes...),
	}
	for _, ru := range t.rules[:t.own] {
		d.Signals = append(d.Signals, ru.described())
		if ru.Shared {
			d.SharedLimits = append(d.SharedLimits, ru.summary())
		}
	}
	d.RateLimitHints = describeHints(t.rateHints)
	d.TransientHints = describeHints(t.transientHints)
	for _, b := range t.budgets {
		d.Budget = append(d.Budget, b.source())
	}
	if d.SharedLimits == nil {
		d.SharedLimits = []string{}
	}
	if d.Budget == nil {
		d.Budget = []BudgetSource{}
	}
	return d
}

func (ru rule) described() Signal {
	s := ru.Signal
	s.Hints = describeHints(ru.hints)
	return s
}

// summary is the rule's status and condition in a few words.
func (ru rule) summary() string {
	if ru.When == "" {
		return ru.Status
	}
	return ru.Status + " " + ru.When
}

func describeHints(hs []hinter) []HintSource {
	if hs == nil {
		return nil
	}
	out := make([]HintSource, len(hs))
	for i, h := range hs {
		out[i] = h.source()
	}
	return out
}

// StandardSignals are the rules every profile falls back to when none of
// its own matches (RFC 9110, RFC 6585, design §3 invariant 4).
func StandardSignals() []Signal {
	rs := standardRules()
	out := make([]Signal, len(rs))
	for i, ru := range rs {
		out[i] = ru.described()
	}
	return out
}

// statusSet is a compiled status pattern.
type statusSet struct {
	codes  []int
	ranges []int // hundreds: 4 for "4xx"
	any    bool
	other  bool
}

// parseStatusPattern compiles a pattern: "any", "other", or a comma list of
// codes ("429") and ranges ("5xx").
func parseStatusPattern(p string) (statusSet, error) {
	var s statusSet
	switch p {
	case "any":
		s.any = true
		return s, nil
	case "other":
		s.other = true
		return s, nil
	}
	for _, part := range strings.Split(p, ",") {
		part = strings.TrimSpace(part)
		if len(part) == 3 && part[1:] == "xx" && part[0] >= '1' && part[0] <= '5' {
			s.ranges = append(s.ranges, int(part[0]-'0'))
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || len(part) != 3 || n < 100 || n > 599 {
			return statusSet{}, fmt.Errorf("status pattern %q: %q is not a status code (100-599) or range (4xx)", p, part)
		}
		s.codes = append(s.codes, n)
	}
	return s, nil
}

func (s statusSet) has(st int) bool {
	switch {
	case s.any:
		return true
	case s.other:
		c := st / 100
		return c != 2 && c != 4 && c != 5
	}
	for _, c := range s.codes {
		if c == st {
			return true
		}
	}
	for _, r := range s.ranges {
		if st/100 == r {
			return true
		}
	}
	return false
}
