package providers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimitPolicy is one item of the IETF draft's RateLimit-Policy field
// (draft-ietf-httpapi-ratelimit-headers, providers.md §0), e.g.
// `"default";q=100;w=10`.
type RateLimitPolicy struct {
	// Name is the policy's name (an SF String; a Token is accepted too).
	Name string
	// Quota is q, the quota the policy allows per window.
	Quota int64
	// Unit is qu ("requests", "content-bytes", "concurrent-requests");
	// empty when not stated, which means requests.
	Unit string
	// WindowSeconds is w, the window in seconds; 0 when not stated.
	WindowSeconds int64
}

// RateLimitItem is one item of the IETF draft's RateLimit field: the new
// form `"default";r=50;t=30`, or the single item of the -07 form
// `limit=100, remaining=0, reset=30`.
type RateLimitItem struct {
	// Name is the policy the item reports on; empty in the -07 form.
	Name string
	// Remaining is r (remaining in -07): the quota units left.
	Remaining int64
	// ResetSeconds is t (reset in -07): seconds until more quota is
	// available. Meaningful only when HasReset is true.
	ResetSeconds int64
	// HasReset is true when the item stated t.
	HasReset bool
	// Limit is the quota stated by the -07 form's limit; 0 in the new form,
	// where the quota lives in RateLimit-Policy.
	Limit int64
	// PartitionKey is pk, the partition the request counted against, as
	// the field wrote the byte sequence (base64); empty when not stated.
	PartitionKey string
}

// ParseRateLimitPolicy parses a RateLimit-Policy field value. Items without
// a string or token name or without an integer q are skipped. The error
// wraps ErrMalformedField when the field is not an RFC 9651 List; the
// draft says such a field is ignored.
func ParseRateLimitPolicy(field string) ([]RateLimitPolicy, error) {
	items, err := parseSFList(field)
	if err != nil {
		return nil, fmt.Errorf("parse RateLimit-Policy: %w", err)
	}
	var out []RateLimitPolicy
	for _, it := range items {
		name, ok := it.val.name()
		q, hasQ := it.param("q")
		if it.inner || !ok || !hasQ || q.kind != sfInteger {
			continue
		}
		pol := RateLimitPolicy{Name: name, Quota: q.i}
		if qu, ok := it.param("qu"); ok {
			pol.Unit, _ = qu.name()
		}
		if w, ok := it.param("w"); ok && w.kind == sfInteger {
			pol.WindowSeconds = w.i
		}
		out = append(out, pol)
	}
	return out, nil
}

// ParseRateLimit parses a RateLimit field value in the new form (a List of
// named items with r and t) or, failing that, in the -07 form (a
// Dictionary with limit, remaining and reset). Items without an integer
// remaining are skipped; a non-integer t is taken as absent. The error wraps
// ErrMalformedField when the value is neither form; the draft says such a
// field is ignored.
func ParseRateLimit(field string) ([]RateLimitItem, error) {
	items, listErr := parseSFList(field)
	if listErr == nil {
		var out []RateLimitItem
		for _, it := range items {
			name, ok := it.val.name()
			r, hasR := it.param("r")
			if it.inner || !ok || !hasR || r.kind != sfInteger {
				continue
			}
			item := RateLimitItem{Name: name, Remaining: r.i}
			if t, ok := it.param("t"); ok && t.kind == sfInteger {
				item.ResetSeconds, item.HasReset = t.i, true
			}
			if pk, ok := it.param("pk"); ok && pk.kind == sfBinary {
				item.PartitionKey = pk.s
			}
			out = append(out, item)
		}
		return out, nil
	}
	members, err := parseSFDict(field)
	if err != nil {
		return nil, fmt.Errorf("parse RateLimit: %w", listErr)
	}
	var item RateLimitItem
	hasRemaining := false
	for _, m := range members {
		v := m.item.val
		if m.item.inner || v.kind != sfInteger {
			continue
		}
		switch m.key {
		case "remaining":
			item.Remaining, hasRemaining = v.i, true
		case "reset":
			item.ResetSeconds, item.HasReset = v.i, true
		case "limit":
			item.Limit = v.i
		}
	}
	if !hasRemaining {
		return nil, nil
	}
	return []RateLimitItem{item}, nil
}

