package providers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxHintAhead bounds how far ahead of Exchange.Now a hint may point. A
// provider value further out is clamped to it, with a Note; the scheduler
// clamps further with its own maximum. The bound keeps every parsed time far
// from overflow.
const MaxHintAhead = 10 * 365 * 24 * time.Hour

// maxRaw bounds Hint.Raw.
const maxRaw = 128

// maxWholeDigits is the longest integer part parsed; longer values overflow.
const maxWholeDigits = 18

// ResetForm says how a provider writes a time: a budget reset, a wait, a
// retry delay. Every header-borne time of every profile, built-in or
// declarative, is read by ParseReset in one of these forms. Its text form
// (String, MarshalText) is the name used in declarative profiles and in
// descriptions: "auto", "epoch-seconds", ….
type ResetForm int

const (
	// ResetAuto guesses the form for providers that do not document it
	// (providers.md §0): values above 1e12 are epoch milliseconds, above 1e9
	// epoch seconds, anything smaller delta seconds.
	ResetAuto ResetForm = iota
	// ResetEpochSeconds is a Unix time in seconds on the provider's clock
	// (GitHub x-ratelimit-reset).
	ResetEpochSeconds
	// ResetEpochMillis is a Unix time in milliseconds on the provider's clock.
	ResetEpochMillis
	// ResetDeltaSeconds is a number of seconds from the response (the old
	// IETF RateLimit-Reset, Zendesk ratelimit-reset).
	ResetDeltaSeconds
	// ResetDeltaMillis is a number of milliseconds from the response
	// (HubSpot X-HubSpot-RateLimit-Interval-Milliseconds).
	ResetDeltaMillis
	// ResetHTTPDate is an HTTP-date (RFC 9110 §5.6.7, all three forms) on
	// the provider's clock.
	ResetHTTPDate
	// ResetRetryAfter is RFC 9110 Retry-After: delay-seconds or an
	// HTTP-date.
	ResetRetryAfter
	// ResetISO8601 is an ISO 8601 / RFC 3339 time on the provider's clock;
	// minute precision (Jira's `2006-01-02T15:04Z`) is accepted and taken
	// as the end of that minute, so the wait is never short.
	ResetISO8601
	// ResetDuration is a duration string: protobuf JSON seconds ("30s",
	// "1.5s", Google RetryInfo.retryDelay) or a Go duration ("1m30s").
	ResetDuration

	resetForms // the number of forms
)

// resetFormNames are the forms' names, by form.
func resetFormNames() [resetForms]string {
	return [resetForms]string{
		ResetAuto:         "auto",
		ResetEpochSeconds: "epoch-seconds",
		ResetEpochMillis:  "epoch-millis",
		ResetDeltaSeconds: "delta-seconds",
		ResetDeltaMillis:  "delta-millis",
		ResetHTTPDate:     "http-date",
		ResetRetryAfter:   "retry-after",
		ResetISO8601:      "iso8601",
		ResetDuration:     "duration",
	}
}

// String is the form's name, e.g. "epoch-seconds".
func (f ResetForm) String() string {
	if f < 0 || f >= resetForms {
		return "ResetForm(" + strconv.Itoa(int(f)) + ")"
	}
	return resetFormNames()[f]
}

