package providers

import (
	"strings"
	"time"
)

// Declarative is the profile of a Spec: the generic profile's rules with
// the Spec's declarations tried first. It is a table like every built-in
// profile, so its values go through the same parsers (ParseReset,
// ReadBudget, the IETF field parser) and the same rule matching.
//
// Precedence of a rate limit's wait: the Spec's retryAfter header, then
// Retry-After, then the Spec's budget reset, then X-RateLimit-Reset, then
// the IETF RateLimit t. A transient failure waits for the Spec's retryAfter
// header, then Retry-After. Rules: body codes, then declared status codes,
// then declared ranges, then the generic rules.
type Declarative struct {
	*table
	spec Spec
}

var _ Profile = (*Declarative)(nil)

// NewDeclarative validates spec and builds its profile, named CustomName.
// The error is the *SpecError of Validate.
func NewDeclarative(spec Spec) (Profile, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &Declarative{table: newDeclarativeTable(spec), spec: spec}, nil
}

// Spec returns the declarations the profile was built from.
func (d *Declarative) Spec() Spec { return d.spec }

// newDeclarativeTable builds the table of a valid spec.
func newDeclarativeTable(spec Spec) *table {
	t := table{
		name: CustomName, title: "Declared by the scope's profile", ref: "providers.md §0 (declarative)",
		idemNote:     "none unless the profile declares idempotency",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "the profile's maxConcurrent, else 4",
	}
	var rateHints, transientHints []hinter
	if ra := spec.RetryAfter; ra != nil {
		h := declaredHint(*ra)
		rateHints, transientHints = append(rateHints, h), append(transientHints, h)
	}
	if spec.RetryAfter == nil || !strings.EqualFold(spec.RetryAfter.Header, "Retry-After") {
		rateHints, transientHints = append(rateHints, retryAfter()), append(transientHints, retryAfter())
	}
	if b := spec.Budget; b != nil {
		if b.Reset != nil {
			rateHints = append(rateHints, declaredHint(*b.Reset))
		}
		if b.Remaining != "" {
			names := BudgetHeaders{Remaining: b.Remaining, Limit: b.Limit}
			if b.Reset != nil {
				form, _ := ParseResetForm(b.Reset.Format)
				names.Reset, names.ResetForm = b.Reset.Header, form
			}
			t.budgets = append(t.budgets, headerBudget{names: names, note: "declared"})
		}
	}
	t.rateHints = append(rateHints, genericRateHints()[1:]...)
	t.transientHints = transientHints
	t.budgets = append(t.budgets, genericBudgets()...)
	if i := spec.Idempotency; i != nil {
		retention, _ := time.ParseDuration(i.Retention)
		t.idem = Idempotency{Header: i.Header, Retention: retention, Methods: append([]string(nil), i.Methods...)}
		t.idemNote = "declared by the profile"
	}
	if spec.MaxConcurrent > 0 {
		t.defaults.MaxConcurrent = spec.MaxConcurrent
	}

	var rules []rule
	if b := spec.BodyCode; b != nil {
		for _, code := range sortedKeys(b.Classes) {
			ptr, code := b.Pointer, code
			rules = append(rules, rule{
				Signal: Signal{Status: "any", When: "body " + ptr + ` is "` + code + `"`, Class: b.Classes[code], Reason: "code-" + code},
				match: func(r *reading) bool {
					v, ok := r.fields().pointer(ptr)
					return ok && v == code
				},
			})
		}
	}
	var ranges []rule
	for _, key := range sortedKeys(spec.Statuses) {
		ru := rule{Signal: Signal{Status: key, Class: spec.Statuses[key], Reason: "declared-" + key}}
		if strings.HasSuffix(key, "xx") {
			ranges = append(ranges, ru)
		} else {
			rules = append(rules, ru)
		}
	}
	rules = append(rules, ranges...)
	rules = append(rules, genericRules()...)
	if spec.SharedLimits {
		rules = append(rules, rule{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit"}})
		for i := range rules {
			rules[i].Shared = rules[i].Class == ClassRateLimited
		}
		t.notes = append(t.notes, "The profile declares its rate limits shared: one pauses every scope of the group.")
	}
	return newTable(t, rules)
}

// declaredHint reads a declared header in its declared form.
func declaredHint(th TimeHeader) hinter {
	form, _ := ParseResetForm(th.Format)
	return headerHint{name: th.Header, form: form, note: "declared"}
}
