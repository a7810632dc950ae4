package providers

import (
	"errors"
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

// ResetForm says how a provider writes the time its budget refills.
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
)

// ParseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3) that arrived
// at now. date is the response's Date header ("" when absent).
//
// delay-seconds are digits; decimals such as "2.0" are accepted leniently.
// An HTTP-date (IMF-fixdate, RFC 850 or asctime) is converted through date
// when it parses, At = now + (value − date), so a skewed provider clock does
// not shift the result; without date the value is taken as is. Empty,
// negative, non-numeric, NaN, infinite, overflowing, zero and past values
// give an unusable Hint whose Note says why; values beyond MaxHintAhead are
// clamped to it.
func ParseRetryAfter(raw, date string, now time.Time) Hint {
	h := Hint{Source: "retry-after", Raw: cut(raw, maxRaw)}
	n, note := parseNumber(raw)
	if note == "" {
		return finish(h, n.duration(time.Second), now, "")
	}
	at, err := http.ParseTime(strings.TrimSpace(raw))
	if err != nil {
		if note == noteNotNumber {
			note = "ignored: neither delay-seconds nor an HTTP-date"
		}
		h.Note = note
		return h
	}
	delta, skew := sinceProvider(at, date, now)
	return finish(h, delta, now, skew)
}

// ParseReset reads a budget reset value written in form that arrived at
// now, and names the Hint after source (a lower-case header name). date is
// the response's Date header ("" when absent): an epoch value is converted
// through it, At = now + (value − date), so provider clock skew does not
// shift the result. Unusable values give a Hint with zero At and a Note,
// as for ParseRetryAfter.
func ParseReset(form ResetForm, source, raw, date string, now time.Time) Hint {
	h := Hint{Source: source, Raw: cut(raw, maxRaw)}
	n, note := parseNumber(raw)
	if note != "" {
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
	default:
		return finish(h, n.duration(time.Second), now, "")
	}
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

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
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
