package providers_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"pacer/providers"
)

func TestParseRetryAfter(t *testing.T) {
	behind := httpDate(now.Add(-10 * time.Minute)) // provider clock 10 min behind ours
	tests := []struct {
		name, raw, date string
		at              time.Time // zero: unusable
		note            string
	}{
		// providers.md §0: delay-seconds.
		{name: "DelaySeconds", raw: "120", at: now.Add(2 * time.Minute)},
		{name: "DelaySecondsIgnoresDate", raw: "30", date: behind, at: now.Add(30 * time.Second)},
		{name: "DelaySecondsSpaces", raw: " 30 ", at: now.Add(30 * time.Second)},
		{name: "DecimalLenient", raw: "2.0", at: now.Add(2 * time.Second)}, // providers.md §0 "2.0" from Shopify clients
		{name: "DecimalFraction", raw: "1.5", at: now.Add(1500 * time.Millisecond)},
		{name: "LeadingZeros", raw: "0007", at: now.Add(7 * time.Second)},
		// providers.md §0 / design §6: unusable values.
		{name: "Zero", raw: "0", note: "not in the future"},
		{name: "ZeroDecimal", raw: "0.0", note: "not in the future"},
		{name: "Negative", raw: "-5", note: "negative"},
		{name: "NaN", raw: "NaN", note: "NaN"},
		{name: "Inf", raw: "+Inf", note: "infinite"},
		{name: "Exponent1e400", raw: "1e400", note: "overflows"},
		{name: "Exponent", raw: "1e3", note: "not a plain decimal"},
		{name: "HugeInteger", raw: "99999999999999999999999999", note: "overflows"},
		{name: "Int64Overflow", raw: "9223372036854775808", note: "overflows"},
		{name: "AbsurdFutureClamped", raw: "999999999999", at: now.Add(providers.MaxHintAhead), note: "clamped"},
		{name: "Garbage", raw: "soon", note: "neither delay-seconds nor an HTTP-date"},
		{name: "Empty", raw: "", note: "empty"},
		{name: "Hex", raw: "0x10", note: "ignored"},
		// RFC 9110 §5.6.7: the three HTTP-date forms.
		{name: "IMFFixdate", raw: "Fri, 11 Sep 2026 02:05:00 GMT", date: httpDate(now), at: now.Add(5 * time.Minute)},
		{name: "RFC850", raw: "Friday, 11-Sep-26 02:05:00 GMT", date: httpDate(now), at: now.Add(5 * time.Minute)},
		{name: "Asctime", raw: "Fri Sep 11 02:05:00 2026", date: httpDate(now), at: now.Add(5 * time.Minute)},
		{name: "DateWithoutDateHeader", raw: "Fri, 11 Sep 2026 02:05:00 GMT", at: now.Add(5 * time.Minute)},
		// design §6: skew. The provider's clock is 10 min behind; its
		// "5 minutes from now" is 01:55 on its clock.
		{name: "SkewBehind", raw: "Fri, 11 Sep 2026 01:55:00 GMT", date: behind, at: now.Add(5 * time.Minute)},
		{name: "SkewAhead", raw: "Fri, 11 Sep 2026 02:15:00 GMT", date: httpDate(now.Add(10 * time.Minute)), at: now.Add(5 * time.Minute)},
		{name: "UnparseableDateHeader", raw: "Fri, 11 Sep 2026 02:05:00 GMT", date: "yesterday", at: now.Add(5 * time.Minute), note: "Date header unparseable"},
		{name: "PastHTTPDate", raw: "Sun, 06 Nov 1994 08:49:37 GMT", date: httpDate(now), note: "not in the future"},
		{name: "PastHTTPDateNoDate", raw: "Sun, 06 Nov 1994 08:49:37 GMT", note: "not in the future"},
		{name: "SameAsDate", raw: httpDate(now), date: httpDate(now), note: "not in the future"},
		{name: "AbsurdFutureDate", raw: "Fri, 11 Sep 2099 02:00:00 GMT", date: httpDate(now), at: now.Add(providers.MaxHintAhead), note: "clamped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := providers.ParseRetryAfter(tt.raw, tt.date, now)
			if got, want := h.Source, "retry-after"; got != want {
				t.Errorf("source: got %q, want %q", got, want)
			}
			if got, want := h.Raw, tt.raw; got != want {
				t.Errorf("raw: got %q, want %q", got, want)
			}
			checkHintAt(t, h, tt.at, tt.note)
			if !h.Usable() && h.Note == "" {
				t.Errorf("unusable hint without a note")
			}
			checkHint(t, h, now)
		})
	}
}

