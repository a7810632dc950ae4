package providers_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/textproto"
	"reflect"
	"sort"
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
		forms := len(providers.ResetFormNames())
		h := providers.ParseReset(providers.ResetForm(int(form)%forms), "x-ratelimit-reset", raw, date, now)
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
		names.ResetForm = providers.ResetForm(int(form) % len(providers.ResetFormNames()))
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

// fuzzProfiles are the profiles FuzzClassify draws from, by name: every
// built-in, generic with an idempotency header, and declarative ones.
func fuzzProfiles(t testing.TB) (names []string, profiles map[string]providers.Profile) {
	profiles = map[string]providers.Profile{"generic+key": providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"})}
	for _, name := range providers.Names() {
		p, err := providers.Lookup(name, providers.Options{})
		if err != nil {
			t.Fatal(err)
		}
		profiles[name] = p
	}
	for name, doc := range map[string]string{
		"custom":        waitMsSpec,
		"custom-shared": `{"sharedLimits": true, "statuses": {"503": "rateLimited", "4xx": "transient"}, "budget": {"reset": {"header": "X-Reset", "format": "iso8601"}}, "retryAfter": {"header": "X-Retry", "format": "duration"}}`,
		"custom-empty":  `{}`,
	} {
		p, err := providers.NewDeclarative(decodeSpec(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		profiles[name] = p
	}
	for name := range profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, profiles
}

// reads2xxBodies reports whether p describes a signal that can turn a 2xx
// into something other than success (Slack's ok:false, Shopify's
// THROTTLED, a declared body code).
func reads2xxBodies(p providers.Profile) bool {
	for _, s := range p.Describe().Signals {
		if s.Status == "2xx" && s.When == "" && s.Class == providers.ClassSuccess {
			return false // every 2xx is decided before any later signal
		}
		if s.Class != providers.ClassSuccess && covers2xx(s.Status) {
			return true
		}
	}
	return false
}

// covers2xx reports whether a status pattern can match a 2xx.
func covers2xx(pattern string) bool {
	if pattern == "any" {
		return true
	}
	for _, part := range strings.Split(pattern, ",") {
		if part = strings.TrimSpace(part); len(part) == 3 && part[0] == '2' {
			return true
		}
	}
	return false
}

func FuzzClassify(f *testing.F) {
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
	var (
		names    []string
		profiles map[string]providers.Profile
	)
	f.Fuzz(func(t *testing.T, profile string, method uint8, status int, headers string, body []byte, key bool) {
		if profiles == nil {
			names, profiles = fuzzProfiles(t)
		}
		p, ok := profiles[profile]
		if !ok {
			p = profiles[names[len(profile)%len(names)]]
		}
		m := methods[int(method)%len(methods)]
		ex := exchange{method: m, status: status, header: fuzzHeader(headers), body: string(body)}.build()
		ex.IdempotencyKeySent = key && p.Idempotency().Applies(m)
		o := p.Classify(ex)
		checkOutcome(t, o, now)
		if o.Status != status {
			t.Fatalf("status: got %d, want %d", o.Status, status)
		}
		success2xx := status >= 200 && status < 300
		if o.Class == providers.ClassSuccess && !success2xx {
			t.Fatalf("%s: status %d classed success", p.Name(), status)
		}
		if success2xx && o.Class != providers.ClassSuccess && !reads2xxBodies(p) {
			t.Fatalf("%s: status %d classed %q", p.Name(), status, o.Class)
		}
		if !ex.Mutation && o.Class == providers.ClassUnknownOutcome {
			t.Fatalf("%s: read classed %q", p.Name(), o.Class)
		}
		if o.Shared && o.Class != providers.ClassRateLimited {
			t.Fatalf("%s: shared %q", p.Name(), o.Class)
		}
		if waits := o.Class == providers.ClassRateLimited || o.Class == providers.ClassTransient; !waits && o.Hint.Source != "" {
			t.Fatalf("%s: %q outcome with a hint %+v", p.Name(), o.Class, o.Hint)
		}
		if again := p.Classify(ex); !reflect.DeepEqual(again, o) {
			t.Fatalf("%s: not deterministic:\n%+v\n%+v", p.Name(), o, again)
		}
	})
}

// FuzzDeclarative feeds arbitrary specs through Validate and, when valid,
// classifies arbitrary responses with them: no panic, and the same
// guarantees as the built-in profiles.
func FuzzDeclarative(f *testing.F) {
	f.Fuzz(func(t *testing.T, spec string, status int, headers string, body []byte, mutation bool) {
		var s providers.Spec
		if json.Unmarshal([]byte(spec), &s) != nil {
			return
		}
		err := s.Validate()
		p, perr := providers.NewDeclarative(s)
		if (err == nil) != (perr == nil) {
			t.Fatalf("Validate %v but NewDeclarative %v", err, perr)
		}
		if err != nil {
			var se *providers.SpecError
			if !errors.As(err, &se) || len(se.Fields) == 0 {
				t.Fatalf("Validate error %v is not a *SpecError with fields", err)
			}
			return
		}
		method := "GET"
		if mutation {
			method = "POST"
		}
		ex := exchange{method: method, status: status, header: fuzzHeader(headers), body: string(body)}.build()
		o := p.Classify(ex)
		checkOutcome(t, o, now)
		if o.Class == providers.ClassSuccess && (status < 200 || status >= 300) {
			t.Fatalf("status %d classed success", status)
		}
		if !mutation && o.Class == providers.ClassUnknownOutcome {
			t.Fatalf("read classed %q", o.Class)
		}
		_ = p.Describe()
	})
}

// FuzzSpec builds specs field by field (so mutations reach every branch of
// Validate rather than breaking the JSON) and classifies an arbitrary
// response with each valid one.
func FuzzSpec(f *testing.F) {
	f.Fuzz(func(t *testing.T, statusKey, class, header, format, pointer, code, retention, method string, maxConcurrent int, shared bool, status int, value string, body []byte) {
		s := providers.Spec{
			Statuses:      map[string]providers.Class{statusKey: providers.Class(class)},
			BodyCode:      &providers.BodyCodeSpec{Pointer: pointer, Classes: map[string]providers.Class{code: providers.Class(class)}},
			RetryAfter:    &providers.TimeHeader{Header: header, Format: format},
			Budget:        &providers.BudgetSpec{Remaining: header + "-Left", Reset: &providers.TimeHeader{Header: header + "-Reset", Format: format}},
			Idempotency:   &providers.IdempotencySpec{Header: header + "-Key", Retention: retention, Methods: []string{method}},
			SharedLimits:  shared,
			MaxConcurrent: maxConcurrent,
		}
		p, err := providers.NewDeclarative(s)
		if err != nil {
			var se *providers.SpecError
			if !errors.As(err, &se) || len(se.Fields) == 0 {
				t.Fatalf("error %v is not a *SpecError with fields", err)
			}
			for _, fe := range se.Fields {
				if fe.Field == "" || fe.Message == "" {
					t.Fatalf("field error without field or message: %+v", se.Fields)
				}
			}
			return
		}
		h := http.Header{}
		h.Set(header, value)
		h.Set(header+"-Left", value)
		h.Set(header+"-Reset", value)
		o := p.Classify(exchange{method: "POST", key: false, status: status, header: h, body: string(body)}.build())
		checkOutcome(t, o, now)
		if o.Class == providers.ClassSuccess && (status < 200 || status >= 300) {
			t.Fatalf("status %d classed success", status)
		}
		if o.Shared && !shared {
			t.Fatalf("shared outcome from a spec without shared limits")
		}
		if s.Key() == "" {
			t.Fatalf("valid spec without a key")
		}
	})
}