// MarshalText implements encoding.TextMarshaler with the form's name.
func (f ResetForm) MarshalText() ([]byte, error) {
	if f < 0 || f >= resetForms {
		return nil, fmt.Errorf("marshal time form: unknown form %d", int(f))
	}
	return []byte(f.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; the error lists the
// known names.
func (f *ResetForm) UnmarshalText(b []byte) error {
	v, ok := ParseResetForm(string(b))
	if !ok {
		return fmt.Errorf("unmarshal time form: %q is not one of %s", b, strings.Join(ResetFormNames(), ", "))
	}
	*f = v
	return nil
}

// ParseResetForm returns the form called name; ok is false for an unknown
// name.
func ParseResetForm(name string) (ResetForm, bool) {
	for i, n := range resetFormNames() {
		if n == name {
			return ResetForm(i), true
		}
	}
	return 0, false
}

// ResetFormNames lists the names of every form.
func ResetFormNames() []string {
	names := resetFormNames()
	return names[:]
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3) that arrived
// at now. date is the response's Date header ("" when absent). It is
// ParseReset with ResetRetryAfter and Source "retry-after".
//
// delay-seconds are digits; decimals such as "2.0" are accepted leniently.
// An HTTP-date (IMF-fixdate, RFC 850 or asctime) is converted through date
// when it parses, At = now + (value − date), so a skewed provider clock does
// not shift the result; without date the value is taken as is. Empty,
// negative, non-numeric, NaN, infinite, overflowing, zero and past values
// give an unusable Hint whose Note says why; values beyond MaxHintAhead are
// clamped to it.
func ParseRetryAfter(raw, date string, now time.Time) Hint {
	return ParseReset(ResetRetryAfter, "retry-after", raw, date, now)
}

// ParseReset reads a time written in form that arrived at now, and names
// the Hint after source (a lower-case header name or a body field). date is
// the response's Date header ("" when absent): an absolute value (epoch,
// HTTP-date, ISO 8601) is converted through it, At = now + (value − date),
// so provider clock skew does not shift the result; without a Date header
// the provider's clock is taken as ours. Delta forms are relative to now.
// Empty, negative, non-numeric, NaN, infinite, overflowing, zero and past
// values give a Hint with zero At and a Note saying why; values beyond
// MaxHintAhead are clamped to it. This is the one parser of every time
// pacer reads from a provider.
func ParseReset(form ResetForm, source, raw, date string, now time.Time) Hint {
	h := Hint{Source: source, Raw: Cut(raw, maxRaw)}
	switch form {
	case ResetHTTPDate:
		return parseHTTPDate(h, raw, date, now, "ignored: not an HTTP-date")
	case ResetISO8601:
		return parseISO8601(h, raw, date, now)
	case ResetDuration:
		return parseDurationString(h, raw, now)
	}
	n, note := parseNumber(raw)
	if note != "" {
		if form == ResetRetryAfter {
			if note == noteNotNumber {
				note = "ignored: neither delay-seconds nor an HTTP-date"
			}
			return parseHTTPDate(h, raw, date, now, note)
		}
		h.Note = note
		return h
	}
	if form == ResetAuto {
		switch {
		case n.whole > 1e12:
			form = ResetEpochMillis
		case n.whole > 1e9:
			form = ResetEpochSeconds
		default:
			form = ResetDeltaSeconds
		}
	}
	switch form {
	case ResetEpochSeconds:
		delta, skew := sinceProvider(time.Unix(n.whole, n.nanos), date, now)
		return finish(h, delta, now, skew)
	case ResetEpochMillis:
		at := time.UnixMilli(n.whole).Add(time.Duration(n.nanos / 1000))
		delta, skew := sinceProvider(at, date, now)
		return finish(h, delta, now, skew)
	case ResetDeltaMillis:
		return finish(h, n.duration(time.Millisecond), now, "")
	case ResetDeltaSeconds, ResetRetryAfter:
		return finish(h, n.duration(time.Second), now, "")
	}
	h.Note = "ignored: unknown time form " + form.String()
	return h
}

// parseHTTPDate reads an HTTP-date into h; notDate is the Note when raw is
// not one.
func parseHTTPDate(h Hint, raw, date string, now time.Time, notDate string) Hint {
	at, err := http.ParseTime(strings.TrimSpace(raw))
	if err != nil {
		h.Note = notDate
		if strings.TrimSpace(raw) == "" {
			h.Note = "ignored: empty"
		}
		return h
	}
	delta, skew := sinceProvider(at, date, now)
	return finish(h, delta, now, skew)
}

// iso8601Layout is an ISO 8601 form accepted, with whether it has only
// minute precision.
type iso8601Layout struct {
	layout string
	minute bool
}

func iso8601Layouts() []iso8601Layout {
	return []iso8601Layout{
		{time.RFC3339Nano, false},
		{"2006-01-02T15:04:05Z0700", false},
		{"2006-01-02T15:04Z07:00", true},
		{"2006-01-02T15:04Z0700", true},
	}
}

// parseISO8601 reads an ISO 8601 time into h. A minute-precision value
// (Jira X-RateLimit-Reset, providers.md §9) stands for any time in that
// minute, so the end of the minute is taken.
func parseISO8601(h Hint, raw, date string, now time.Time) Hint {
	s := strings.TrimSpace(raw)
	if s == "" {
		h.Note = "ignored: empty"
		return h
	}
	for _, l := range iso8601Layouts() {
		at, err := time.Parse(l.layout, s)
		if err != nil {
			continue
		}
		var note string
		if l.minute {
			at = at.Add(time.Minute)
			note = "minute precision: end of the minute taken"
		}
		delta, skew := sinceProvider(at, date, now)
		return finish(h, delta, now, joinNote(skew, note))
	}
	h.Note = "ignored: not an ISO 8601 time"
	return h
}

// parseDurationString reads a protobuf JSON duration ("1.5s") or a Go
// duration ("1m30s") into h.
func parseDurationString(h Hint, raw string, now time.Time) Hint {
	s := strings.TrimSpace(raw)
	if secs, ok := strings.CutSuffix(s, "s"); ok {
		if n, note := parseNumber(secs); note == "" {
			return finish(h, n.duration(time.Second), now, "")
		} else if note != noteNotNumber && note != "ignored: not a plain decimal number" {
			h.Note = note
			return h
		}
	}
	if s == "" {
		h.Note = "ignored: empty"
		return h
	}
	if strings.HasPrefix(s, "-") {
		h.Note = "ignored: negative"
		return h
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		h.Note = "ignored: not a duration"
		if strings.Contains(err.Error(), "overflow") {
			h.Note = "ignored: overflows"
		}
		return h
	}
	return finish(h, d, now, "")
}

// ChooseHint applies precedence: it returns the first usable hint of hints,
// which the caller lists highest precedence first (Retry-After, then the
// provider's reset, then the IETF draft's t). When none is usable it returns
// the first one present (non-empty Source), so its Note survives; with none
// present, the zero Hint.
func ChooseHint(hints ...Hint) Hint {
	for _, h := range hints {
		if h.Usable() {
			return h
		}
	}
	for _, h := range hints {
		if h.Source != "" {
			return h
		}
	}
	return Hint{}
}

// retryAfterHint reads the Retry-After header of h; the zero Hint when the
// header is absent.
func retryAfterHint(h http.Header, now time.Time) Hint {
	v := h.Get("Retry-After")
	if v == "" {
		return Hint{}
	}
	return ParseRetryAfter(v, h.Get("Date"), now)
}

// sinceProvider is how far at lies ahead of the response's Date on the
// provider's clock; without a usable Date header, how far it lies ahead of
// now. The note is set when a Date header was present but unparseable.
func sinceProvider(at time.Time, date string, now time.Time) (time.Duration, string) {
	if date = strings.TrimSpace(date); date != "" {
		if d, err := http.ParseTime(date); err == nil {
			return at.Sub(d), ""
		}
		return at.Sub(now), "Date header unparseable, provider clock taken as ours"
	}
	return at.Sub(now), ""
}

// finish turns a wait into h.At: a wait that is not positive leaves h
// unusable, one beyond MaxHintAhead is clamped. note carries an earlier
// adjustment.
func finish(h Hint, wait time.Duration, now time.Time, note string) Hint {
	if wait <= 0 {
		h.Note = joinNote(note, "ignored: not in the future")
		return h
	}
	if wait > MaxHintAhead {
		wait = MaxHintAhead
		note = joinNote(note, "clamped: more than 10 years ahead")
	}
	h.At = now.Add(wait)
	h.Note = note
	return h
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// number is a non-negative decimal number: whole units plus nanos
// billionths of a unit.
type number struct {
	whole int64
	nanos int64
}

// duration is n units long, saturated just past MaxHintAhead so that
// finish clamps it.
func (n number) duration(unit time.Duration) time.Duration {
	limit := int64(MaxHintAhead/unit) + 1
	if n.whole >= limit {
		return time.Duration(limit) * unit
	}
	return time.Duration(n.whole)*unit + time.Duration(n.nanos)*unit/time.Second
}

const noteNotNumber = "ignored: not a number"

// parseNumber reads a non-negative decimal number (digits with at most one
// '.'), surrounded by optional white space. The note says why raw is not
// one; it is empty on success.
func parseNumber(raw string) (number, string) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return number{}, "ignored: empty"
	}
	body := strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(body, ".")
	if !allDigits(whole) || !allDigits(frac) || whole+frac == "" {
		return number{}, nonNumberNote(s)
	}
	if len(body) != len(s) {
		return number{}, "ignored: negative"
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > maxWholeDigits {
		return number{}, "ignored: overflows"
	}
	var n number
	if whole != "" {
		v, err := strconv.ParseInt(whole, 10, 64)
		if err != nil {
			return number{}, "ignored: overflows"
		}
		n.whole = v
	}
	if len(frac) > 9 {
		frac = frac[:9]
	}
	if frac != "" {
		v, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		n.nanos = v
	}
	return n, ""
}

// nonNumberNote says what kind of non-number s is.
func nonNumberNote(s string) string {
	l := strings.ToLower(s)
	switch {
	case strings.Contains(l, "nan"):
		return "ignored: NaN"
	case strings.Contains(l, "inf"):
		return "ignored: infinite"
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return "ignored: overflows"
	case err != nil:
		return noteNotNumber
	case f < 0:
		return "ignored: negative"
	}
	return "ignored: not a plain decimal number"
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Cut shortens s to at most n bytes without splitting a UTF-8 sequence
// (bytes that are not UTF-8 are cut at the byte bound). It is the one rule
// for bounding provider text, used by the profiles and the redactor.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	c := n
	for c > 0 && n-c < 3 && s[c]&0xC0 == 0x80 {
		c--
	}
	if s[c]&0xC0 == 0x80 { // not UTF-8 anyway: cut at the byte bound
		c = n
	}
	return s[:c]
}
