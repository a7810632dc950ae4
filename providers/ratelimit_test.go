package providers_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"pacer/providers"
)

// checkParsed checks what a header parser returned: ErrMalformedField
// when wantErr, otherwise no error and want.
func checkParsed[T any](t *testing.T, got T, err error, wantErr bool, want T) {
	t.Helper()
	if wantErr {
		if !errors.Is(err, providers.ErrMalformedField) {
			t.Fatalf("err: got %v, want ErrMalformedField", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseRateLimitPolicy(t *testing.T) {
	tests := []struct {
		name  string
		field string
		want  []providers.RateLimitPolicy
		err   bool
	}{
		// providers.md §0: the draft's documented example.
		{name: "Documented", field: `"default";q=100;w=10`, want: []providers.RateLimitPolicy{{Name: "default", Quota: 100, WindowSeconds: 10}}},
		{name: "Several", field: `"burst";q=100;w=60, "day";q=1000;w=86400;qu="requests"`, want: []providers.RateLimitPolicy{
			{Name: "burst", Quota: 100, WindowSeconds: 60}, {Name: "day", Quota: 1000, WindowSeconds: 86400, Unit: "requests"},
		}},
		{name: "TokenNameTolerated", field: `default;q=5`, want: []providers.RateLimitPolicy{{Name: "default", Quota: 5}}},
		{name: "PartitionKeyAndUnit", field: `"bytes";q=65535;qu=content-bytes;w=10;pk=:c2Vzc2lvbg==:`, want: []providers.RateLimitPolicy{{Name: "bytes", Quota: 65535, Unit: "content-bytes", WindowSeconds: 10}}},
		{name: "ItemWithoutQuotaSkipped", field: `"a";w=10, "b";q=1`, want: []providers.RateLimitPolicy{{Name: "b", Quota: 1}}},
		{name: "DecimalQuotaSkipped", field: `"a";q=1.5`, want: nil},
		{name: "Empty", field: ``, want: nil},
		{name: "Unterminated", field: `"default;q=100`, err: true},
		{name: "TrailingComma", field: `"default";q=100,`, err: true},
		{name: "UpperCaseKey", field: `"default";Q=100`, err: true},
		{name: "IntegerTooLong", field: `"default";q=1234567890123456`, err: true},
		{name: "Garbage", field: `{"q":100}`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := providers.ParseRateLimitPolicy(tt.field)
			checkParsed(t, got, err, tt.err, tt.want)
		})
	}
}

func TestParseRateLimit(t *testing.T) {
	tests := []struct {
		name  string
		field string
		want  []providers.RateLimitItem
		err   bool
	}{
		// providers.md §0: new form, the draft's documented example.
		{name: "Documented", field: `"default";r=50;t=30`, want: []providers.RateLimitItem{{Name: "default", Remaining: 50, ResetSeconds: 30, HasReset: true}}},
		{name: "WithoutReset", field: `"default";r=50`, want: []providers.RateLimitItem{{Name: "default", Remaining: 50}}},
		{name: "Several", field: `"a";r=5;t=1, "b";r=0;t=60`, want: []providers.RateLimitItem{
			{Name: "a", Remaining: 5, ResetSeconds: 1, HasReset: true}, {Name: "b", Remaining: 0, ResetSeconds: 60, HasReset: true},
		}},
		{name: "NegativeKept", field: `"a";r=-1;t=-5`, want: []providers.RateLimitItem{{Name: "a", Remaining: -1, ResetSeconds: -5, HasReset: true}}},
		{name: "DecimalResetAbsent", field: `"a";r=1;t=2.5`, want: []providers.RateLimitItem{{Name: "a", Remaining: 1}}},
		{name: "ItemWithoutRemainingSkipped", field: `"a";t=5`, want: nil},
		{name: "InnerListSkipped", field: `("a" "b");r=1, "c";r=2`, want: []providers.RateLimitItem{{Name: "c", Remaining: 2}}},
		// providers.md §0: the -07 form.
		{name: "Draft07", field: `limit=100, remaining=0, reset=30`, want: []providers.RateLimitItem{{Remaining: 0, ResetSeconds: 30, HasReset: true, Limit: 100}}},
		{name: "Draft07NoRemaining", field: `limit=100, reset=30`, want: nil},
		{name: "Malformed", field: `"default";r=`, err: true},
		{name: "MalformedDict", field: `limit=100, remaining=0,`, err: true},
		{name: "Garbage", field: `50 requests left`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := providers.ParseRateLimit(tt.field)
			checkParsed(t, got, err, tt.err, tt.want)
		})
	}
}

func TestReadIETFRateLimit(t *testing.T) {
	tests := []struct {
		name    string
		header  []string
		budget  *providers.Budget
		hintSrc string
		hintAt  time.Time
		note    string
	}{
		// providers.md §0: new form, policy gives the quota.
		{name: "NewForm", header: []string{"RateLimit-Policy", `"default";q=100;w=10`, "RateLimit", `"default";r=50;t=30`},
			budget: &providers.Budget{Remaining: 50, Limit: 100, ResetAt: now.Add(30 * time.Second)}, hintSrc: "ratelimit", hintAt: now.Add(30 * time.Second)},
		{name: "NewFormWithoutPolicy", header: []string{"RateLimit", `"default";r=0;t=30`},
			budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(30 * time.Second)}, hintSrc: "ratelimit", hintAt: now.Add(30 * time.Second)},
		{name: "MostConstrained", header: []string{"RateLimit-Policy", `"min";q=10;w=60, "day";q=1000;w=86400`, "RateLimit", `"min";r=4;t=20, "day";r=0;t=3600`},
			budget: &providers.Budget{Remaining: 0, Limit: 1000, ResetAt: now.Add(time.Hour)}, hintSrc: "ratelimit", hintAt: now.Add(time.Hour)},
		{name: "TieLatestReset", header: []string{"RateLimit", `"a";r=0;t=20, "b";r=0;t=40`},
			budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(40 * time.Second)}, hintSrc: "ratelimit", hintAt: now.Add(40 * time.Second)},
		{name: "OtherUnitsSkipped", header: []string{"RateLimit-Policy", `"conc";q=5;qu="concurrent-requests", "req";q=100`, "RateLimit", `"conc";r=0;t=1, "req";r=80;t=10`},
			budget: &providers.Budget{Remaining: 80, Limit: 100, ResetAt: now.Add(10 * time.Second)}, hintSrc: "ratelimit", hintAt: now.Add(10 * time.Second)},
		{name: "SplitAcrossLines", header: []string{"RateLimit", `"a";r=3;t=5`, "RateLimit", `"b";r=1;t=9`},
			budget: &providers.Budget{Remaining: 1, ResetAt: now.Add(9 * time.Second)}, hintSrc: "ratelimit", hintAt: now.Add(9 * time.Second)},
		{name: "ZeroReset", header: []string{"RateLimit", `"default";r=0;t=0`},
			budget: &providers.Budget{Remaining: 0}, hintSrc: "ratelimit", note: "not in the future"},
		{name: "NegativeReset", header: []string{"RateLimit", `"default";r=0;t=-30`},
			budget: &providers.Budget{Remaining: 0}, hintSrc: "ratelimit", note: "negative"},
		{name: "NegativeRemainingIgnored", header: []string{"RateLimit", `"default";r=-1;t=30`}},
		{name: "NoReset", header: []string{"RateLimit", `"default";r=7`}, budget: &providers.Budget{Remaining: 7}},
		// providers.md §0: malformed fields MUST be ignored.
		{name: "Malformed", header: []string{"RateLimit", `"default";r=50;t=`}},
		{name: "MalformedFallsBackToOldForm", header: []string{"RateLimit", `"default";r=50;t=`, "RateLimit-Remaining", "3"}, budget: &providers.Budget{Remaining: 3}},
		// providers.md §0: -07 form.
		{name: "Draft07", header: []string{"RateLimit", `limit=100, remaining=0, reset=30`},
			budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(30 * time.Second)}, hintSrc: "ratelimit", hintAt: now.Add(30 * time.Second)},
		// providers.md §0: old form (Zendesk, Resend), delta seconds.
		{name: "OldForm", header: []string{"RateLimit-Limit", "100", "RateLimit-Remaining", "0", "RateLimit-Reset", "30"},
			budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(30 * time.Second)}, hintSrc: "ratelimit-reset", hintAt: now.Add(30 * time.Second)},
		{name: "OldFormPolicyList", header: []string{"RateLimit-Limit", "100, 100;w=60", "RateLimit-Remaining", "99", "RateLimit-Reset", "50"},
			budget: &providers.Budget{Remaining: 99, Limit: 100, ResetAt: now.Add(50 * time.Second)}, hintSrc: "ratelimit-reset", hintAt: now.Add(50 * time.Second)},
		{name: "OldFormBadReset", header: []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "NaN"},
			budget: &providers.Budget{Remaining: 0}, hintSrc: "ratelimit-reset", note: "NaN"},
		{name: "OldFormGarbageRemaining", header: []string{"RateLimit-Remaining", "lots", "RateLimit-Reset", "5"},
			hintSrc: "ratelimit-reset", hintAt: now.Add(5 * time.Second)},
		// providers.md §0: pk is the partition key the request counted against, a byte sequence: the
		// figures are a budget of their own (design §12), named by the policy and the key.
		{name: "PartitionKey", header: []string{"RateLimit-Policy", `"peruser";q=100;w=60;pk=:cHsdsRa894==:`, "RateLimit", `"peruser";r=0;t=30;pk=:cHsdsRa894==:`},
			budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(30 * time.Second), Resource: "peruser:cHsdsRa894=="}, hintSrc: "ratelimit", hintAt: now.Add(30 * time.Second)},
		{name: "PartitionKeyNotBytesIgnored", header: []string{"RateLimit", `"peruser";r=5;t=30;pk="user-1"`},
			budget: &providers.Budget{Remaining: 5, ResetAt: now.Add(30 * time.Second)}, hintSrc: "ratelimit", hintAt: now.Add(30 * time.Second)},
		{name: "None"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, h := providers.ReadIETFRateLimit(header(tt.header...), now)
			if !reflect.DeepEqual(b, tt.budget) {
				t.Errorf("budget: got %+v, want %+v", b, tt.budget)
			}
			if got, want := h.Source, tt.hintSrc; got != want {
				t.Errorf("hint source: got %q, want %q", got, want)
			}
			if !h.At.Equal(tt.hintAt) {
				t.Errorf("hint at: got %v, want %v (note %q)", h.At, tt.hintAt, h.Note)
			}
			if tt.note != "" && !contains(h.Note, tt.note) {
				t.Errorf("hint note: got %q, want %q", h.Note, tt.note)
			}
			checkHint(t, h, now)
		})
	}
}

