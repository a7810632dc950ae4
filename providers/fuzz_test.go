package providers_test

import (
	"errors"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"pacer/providers"
)

// fuzzHeader reads "Name: value" lines into a header, as net/http would
// store them.
func fuzzHeader(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		h.Add(textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k)), strings.TrimSpace(v))
	}
	return h
}

func checkBudget(t *testing.T, b *providers.Budget) {
	t.Helper()
	if b == nil {
		return
	}
	if b.Remaining < 0 || b.Limit < 0 {
		t.Fatalf("negative budget figure %+v", *b)
	}
	if !b.ResetAt.IsZero() {
		checkHint(t, providers.Hint{Source: "budget", At: b.ResetAt}, now)
	}
}

func checkParsedHint(t *testing.T, h providers.Hint, source string) {
	t.Helper()
	checkHint(t, h, now)
	if h.Source != source {
		t.Fatalf("source: got %q, want %q", h.Source, source)
	}
	if !h.Usable() && h.Note == "" {
		t.Fatalf("unusable hint without a note: %+v", h)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw, date string) {
		checkParsedHint(t, providers.ParseRetryAfter(raw, date, now), "retry-after")
	})
}

func FuzzParseReset(f *testing.F) {
	f.Fuzz(func(t *testing.T, form uint8, raw, date string) {
		h := providers.ParseReset(providers.ResetForm(form%4), "x-ratelimit-reset", raw, date, now)
		checkParsedHint(t, h, "x-ratelimit-reset")
	})
}

func FuzzParseRateLimit(f *testing.F) {
	f.Fuzz(func(t *testing.T, field, policy string) {
		if _, err := providers.ParseRateLimit(field); err != nil && !errors.Is(err, providers.ErrMalformedField) {
			t.Fatalf("ParseRateLimit error %v does not wrap ErrMalformedField", err)
		}
		pols, err := providers.ParseRateLimitPolicy(policy)
		if err != nil && !errors.Is(err, providers.ErrMalformedField) {
			t.Fatalf("ParseRateLimitPolicy error %v does not wrap ErrMalformedField", err)
		}
		if err != nil && pols != nil {
			t.Fatalf("policies %+v returned with error %v", pols, err)
		}
		h := http.Header{}
		h.Set("RateLimit", field)
		h.Set("RateLimit-Policy", policy)
		b, hint := providers.ReadIETFRateLimit(h, now)
		checkBudget(t, b)
		checkHint(t, hint, now)
	})
}

func FuzzReadBudget(f *testing.F) {
	gh := providers.BudgetHeaders{Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining", Reset: "X-Ratelimit-Reset", ResetForm: providers.ResetEpochSeconds}
	f.Fuzz(func(t *testing.T, headers string, form uint8) {
		h := fuzzHeader(headers)
		names := gh
		names.ResetForm = providers.ResetForm(form % 4)
		b, hint := providers.ReadBudget(h, names, now)
		checkBudget(t, b)
		checkHint(t, hint, now)
		if hint.Source != "" && hint.Source != "x-ratelimit-reset" {
			t.Fatalf("hint source %q", hint.Source)
		}
		b, hint = providers.ReadIETFRateLimit(h, now)
		checkBudget(t, b)
		checkHint(t, hint, now)
	})
}

func FuzzClassify(f *testing.F) {
	profiles := []providers.Profile{
		providers.NewGeneric(providers.Options{}),
		providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"}),
		providers.NewGitHub(),
		providers.NewStripe(),
	}
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
	f.Fuzz(func(t *testing.T, profile uint8, method uint8, status int, headers string, body []byte, key bool) {
		p := profiles[int(profile)%len(profiles)]
		m := methods[int(method)%len(methods)]
		ex := exchange{method: m, status: status, header: fuzzHeader(headers), body: string(body)}.build()
		ex.IdempotencyKeySent = key && p.Idempotency().Applies(m)
		o := p.Classify(ex)
		checkOutcome(t, o, now)
		if o.Status != status {
			t.Fatalf("status: got %d, want %d", o.Status, status)
		}
		if success := status >= 200 && status < 300; success != (o.Class == providers.ClassSuccess) {
			t.Fatalf("status %d classed %q", status, o.Class)
		}
		if !ex.Mutation && o.Class == providers.ClassUnknownOutcome {
			t.Fatalf("read classed %q", o.Class)
		}
	})
}
