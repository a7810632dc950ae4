package providers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"pacer/providers"
)

// waitMsSpec is a provider that answers 420 with X-Wait-Ms, reports its
// quota in X-Quota-*, puts error codes in /error/code and honours
// Idempotency-Key on POST for a day.
const waitMsSpec = `{
	"statuses": {"420": "rateLimited", "5xx": "unknownOutcome", "502": "transient", "418": "authRevoked"},
	"bodyCode": {"pointer": "/error/code", "classes": {"SLOW_DOWN": "rateLimited", "TOKEN_GONE": "authRevoked", "MAYBE": "unknownOutcome"}},
	"retryAfter": {"header": "X-Wait-Ms", "format": "delta-millis"},
	"budget": {"remaining": "X-Quota-Left", "limit": "X-Quota", "reset": {"header": "X-Quota-Reset", "format": "epoch-seconds"}},
	"idempotency": {"header": "X-Request-Key", "retention": "24h", "methods": ["POST"]},
	"maxConcurrent": 7
}`

func decodeSpec(t testing.TB, doc string) providers.Spec {
	t.Helper()
	var s providers.Spec
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decode spec: %v", err)
	}
	return s
}

func TestDeclarativeClassify(t *testing.T) {
	p, err := providers.NewDeclarative(decodeSpec(t, waitMsSpec))
	if err != nil {
		t.Fatal(err)
	}
	date := httpDate(now)
	tests := []signalCase{
		{name: "OKBudget", ex: exchange{status: 200, header: header("Date", date, "X-Quota", "1000", "X-Quota-Left", "999", "X-Quota-Reset", "1789092060")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 999, Limit: 1000, ResetAt: now.Add(time.Minute)}}},
		// Declared body codes, at any status, even 200.
		{name: "200BodySlowDown", ex: exchange{method: "POST", key: true, status: 200, header: header("X-Wait-Ms", "2500"), body: `{"error":{"code":"SLOW_DOWN"}}`},
			want: want{class: providers.ClassRateLimited, reason: "code-SLOW_DOWN", hintSrc: "x-wait-ms", hintAt: now.Add(2500 * time.Millisecond)}},
		{name: "400BodyTokenGone", ex: exchange{status: 400, body: `{"error":{"code":"TOKEN_GONE","message":"revoked"}}`},
			want: want{class: providers.ClassAuthRevoked, reason: "code-TOKEN_GONE"}},
		{name: "500BodyMaybeWrite", ex: exchange{method: "POST", key: true, status: 500, body: `{"error":{"code":"MAYBE"}}`},
			want: want{class: providers.ClassUnknownOutcome, reason: "code-MAYBE"}},
		{name: "500BodyMaybeRead", ex: exchange{status: 500, body: `{"error":{"code":"MAYBE"}}`},
			want: want{class: providers.ClassTransient, reason: "code-MAYBE"}},
		{name: "BodyOtherCodeFollowsStatus", ex: exchange{status: 404, body: `{"error":{"code":"NOPE"}}`},
			want: want{class: providers.ClassPermanent, reason: "not-found"}},
		// Declared statuses: 420 + X-Wait-Ms (delta-millis) waits exactly as declared.
		{name: "420WaitMs", ex: exchange{method: "POST", key: true, status: 420, header: header("X-Wait-Ms", "1500")},
			want: want{class: providers.ClassRateLimited, reason: "declared-420", hintSrc: "x-wait-ms", hintAt: now.Add(1500 * time.Millisecond)}},
		{name: "420WaitMsOverRetryAfter", ex: exchange{status: 420, header: header("X-Wait-Ms", "250", "Retry-After", "9")},
			want: want{class: providers.ClassRateLimited, reason: "declared-420", hintSrc: "x-wait-ms", hintAt: now.Add(250 * time.Millisecond)}},
		{name: "420GarbageFallsBackToRetryAfter", ex: exchange{status: 420, header: header("X-Wait-Ms", "-5", "Retry-After", "9")},
			want: want{class: providers.ClassRateLimited, reason: "declared-420", hintSrc: "retry-after", hintAt: now.Add(9 * time.Second), detail: `x-wait-ms "-5" ignored: negative`}},
		{name: "420DeclaredReset", ex: exchange{status: 420, header: header("Date", httpDate(now.Add(-time.Hour)), "X-Quota-Left", "0", "X-Quota-Reset", "1789088460")},
			want: want{class: providers.ClassRateLimited, reason: "declared-420", hintSrc: "x-quota-reset", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(time.Minute)}}},
		{name: "418AuthRevoked", ex: exchange{status: 418}, want: want{class: providers.ClassAuthRevoked, reason: "declared-418"}},
		// A declared code wins over its declared range.
		{name: "502Transient", ex: exchange{method: "POST", key: true, status: 502, header: header("X-Wait-Ms", "100")},
			want: want{class: providers.ClassTransient, reason: "declared-502", hintSrc: "x-wait-ms", hintAt: now.Add(100 * time.Millisecond)}},
		{name: "5xxUnknownEvenWithKey", ex: exchange{method: "POST", key: true, status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "declared-5xx"}},
		{name: "5xxRead", ex: exchange{status: 503}, want: want{class: providers.ClassTransient, reason: "declared-5xx"}},
		// Undeclared statuses follow the generic rules.
		{name: "429Generic", ex: exchange{status: 429, header: header("Retry-After", "3")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(3 * time.Second)}},
		{name: "409KeySent", ex: exchange{method: "POST", key: true, status: 409}, want: want{class: providers.ClassTransient, reason: "idempotency-key-in-use"}},
		{name: "403ProblemQuota", ex: exchange{status: 403, body: `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded"}`},
			want: want{class: providers.ClassRateLimited, reason: "quota-exceeded"}},
		{name: "429ProblemReduced", ex: exchange{status: 429, body: `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"}`},
			want: want{class: providers.ClassRateLimited, reason: "reduced-capacity"}},
		{name: "403ProblemAbnormal", ex: exchange{status: 403, body: `{"type":"https://iana.org/assignments/http-problem-types#abnormal-usage-detected"}`},
			want: want{class: providers.ClassRateLimited, reason: "abnormal-usage"}},
		{name: "401", ex: exchange{status: 401}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
	}
	runSignals(t, p, tests)
	if got, want := p.Idempotency(), (providers.Idempotency{Header: "X-Request-Key", Retention: 24 * time.Hour, Methods: []string{"POST"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("idempotency: got %+v, want %+v", got, want)
	}
	if got := p.Defaults(); got.MaxConcurrent != 7 || got.Requests != 0 {
		t.Errorf("defaults: got %+v", got)
	}
	if got, want := p.Name(), providers.CustomName; got != want {
		t.Errorf("name: got %q, want %q", got, want)
	}
}

// Every declared form goes through the same parser as the built-in
// profiles, Date-corrected where absolute.
func TestDeclarativeForms(t *testing.T) {
	behind := httpDate(now.Add(-10 * time.Minute)) // provider clock 10 min behind
	tests := []struct {
		format, raw string
		at          time.Time
	}{
		{"delta-seconds", "30", now.Add(30 * time.Second)},
		{"delta-millis", "30500", now.Add(30500 * time.Millisecond)},
		{"epoch-seconds", "1789091430", now.Add(30 * time.Second)},
		{"epoch-millis", "1789091430500", now.Add(30500 * time.Millisecond)},
		{"http-date", "Fri, 11 Sep 2026 01:50:30 GMT", now.Add(30 * time.Second)},
		{"retry-after", "Fri, 11 Sep 2026 01:50:30 GMT", now.Add(30 * time.Second)},
		{"retry-after", "30", now.Add(30 * time.Second)},
		{"iso8601", "2026-09-11T01:50:30Z", now.Add(30 * time.Second)},
		{"iso8601", "2026-09-11T01:50Z", now.Add(time.Minute)},
		{"duration", "1.5s", now.Add(1500 * time.Millisecond)},
		{"auto", "1789091430", now.Add(30 * time.Second)},
		{"auto", "30", now.Add(30 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.raw, func(t *testing.T) {
			spec := providers.Spec{
				Statuses:   map[string]providers.Class{"420": providers.ClassRateLimited},
				RetryAfter: &providers.TimeHeader{Header: "X-Wait", Format: tt.format},
			}
			p, err := providers.NewDeclarative(spec)
			if err != nil {
				t.Fatal(err)
			}
			o := p.Classify(exchange{status: 420, header: header("Date", behind, "X-Wait", tt.raw)}.build())
			if o.Hint.Source != "x-wait" || !o.Hint.At.Equal(tt.at) {
				t.Errorf("hint: got %+v, want x-wait at %v", o.Hint, tt.at)
			}
			checkOutcome(t, o, now)
		})
	}
}

func TestDeclarativeShared(t *testing.T) {
	p, err := providers.NewDeclarative(providers.Spec{SharedLimits: true, Statuses: map[string]providers.Class{"420": providers.ClassRateLimited}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []int{420, 429} {
		if o := p.Classify(exchange{status: st}.build()); o.Class != providers.ClassRateLimited || !o.Shared {
			t.Errorf("%d: got %s shared=%v, want a shared rate limit", st, o.Class, o.Shared)
		}
	}
	if o := p.Classify(exchange{status: 503}.build()); o.Shared {
		t.Errorf("503 transient marked shared")
	}
	if got := p.Describe().SharedLimits; len(got) == 0 {
		t.Errorf("description lists no shared limits")
	}
}

func TestSpecValidate(t *testing.T) {
	if err := decodeSpec(t, waitMsSpec).Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	if err := (providers.Spec{}).Validate(); err != nil {
		t.Fatalf("empty spec (generic rules): %v", err)
	}
	bad := `{
		"statuses": {"200": "permanent", "42": "transient", "4xx": "success", "429": "ratelimited", "5xx,4xx": "transient", "6xx": "transient"},
		"bodyCode": {"pointer": "error/code~2", "classes": {"": "transient", "X": "fine"}},
		"retryAfter": {"header": "X Wait", "format": "millis"},
		"budget": {"limit": "X-Limit", "reset": {"header": "", "format": "epoch-seconds"}},
		"idempotency": {"header": "Authorization", "retention": "forever", "methods": ["post", "POST", "POST"]},
		"maxConcurrent": 5000
	}`
	err := decodeSpec(t, bad).Validate()
	var se *providers.SpecError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *SpecError", err)
	}
	var fields []string
	for _, f := range se.Fields {
		fields = append(fields, f.Field)
		if f.Message == "" {
			t.Errorf("field %s without a message", f.Field)
		}
	}
	want := []string{
		"statuses.200", "statuses.42", "statuses.429", "statuses.4xx", "statuses.5xx,4xx", "statuses.6xx",
		"bodyCode.pointer", "bodyCode.classes", "bodyCode.classes.X",
		"retryAfter.header", "retryAfter.format",
		"budget.limit", "budget.reset.header",
		"idempotency.header", "idempotency.retention", "idempotency.methods[0]", "idempotency.methods[2]",
		"maxConcurrent",
	}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields:\n got %v\nwant %v", fields, want)
	}
	if !strings.Contains(err.Error(), "statuses.200") {
		t.Errorf("error text %q does not name the fields", err)
	}
	// Missing required parts.
	for name, tc := range map[string]struct {
		doc   string
		field string
	}{
		"BudgetEmpty":        {`{"budget": {}}`, "budget"},
		"BodyCodeNoPointer":  {`{"bodyCode": {"classes": {"A": "transient"}}}`, "bodyCode.pointer"},
		"BodyCodeNoClasses":  {`{"bodyCode": {"pointer": "/code"}}`, "bodyCode.classes"},
		"IdempotencyNoTerm":  {`{"idempotency": {"header": "Idempotency-Key"}}`, "idempotency.retention"},
		"RetentionTooLong":   {`{"idempotency": {"header": "Idempotency-Key", "retention": "2200h"}}`, "idempotency.retention"},
		"NegativeConcurrent": {`{"maxConcurrent": -1}`, "maxConcurrent"},
		"PointerWholeDoc":    {`{"bodyCode": {"pointer": "/", "classes": {"A": "transient"}}}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := decodeSpec(t, tc.doc).Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if !errors.As(err, &se) || se.Fields[0].Field != tc.field {
				t.Fatalf("got %v, want an error on %s", err, tc.field)
			}
		})
	}
}

func TestLookupCustom(t *testing.T) {
	if _, err := providers.Lookup(providers.CustomName, providers.Options{}); !errors.Is(err, providers.ErrSpecRequired) {
		t.Errorf("custom without a spec: got %v, want ErrSpecRequired", err)
	}
	var se *providers.SpecError
	if _, err := providers.Lookup(providers.CustomName, providers.Options{Spec: &providers.Spec{MaxConcurrent: -1}}); !errors.As(err, &se) {
		t.Errorf("custom with an invalid spec: got %v, want a *SpecError", err)
	}
	p, err := providers.Lookup(providers.CustomName, providers.Options{Spec: &providers.Spec{}})
	if err != nil || p.Name() != providers.CustomName {
		t.Fatalf("custom with a spec: got %v, %v", p, err)
	}
	// A built-in ignores a spec, as it ignores an idempotency header.
	if p, err := providers.Lookup("github", providers.Options{Spec: &providers.Spec{}}); err != nil || p.Name() != "github" {
		t.Errorf("github with a spec: got %v, %v", p, err)
	}
	if _, err := providers.Lookup("nope", providers.Options{}); err == nil || !strings.Contains(err.Error(), "custom") {
		t.Errorf("unknown provider: got %v, want an error mentioning custom", err)
	}
}

func TestSpecKey(t *testing.T) {
	a, b := decodeSpec(t, waitMsSpec), decodeSpec(t, waitMsSpec)
	if a.Key() == "" || a.Key() != b.Key() {
		t.Errorf("equal specs: keys %q and %q", a.Key(), b.Key())
	}
	b.MaxConcurrent++
	if a.Key() == b.Key() {
		t.Errorf("different specs share key %q", a.Key())
	}
	var none *providers.Spec
	if none.Key() != "" {
		t.Errorf("nil spec key %q", none.Key())
	}
}

// A spec survives a JSON round trip unchanged: it is stored and returned
// as JSON.
func TestSpecJSONRoundTrip(t *testing.T) {
	s := decodeSpec(t, waitMsSpec)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeSpec(t, string(b)); !reflect.DeepEqual(got, s) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
	}
	if bytes.Contains(b, []byte(`"sharedLimits"`)) {
		t.Errorf("zero fields are written: %s", b)
	}
}