func TestParseRetryAfterRawBounded(t *testing.T) {
	raw := strings.Repeat("é", 200) // 400 bytes, two per rune
	h := providers.ParseRetryAfter(raw, "", now)
	if len(h.Raw) > 128 || !strings.HasPrefix(raw, h.Raw) || len(h.Raw)%2 != 0 {
		t.Errorf("raw: got %d bytes %q, want ≤128 bytes cut between runes", len(h.Raw), h.Raw)
	}
	if h.Usable() {
		t.Errorf("garbage usable: %+v", h)
	}
}

func TestParseReset(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	// The provider's clock runs 10 min behind: its "now" is epoch − 600.
	behindDate := httpDate(now.Add(-10 * time.Minute))
	providerIn5 := strconv.FormatInt(nowEpoch-600+300, 10)
	tests := []struct {
		name   string
		form   providers.ResetForm
		raw    string
		date   string
		at     time.Time
		note   string
		source string
	}{
		// providers.md §1: GitHub x-ratelimit-reset, UTC epoch seconds.
		{name: "EpochSeconds", form: providers.ResetEpochSeconds, raw: epoch(15 * time.Minute), date: httpDate(now), at: now.Add(15 * time.Minute)},
		{name: "EpochSecondsNoDate", form: providers.ResetEpochSeconds, raw: epoch(15 * time.Minute), at: now.Add(15 * time.Minute)},
		// design §6: skew. Without the Date correction this reset would be
		// in the past on our clock.
		{name: "EpochSecondsSkewBehind", form: providers.ResetEpochSeconds, raw: providerIn5, date: behindDate, at: now.Add(5 * time.Minute)},
		{name: "EpochSecondsSkewAhead", form: providers.ResetEpochSeconds, raw: epoch(15 * time.Minute), date: httpDate(now.Add(10 * time.Minute)), at: now.Add(5 * time.Minute)},
		{name: "EpochSecondsDecimal", form: providers.ResetEpochSeconds, raw: epoch(time.Minute) + ".5", date: httpDate(now), at: now.Add(time.Minute + 500*time.Millisecond)},
		{name: "EpochSecondsZero", form: providers.ResetEpochSeconds, raw: "0", date: httpDate(now), note: "not in the future"},
		{name: "EpochSecondsPast", form: providers.ResetEpochSeconds, raw: epoch(-time.Hour), date: httpDate(now), note: "not in the future"},
		{name: "EpochSecondsNow", form: providers.ResetEpochSeconds, raw: epoch(0), date: httpDate(now), note: "not in the future"},
		{name: "EpochSecondsAbsurd", form: providers.ResetEpochSeconds, raw: "99999999999", date: httpDate(now), at: now.Add(providers.MaxHintAhead), note: "clamped"},
		{name: "EpochSecondsHuge", form: providers.ResetEpochSeconds, raw: "999999999999999999", date: httpDate(now), at: now.Add(providers.MaxHintAhead), note: "clamped"},
		{name: "EpochSecondsOverflow", form: providers.ResetEpochSeconds, raw: "9999999999999999999999", date: httpDate(now), note: "overflows"},
		{name: "EpochSecondsNegative", form: providers.ResetEpochSeconds, raw: "-1", note: "negative"},
		{name: "EpochSecondsNaN", form: providers.ResetEpochSeconds, raw: "NaN", note: "NaN"},
		{name: "EpochSeconds1e400", form: providers.ResetEpochSeconds, raw: "1e400", note: "overflows"},
		{name: "EpochSecondsGarbage", form: providers.ResetEpochSeconds, raw: "tomorrow", note: "not a number"},
		{name: "EpochMillis", form: providers.ResetEpochMillis, raw: strconv.FormatInt(now.Add(90*time.Second).UnixMilli(), 10), date: httpDate(now), at: now.Add(90 * time.Second)},
		{name: "EpochMillisSkew", form: providers.ResetEpochMillis, raw: strconv.FormatInt((nowEpoch-600+300)*1000, 10), date: behindDate, at: now.Add(5 * time.Minute)},
		// providers.md §0: old IETF RateLimit-Reset, delta seconds.
		{name: "Delta", form: providers.ResetDeltaSeconds, raw: "30", at: now.Add(30 * time.Second)},
		{name: "DeltaIgnoresDate", form: providers.ResetDeltaSeconds, raw: "30", date: behindDate, at: now.Add(30 * time.Second)},
		{name: "DeltaZero", form: providers.ResetDeltaSeconds, raw: "0", note: "not in the future"},
		{name: "DeltaNegative", form: providers.ResetDeltaSeconds, raw: "-30", note: "negative"},
		{name: "DeltaAbsurd", form: providers.ResetDeltaSeconds, raw: "315360001", at: now.Add(providers.MaxHintAhead), note: "clamped"},
		// providers.md §0: for unknown providers >1e12 ms, >1e9 epoch s, else delta.
		{name: "AutoDelta", form: providers.ResetAuto, raw: "60", at: now.Add(time.Minute)},
		{name: "AutoEpochSeconds", form: providers.ResetAuto, raw: epoch(time.Minute), date: httpDate(now), at: now.Add(time.Minute)},
		{name: "AutoEpochMillis", form: providers.ResetAuto, raw: strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10), date: httpDate(now), at: now.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := providers.ParseReset(tt.form, "x-ratelimit-reset", tt.raw, tt.date, now)
			if got, want := h.Source, "x-ratelimit-reset"; got != want {
				t.Errorf("source: got %q, want %q", got, want)
			}
			checkHintAt(t, h, tt.at, tt.note)
			checkHint(t, h, now)
		})
	}
}