func TestReadBudget(t *testing.T) {
	gh := providers.BudgetHeaders{Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining", Reset: "X-Ratelimit-Reset", ResetForm: providers.ResetEpochSeconds}
	reset := "1789092900" // now + 15 min
	tests := []struct {
		name    string
		header  []string
		budget  *providers.Budget
		hintSrc string
		hintAt  time.Time
	}{
		// providers.md §1: GitHub's x-ratelimit-* headers.
		{name: "GitHub", header: []string{"Date", httpDate(now), "X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "4999", "X-Ratelimit-Reset", reset},
			budget: &providers.Budget{Remaining: 4999, Limit: 5000, ResetAt: now.Add(15 * time.Minute)}, hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute)},
		// design §6: the provider's clock is 10 min behind, so its reset in
		// 15 min reads 1789092300 and is still 15 min away on ours.
		{name: "GitHubSkew", header: []string{"Date", httpDate(now.Add(-10 * time.Minute)), "X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "1789092300"},
			budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(15 * time.Minute)}, hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute)},
		{name: "NoRemaining", header: []string{"X-Ratelimit-Limit", "5000", "X-Ratelimit-Reset", reset},
			hintSrc: "x-ratelimit-reset", hintAt: now.Add(15 * time.Minute)},
		{name: "NegativeRemaining", header: []string{"X-Ratelimit-Remaining", "-1"}},
		{name: "GarbageRemaining", header: []string{"X-Ratelimit-Remaining", "NaN"}},
		{name: "HugeRemaining", header: []string{"X-Ratelimit-Remaining", "99999999999999999999999"}},
		{name: "GarbageLimit", header: []string{"X-Ratelimit-Limit", "many", "X-Ratelimit-Remaining", "10"},
			budget: &providers.Budget{Remaining: 10}},
		{name: "PastReset", header: []string{"Date", httpDate(now), "X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "1789091000"},
			budget: &providers.Budget{Remaining: 0}, hintSrc: "x-ratelimit-reset"},
		{name: "None"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, h := providers.ReadBudget(header(tt.header...), gh, now)
			if !reflect.DeepEqual(b, tt.budget) {
				t.Errorf("budget: got %+v, want %+v", b, tt.budget)
			}
			if got, want := h.Source, tt.hintSrc; got != want {
				t.Errorf("hint source: got %q, want %q", got, want)
			}
			if !h.At.Equal(tt.hintAt) {
				t.Errorf("hint at: got %v, want %v (note %q)", h.At, tt.hintAt, h.Note)
			}
			checkHint(t, h, now)
		})
	}
}
