package providers

import (
	"net/http"
	"strings"
	"time"
)

// hinter is one source of a timing hint: a header read in a ResetForm, a
// body field, a computation, or a fixed default. A rule or table lists its
// hinters highest precedence first; ChooseHint takes the first usable.
type hinter interface {
	// source describes the hinter.
	source() HintSource
	// hint reads the hint from r; the zero Hint when the source is absent.
	hint(r *reading) Hint
}

// headerHint reads one header in a ResetForm, through ParseReset.
type headerHint struct {
	name string
	form ResetForm
	note string
}

// retryAfter is the standard Retry-After header (RFC 9110 §10.2.3).
func retryAfter() hinter { return headerHint{name: "Retry-After", form: ResetRetryAfter} }

// fromHeader reads header name written in form.
func fromHeader(name string, form ResetForm) hinter { return headerHint{name: name, form: form} }

func (h headerHint) source() HintSource {
	return HintSource{Source: strings.ToLower(h.name), Format: h.form.String(), Note: h.note}
}

func (h headerHint) hint(r *reading) Hint {
	v := r.h.Get(h.name)
	if v == "" {
		return Hint{}
	}
	return ParseReset(h.form, strings.ToLower(h.name), v, r.date, r.now)
}

// ietfHint is the t (reset) of the IETF RateLimit field called field, with
// policies in policy (providers.md §0); with old, else the old
// RateLimit-Reset (delta seconds).
type ietfHint struct {
	field, policy string
	old           bool
}

func (h ietfHint) source() HintSource {
	s := HintSource{Source: strings.ToLower(h.field), Format: "ietf-ratelimit t (delta-seconds)"}
	if h.old {
		s.Note = "else ratelimit-reset (delta-seconds)"
	}
	return s
}

func (h ietfHint) hint(r *reading) Hint {
	_, hint := readIETF(r.h, h.field, h.policy, h.old, r.now)
	if hint.Source == "ratelimit" { // the new form's, named after its field
		hint.Source = strings.ToLower(h.field)
	}
	return hint
}

// fixedHint always waits d: the provider's documented minimum, or our
// choice for a signal that names no time.
type fixedHint struct {
	name string
	wait time.Duration
	note string
}

func (h fixedHint) source() HintSource {
	return HintSource{Source: h.name, Format: "fixed " + formatDuration(h.wait), Note: h.note}
}

func (h fixedHint) hint(r *reading) Hint {
	return finish(Hint{Source: h.name, Note: h.note}, h.wait, r.now, h.note)
}

// whenHint consults h only when cond holds.
type whenHint struct {
	h    hinter
	cond func(r *reading) bool
	when string
}

func (w whenHint) source() HintSource {
	s := w.h.source()
	s.Note = joinNote(w.when, s.Note)
	return s
}

func (w whenHint) hint(r *reading) Hint {
	if !w.cond(r) {
		return Hint{}
	}
	return w.h.hint(r)
}

// funcHint is a hint computed from the response (a body field, a cost
// formula).
type funcHint struct {
	desc HintSource
	fn   func(r *reading) Hint
}

func (f funcHint) source() HintSource   { return f.desc }
func (f funcHint) hint(r *reading) Hint { return f.fn(r) }

// bodyTimeHint reads the first value at a body path in form.
func bodyTimeHint(path string, form ResetForm, note string) hinter {
	src := "body " + path
	return funcHint{
		desc: HintSource{Source: src, Format: form.String(), Note: note},
		fn: func(r *reading) Hint {
			v := r.fields().first(path)
			if v == "" {
				return Hint{}
			}
			return ParseReset(form, src, v, r.date, r.now)
		},
	}
}

// nextUTC is the first time after now whose UTC clock reads hour:00.
func nextUTC(now time.Time, hour int) time.Time {
	u := now.UTC()
	at := time.Date(u.Year(), u.Month(), u.Day(), hour, 0, 0, 0, time.UTC)
	if !at.After(u) {
		at = at.AddDate(0, 0, 1)
	}
	return at
}

// dailyHint waits for the next hour:00 UTC, for daily quotas that reset at
// a local midnight pacer cannot see.
func dailyHint(name string, hour int, note string) hinter {
	return funcHint{
		desc: HintSource{Source: name, Format: "next " + time.Date(0, 1, 1, hour, 0, 0, 0, time.UTC).Format("15:04") + " UTC", Note: note},
		fn: func(r *reading) Hint {
			at := nextUTC(r.now, hour)
			return finish(Hint{Source: name, Raw: at.Format(time.RFC3339)}, at.Sub(r.now), r.now, "")
		},
	}
}

// headerIs reports whether header name equals one of values, ignoring case
// and surrounding space.
func headerIs(h http.Header, name string, values ...string) bool {
	v := strings.TrimSpace(h.Get(name))
	for _, want := range values {
		if strings.EqualFold(v, want) {
			return true
		}
	}
	return false
}