func TestChooseHint(t *testing.T) {
	ra := providers.Hint{Source: "retry-after", Raw: "10", At: now.Add(10 * time.Second)}
	badRA := providers.Hint{Source: "retry-after", Raw: "-1", Note: "ignored: negative"}
	reset := providers.Hint{Source: "x-ratelimit-reset", Raw: "1", At: now.Add(time.Minute)}
	draft := providers.Hint{Source: "ratelimit", Raw: "t=5", At: now.Add(5 * time.Second)}
	tests := []struct {
		name  string
		hints []providers.Hint
		want  providers.Hint
	}{
		// providers.md §0: Retry-After > provider reset > draft t > backoff.
		{name: "RetryAfterWins", hints: []providers.Hint{ra, reset, draft}, want: ra},
		{name: "ResetOverDraft", hints: []providers.Hint{{}, reset, draft}, want: reset},
		{name: "UnusableRetryAfterSkipped", hints: []providers.Hint{badRA, reset, draft}, want: reset},
		{name: "DraftLast", hints: []providers.Hint{badRA, {}, draft}, want: draft},
		{name: "NoneUsableKeepsFirstPresent", hints: []providers.Hint{{}, badRA}, want: badRA},
		{name: "NonePresent", hints: []providers.Hint{{}, {}}, want: providers.Hint{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := providers.ChooseHint(tt.hints...); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// checkHintAt checks that hint h names at, and that its note contains
// note (is empty when note is).
func checkHintAt(t *testing.T, h providers.Hint, at time.Time, note string) {
	t.Helper()
	if !h.At.Equal(at) {
		t.Errorf("at: got %v, want %v (note %q)", h.At, at, h.Note)
	}
	if note == "" && h.Note != "" {
		t.Errorf("note: got %q, want none", h.Note)
	}
	if !strings.Contains(h.Note, note) {
		t.Errorf("note: got %q, want it to contain %q", h.Note, note)
	}
}
