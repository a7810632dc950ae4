package providers_test

import (
	"strconv"
	"testing"
	"time"

	"pacer/providers"
)

func TestXClassify(t *testing.T) {
	p := providers.NewX()
	date := httpDate(now)
	epoch := func(d time.Duration) string { return strconv.FormatInt(nowEpoch+int64(d/time.Second), 10) }
	window := func(remaining string) []string {
		return []string{"Date", date, "x-rate-limit-limit", "300", "x-rate-limit-remaining", remaining, "x-rate-limit-reset", epoch(15 * time.Minute)}
	}
	tests := []signalCase{
		{name: "OKBudget", ex: exchange{status: 200, header: header(window("299")...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 299, Limit: 300, ResetAt: now.Add(15 * time.Minute)}}},
		// providers.md §11 RL: 429, x-rate-limit-reset epoch s.
		{name: "429Window", ex: exchange{status: 429, header: header(window("0")...), body: `{"title":"Too Many Requests","detail":"Too Many Requests","type":"about:blank","status":429}`},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "x-rate-limit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 300, ResetAt: now.Add(15 * time.Minute)}}},
		// design §6 skew: X's clock 10 min ahead; its reset is converted through Date.
		{name: "429WindowSkew", ex: exchange{status: 429, header: header("Date", httpDate(now.Add(10*time.Minute)), "x-rate-limit-remaining", "0", "x-rate-limit-reset", epoch(25*time.Minute))},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "x-rate-limit-reset", hintAt: now.Add(15 * time.Minute), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(15 * time.Minute)}}},
		// providers.md §11 Scope: the app's 24-h cap ⇒ all accounts.
		{name: "429App24h", ex: exchange{method: "POST", status: 429, header: header(append(window("10"), "x-app-limit-24hour-limit", "10000", "x-app-limit-24hour-remaining", "0", "x-app-limit-24hour-reset", epoch(6*time.Hour))...)},
			want: want{class: providers.ClassRateLimited, reason: "app-24h-limit", shared: true, hintSrc: "x-app-limit-24hour-reset", hintAt: now.Add(6 * time.Hour), budget: &providers.Budget{Remaining: 0, Limit: 10000, ResetAt: now.Add(6 * time.Hour)}}},
		{name: "429User24h", ex: exchange{method: "POST", status: 429, header: header(append(window("10"), "x-user-limit-24hour-limit", "17", "x-user-limit-24hour-remaining", "0", "x-user-limit-24hour-reset", epoch(3*time.Hour))...)},
			want: want{class: providers.ClassRateLimited, reason: "user-24h-limit", hintSrc: "x-user-limit-24hour-reset", hintAt: now.Add(3 * time.Hour), budget: &providers.Budget{Remaining: 0, Limit: 17, ResetAt: now.Add(3 * time.Hour)}}},
		// providers.md §11 AUTH / other.
		{name: "401", ex: exchange{status: 401, body: `{"title":"Unauthorized","type":"about:blank","status":401,"detail":"Unauthorized"}`}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "403DuplicateContent", ex: exchange{method: "POST", status: 403, body: `{"detail":"You are not allowed to create a Tweet with duplicate content.","type":"about:blank","title":"Forbidden","status":403}`},
			want: want{class: providers.ClassPermanent, reason: "duplicate-content", detail: "first one may have landed"}},
		{name: "403Forbidden", ex: exchange{method: "POST", status: 403, body: `{"detail":"You are not permitted to perform this action.","type":"about:blank","title":"Forbidden","status":403}`},
			want: want{class: providers.ClassPermanent, reason: "forbidden"}},
		{name: "400", ex: exchange{method: "POST", status: 400}, want: want{class: providers.ClassPermanent, reason: "bad-request"}},
		{name: "503", ex: exchange{method: "POST", status: 503}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "500Write", ex: exchange{method: "POST", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestXProfile(t *testing.T) {
	p, _ := providers.Lookup("x", providers.Options{})
	// providers.md §11: no idempotency.
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
}