// ReadIETFRateLimit reads the budget figures of the IETF RateLimit draft from
// h, for a response that arrived at now. It tries the RateLimit field (new
// form, with quotas from RateLimit-Policy, or the -07 form), then the old
// RateLimit-Limit/-Remaining/-Reset fields (delta seconds). With several
// request policies it reports the most constrained one (least remaining,
// then latest reset); policies counted in other units are skipped. The
// Hint is the reset as a time (Source "ratelimit" or "ratelimit-reset"),
// zero when no reset was stated. The Budget is nil when no usable remaining
// figure was found. A malformed field is ignored, as the draft requires, and
// the next form is tried.
func ReadIETFRateLimit(h http.Header, now time.Time) (*Budget, Hint) {
	return readIETF(h, "Ratelimit", "Ratelimit-Policy", true, now)
}

// readIETF is ReadIETFRateLimit over the fields called field and policy
// (Jira sends them as Beta-RateLimit and Beta-RateLimit-Policy); old says
// whether to fall back to the old RateLimit-Limit/-Remaining/-Reset fields.
func readIETF(h http.Header, field, policy string, old bool, now time.Time) (*Budget, Hint) {
	if value := strings.Join(h.Values(field), ", "); value != "" {
		policies, _ := ParseRateLimitPolicy(strings.Join(h.Values(policy), ", "))
		if b, hint, ok := readRateLimitField(value, policies, now); ok {
			return b, hint
		}
	}
	if !old {
		return nil, Hint{}
	}
	return ReadBudget(h, ietfOldHeaders(), now)
}

// ietfOldHeaders are the IETF draft's fields up to -06 (still sent by
// Zendesk and others): reset in delta seconds.
func ietfOldHeaders() BudgetHeaders {
	return BudgetHeaders{
		Limit: "Ratelimit-Limit", Remaining: "Ratelimit-Remaining",
		Reset: "Ratelimit-Reset", ResetForm: ResetDeltaSeconds,
	}
}

// readRateLimitField reads the most constrained request item of a RateLimit
// field; ok is false when the field is malformed or has no such item.
func readRateLimitField(field string, policies []RateLimitPolicy, now time.Time) (*Budget, Hint, bool) {
	items, err := ParseRateLimit(field)
	if err != nil {
		return nil, Hint{}, false
	}
	var best *RateLimitItem
	var bestQuota int64
	for i := range items {
		it := &items[i]
		if it.Remaining < 0 {
			continue
		}
		quota := it.Limit
		if pol, ok := findPolicy(policies, it.Name); ok {
			if pol.Unit != "" && pol.Unit != "requests" {
				continue
			}
			if quota == 0 {
				quota = pol.Quota
			}
		}
		if best == nil || it.Remaining < best.Remaining ||
			it.Remaining == best.Remaining && resetOf(*it) > resetOf(*best) {
			best, bestQuota = it, quota
		}
	}
	if best == nil {
		return nil, Hint{}, false
	}
	b := &Budget{Remaining: best.Remaining, Limit: max(bestQuota, 0)}
	if best.PartitionKey != "" {
		// A partition of its own: the server counts it apart (the
		// draft's pk), so it is a budget of its own.
		b.Resource = ResourceName(best.Name + ":" + best.PartitionKey)
	}
	var hint Hint
	if best.HasReset {
		hint = ParseReset(ResetDeltaSeconds, "ratelimit", strconv.FormatInt(best.ResetSeconds, 10), "", now)
		hint.Raw = Cut(field, maxRaw)
		if hint.Usable() {
			b.ResetAt = hint.At
		}
	}
	return b, hint, true
}

func findPolicy(policies []RateLimitPolicy, name string) (RateLimitPolicy, bool) {
	for _, p := range policies {
		if p.Name == name {
			return p, true
		}
	}
	return RateLimitPolicy{}, false
}

func resetOf(it RateLimitItem) int64 {
	if !it.HasReset {
		return -1
	}
	return it.ResetSeconds
}
