package providers_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"pacer/providers"
)

// now is the scheduler's clock in every test: 2026-09-11T02:00:00Z, epoch
// second 1789092000.
var now = time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)

const nowEpoch = 1789092000

// httpDate formats t as an IMF-fixdate, as a provider's Date header.
func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// header builds a response header from name/value pairs, canonicalising the
// names as net/http does for headers received on the wire.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// exchange is a response exchange arriving at now.
type exchange struct {
	method string
	key    bool
	status int
	header http.Header
	body   string
}

func (e exchange) build() providers.Exchange {
	method := e.method
	if method == "" {
		method = http.MethodGet
	}
	mutation := method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
	resp := &http.Response{
		Status:     http.StatusText(e.status),
		StatusCode: e.status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     e.header,
		Body:       io.NopCloser(strings.NewReader(e.body)),
	}
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	return providers.Exchange{
		Method:             method,
		Mutation:           mutation,
		IdempotencyKeySent: e.key,
		Response:           resp,
		Body:               []byte(e.body),
		Now:                now,
	}
}

// want is what a classification case expects. Zero fields of Hint and
// Budget are checked too: a case without them wants none.
type want struct {
	class    providers.Class
	reason   string
	hintSrc  string
	hintAt   time.Time
	budget   *providers.Budget
	keyBound bool
	shared   bool
	detail   string // a substring the Detail must contain
	note     string // a substring the hint's Note must contain
}

func check(t *testing.T, got providers.Outcome, w want) {
	t.Helper()
	if got.Class != w.class {
		t.Errorf("class: got %q, want %q (detail %q)", got.Class, w.class, got.Detail)
	}
	if w.reason != "" && got.Reason != w.reason {
		t.Errorf("reason: got %q, want %q", got.Reason, w.reason)
	}
	if got.Hint.Source != w.hintSrc {
		t.Errorf("hint source: got %q, want %q (hint %+v)", got.Hint.Source, w.hintSrc, got.Hint)
	}
	if !got.Hint.At.Equal(w.hintAt) {
		t.Errorf("hint at: got %v, want %v (note %q)", got.Hint.At, w.hintAt, got.Hint.Note)
	}
	if w.note != "" && !strings.Contains(got.Hint.Note, w.note) {
		t.Errorf("hint note: got %q, want it to contain %q", got.Hint.Note, w.note)
	}
	switch {
	case (got.Budget == nil) != (w.budget == nil):
		t.Errorf("budget: got %+v, want %+v", got.Budget, w.budget)
	case got.Budget != nil:
		if got.Budget.Remaining != w.budget.Remaining || got.Budget.Limit != w.budget.Limit || !got.Budget.ResetAt.Equal(w.budget.ResetAt) || got.Budget.Resource != w.budget.Resource {
			t.Errorf("budget: got %+v, want %+v", *got.Budget, *w.budget)
		}
	}

	if got.Shared != w.shared {
		t.Errorf("shared: got %v, want %v", got.Shared, w.shared)
	}
	if got.KeyBound != w.keyBound {
		t.Errorf("keyBound: got %v, want %v", got.KeyBound, w.keyBound)
	}
	if w.detail != "" && !strings.Contains(got.Detail, w.detail) {
		t.Errorf("detail: got %q, want it to contain %q", got.Detail, w.detail)
	}
	checkOutcome(t, got, now)
}

// checkOutcome asserts what holds for every outcome of every profile.
func checkOutcome(t testing.TB, o providers.Outcome, now time.Time) {
	t.Helper()
	if !o.Class.Valid() {
		t.Fatalf("invalid class %q", o.Class)
	}
	if len(o.Detail) > providers.MaxDetail {
		t.Fatalf("detail is %d bytes, more than %d", len(o.Detail), providers.MaxDetail)
	}
	checkHint(t, o.Hint, now)
	if b := o.Budget; b != nil {
		if b.Remaining < 0 || b.Limit < 0 {
			t.Fatalf("negative budget figure %+v", *b)
		}
		if !b.ResetAt.IsZero() {
			checkHint(t, providers.Hint{Source: "budget", At: b.ResetAt}, now)
		}
	}
	if o.KeyBound && o.Class != providers.ClassUnknownOutcome {
		t.Fatalf("KeyBound on class %q", o.Class)
	}
	// A resource name from an answer is bounded and clean (design §12).
	if b := o.Budget; b != nil && (len(b.Resource) > providers.MaxResource || providers.ResourceName(b.Resource) != b.Resource) {
		t.Fatalf("resource %q is not a bounded, clean name", b.Resource)
	}
}

// checkHint asserts the hint contract: usable means strictly after now and
// at most MaxHintAhead later; Raw is bounded.
func checkHint(t testing.TB, h providers.Hint, now time.Time) {
	t.Helper()
	if len(h.Raw) > 128 {
		t.Fatalf("hint raw is %d bytes", len(h.Raw))
	}
	if !h.Usable() {
		return
	}
	if !h.At.After(now) {
		t.Fatalf("usable hint %+v is not after now %v", h, now)
	}
	if h.At.Sub(now) > providers.MaxHintAhead {
		t.Fatalf("usable hint %+v is more than MaxHintAhead after now", h)
	}
	if h.Source == "" {
		t.Fatalf("usable hint without a source: %+v", h)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// signalCase is one case of a profile's table test: one documented signal
// (or a standard rule, or an edge) and what it must give.
type signalCase struct {
	name string
	ex   exchange
	want want
}

// runSignals runs cases against p and then checks that every signal p
// describes was decided by at least one case: a signal without a case
// fails the test, so the description and the tests cannot drift apart.
func runSignals(t *testing.T, p providers.Profile, cases []signalCase) {
	t.Helper()
	hit := map[int]bool{}
	for _, tc := range cases {
		ex := tc.ex.build()
		if tc.ex.key && !p.Idempotency().Applies(ex.Method) {
			t.Fatalf("%s: case sends a key the profile does not honour for %s", tc.name, ex.Method)
		}
		i, ok := providers.MatchedSignal(p, ex)
		if !ok {
			t.Fatalf("profile %s is not made of rules", p.Name())
		}
		hit[i] = true
		t.Run(tc.name, func(t *testing.T) {
			check(t, p.Classify(ex), tc.want)
		})
	}
	for i, s := range p.Describe().Signals {
		if !hit[i] {
			t.Errorf("signal %d of %s (%s %s → %s %s) has no case", i, p.Name(), s.Status, s.When, s.Class, s.Reason)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
