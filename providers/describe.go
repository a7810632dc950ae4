package providers

import (
	"fmt"
	"time"
)

// Description is what a profile recognises, built from the very rules it
// classifies with (never written separately), for GET /v1/providers and
// providers/README.md. Its JSON form is part of the API.
type Description struct {
	// Name is the profile's identifier, the value of a scope's "provider".
	Name string `json:"name"`
	// Title names the provider and API.
	Title string `json:"title"`
	// Reference is the section of providers.md the profile follows.
	Reference string `json:"reference"`
	// Signals are the provider's documented signals in the order they are
	// tried; the first that matches decides. A response no signal matches
	// follows the standard rules (StandardSignals).
	Signals []Signal `json:"signals"`
	// RateLimitHints are, highest precedence first, where a rate limit's
	// wait is read when its signal names no sources of its own.
	RateLimitHints []HintSource `json:"rateLimitHints"`
	// TransientHints are where a transient failure's wait is read.
	TransientHints []HintSource `json:"transientHints"`
	// Budget lists the budget figures read from every response; with
	// several, the most constrained (least remaining) is reported.
	Budget []BudgetSource `json:"budget"`
	// SharedLimits lists the signals whose limit is shared by every scope of
	// the provider (an app- or project-wide quota): they pause the scope's
	// whole group, not just the scope.
	SharedLimits []string `json:"sharedLimits"`
	// Idempotency says whether and how the provider deduplicates requests.
	Idempotency IdempotencyInfo `json:"idempotency"`
	// Defaults are the limits a scope gets when it sets none.
	Defaults DefaultsInfo `json:"defaults"`
	// Notes are caveats, including facts marked (verify) in providers.md.
	Notes []string `json:"notes,omitempty"`
}

// Signal is one documented status or body signal and what it means.
type Signal struct {
	// Status is the status pattern: a code ("429"), codes ("403,429"), a
	// range ("5xx"), "any", or "other" (outside 2xx, 4xx and 5xx).
	Status string `json:"status"`
	// When is the condition beyond the status, in words; empty when the
	// status alone decides.
	When string `json:"when,omitempty"`
	// Class is the outcome class; for a mutation without an honoured
	// idempotency key when ReadClass or KeyedClass differ.
	Class Class `json:"class"`
	// ReadClass is the class for a read when it differs from Class.
	ReadClass Class `json:"readClass,omitempty"`
	// KeyedClass is the class for a mutation that carried an idempotency
	// key the provider honours, when it differs from Class.
	KeyedClass Class `json:"keyedClass,omitempty"`
	// Reason is Outcome.Reason for this signal ("" for success); when it
	// depends on the response, the possible reasons joined by " | ".
	Reason string `json:"reason,omitempty"`
	// Shared is true when the limit signalled is shared by every scope of
	// the provider.
	Shared bool `json:"shared,omitempty"`
	// KeyBound is true when the provider stored the answer under the
	// idempotency key, so a resend replays it.
	KeyBound bool `json:"keyBound,omitempty"`
	// Hints are this signal's own wait sources, highest precedence first;
	// empty when the profile's default for the class applies.
	Hints []HintSource `json:"hints,omitempty"`
	// Note explains the choice.
	Note string `json:"note,omitempty"`
	// Verify is true when the fact is marked (verify) in providers.md or is
	// our inference.
	Verify bool `json:"verify,omitempty"`
}

// HintSource is one place a wait is read from.
type HintSource struct {
	// Source is the lower-case header name, a body field ("body
	// error.details[].retryDelay") or a fixed default; it is the Source of
	// the Hint it yields.
	Source string `json:"source"`
	// Format is how the value is written: a ResetForm name, or for a
	// computed source the formula.
	Format string `json:"format"`
	// Note says when the source applies.
	Note string `json:"note,omitempty"`
}

// BudgetSource is where budget figures are read.
type BudgetSource struct {
	// Remaining, Limit and Reset name the header (or body field) of each
	// figure; empty when the source has none.
	Remaining string `json:"remaining"`
	Limit     string `json:"limit,omitempty"`
	Reset     string `json:"reset,omitempty"`
	// ResetFormat is how Reset is written.
	ResetFormat string `json:"resetFormat,omitempty"`
	// Resource names where the answer says which of the provider's
	// budgets the figures count; empty when they count the default one.
	Resource string `json:"resource,omitempty"`
	// Note says what the figures count.
	Note string `json:"note,omitempty"`
}

// IdempotencyInfo describes a profile's Idempotency.
type IdempotencyInfo struct {
	// Header carries the key; empty when pacer sends none.
	Header string `json:"header,omitempty"`
	// Retention is how long the provider keeps a key, as a Go duration.
	Retention string `json:"retention,omitempty"`
	// Methods are the methods the key applies to; empty means every
	// mutation.
	Methods []string `json:"methods,omitempty"`
	// Note describes what the provider offers instead (body fields,
	// upserts) or why pacer does not rely on it.
	Note string `json:"note,omitempty"`
}

// DefaultsInfo describes a profile's Defaults.
type DefaultsInfo struct {
	// MaxConcurrent is the default bound on a scope's requests in flight.
	MaxConcurrent int `json:"maxConcurrent"`
	// RateLimit is the default budget; nil when none is documented.
	RateLimit *RateInfo `json:"rateLimit,omitempty"`
	// Note says where the figures come from.
	Note string `json:"note,omitempty"`
}

// RateInfo is a rate budget: Requests per Per (a Go duration).
type RateInfo struct {
	Requests int    `json:"requests"`
	Per      string `json:"per"`
}

// Describe returns the description of the built-in profile called name, or
// of the declarative profile's default rules for "custom".
func Describe(name string) (Description, error) {
	if name == CustomName {
		return customDescription(), nil
	}
	ctor, ok := constructors()[name]
	if !ok {
		return Description{}, fmt.Errorf("describe provider: unknown provider %q (known: %v)", name, Names())
	}
	return ctor(Options{}).Describe(), nil
}

// DescribeAll returns the description of every built-in profile, sorted by
// name, followed by "custom".
func DescribeAll() []Description {
	var out []Description
	for _, name := range Names() {
		d, _ := Describe(name)
		out = append(out, d)
	}
	return append(out, customDescription())
}

// customDescription describes a declarative profile with no declarations:
// what every "custom" scope starts from.
func customDescription() Description {
	d := newDeclarativeTable(Spec{}).describe()
	d.Notes = append([]string{
		`Declare the provider's signals in the scope's "profile" (see Spec): status classes, a body error code, retry-after, budget and idempotency headers, shared limits. What is not declared follows these rules.`,
	}, d.Notes...)
	return d
}

func describeIdempotency(i Idempotency, note string) IdempotencyInfo {
	info := IdempotencyInfo{Header: i.Header, Methods: i.Methods, Note: note}
	if i.Retention > 0 {
		info.Retention = formatDuration(i.Retention)
	}
	return info
}

func describeDefaults(d Defaults, note string) DefaultsInfo {
	info := DefaultsInfo{MaxConcurrent: d.MaxConcurrent, Note: note}
	if d.Requests > 0 && d.Per > 0 {
		info.RateLimit = &RateInfo{Requests: d.Requests, Per: formatDuration(d.Per)}
	}
	return info
}

// formatDuration writes d without zero tails: "24h", "1h30m", "10s".
func formatDuration(d time.Duration) string {
	s := d.String()
	for _, tail := range []string{"m0s", "h0m"} {
		if len(s) > len(tail) && s[len(s)-len(tail):] == tail {
			s = s[:len(s)-len(tail)+1]
		}
	}
	return s
}
