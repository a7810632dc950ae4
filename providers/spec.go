package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Spec is a declarative profile: a provider pacer does not know, described
// without writing Go. A scope with provider "custom" carries one as its
// "profile". Everything left out follows the generic profile's rules
// (providers.md §0): the standard status classes, Retry-After, the IETF
// RateLimit fields and X-RateLimit-* headers. NewDeclarative builds it
// into a profile that reads every value through the same parsers and rules
// as the built-in profiles. Its JSON form is part of the API:
//
//	{"statuses": {"420": "rateLimited", "5xx": "unknownOutcome"},
//	 "retryAfter": {"header": "X-Wait-Ms", "format": "delta-millis"},
//	 "budget": {"remaining": "X-Quota-Left", "limit": "X-Quota",
//	            "reset": {"header": "X-Quota-Reset", "format": "epoch-seconds"}},
//	 "bodyCode": {"pointer": "/error/code", "classes": {"SLOW_DOWN": "rateLimited"}},
//	 "idempotency": {"header": "Idempotency-Key", "retention": "24h", "methods": ["POST"]},
//	 "sharedLimits": false, "maxConcurrent": 4}
type Spec struct {
	// Statuses maps a status code ("420") or a range of 3xx-5xx ("5xx") to
	// the class it means; a code wins over its range. Unlisted statuses
	// follow the standard rules. 2xx is always success (declare errors in
	// 2xx bodies with BodyCode), and "success" is not a class a status can
	// be given. "unknownOutcome" means so for a mutation; a read is
	// transient.
	Statuses map[string]Class `json:"statuses,omitempty"`
	// BodyCode classifies responses of any status by an error code in a JSON
	// body; it is tried before Statuses.
	BodyCode *BodyCodeSpec `json:"bodyCode,omitempty"`
	// RetryAfter names a header that says how long to wait, tried before
	// the standard Retry-After.
	RetryAfter *TimeHeader `json:"retryAfter,omitempty"`
	// Budget names the headers of the budget figures, read before the
	// standard ones (the most constrained figures win).
	Budget *BudgetSpec `json:"budget,omitempty"`
	// Idempotency says the provider honours idempotency keys; nil when it
	// honours none (uncertain mutations are then held for a person).
	Idempotency *IdempotencySpec `json:"idempotency,omitempty"`
	// SharedLimits says the provider's rate limits are shared by every scope
	// of the group (an app-wide quota): a rate limit pauses them all.
	SharedLimits bool `json:"sharedLimits,omitempty"`
	// MaxConcurrent is the default bound on requests in flight for scopes
	// that set none; 0 for the generic default.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
}

// TimeHeader names a header carrying a time and the form it is written in:
// a ResetForm name ("delta-seconds", "delta-millis", "epoch-seconds",
// "epoch-millis", "http-date", "retry-after", "iso8601", "duration",
// "auto").
type TimeHeader struct {
	Header string `json:"header"`
	Format string `json:"format"`
}

// BudgetSpec names the headers of a provider's budget figures.
type BudgetSpec struct {
	// Remaining names the header with the requests left in the window;
	// required unless only Reset is given.
	Remaining string `json:"remaining,omitempty"`
	// Limit names the header with the window's size.
	Limit string `json:"limit,omitempty"`
	// Reset names the header with the time the window refills; it is also
	// a rate limit's wait after RetryAfter and Retry-After.
	Reset *TimeHeader `json:"reset,omitempty"`
}

// BodyCodeSpec maps an error code found in a JSON body to a class.
type BodyCodeSpec struct {
	// Pointer is the RFC 6901 JSON pointer of the code ("/error/code",
	// "/errors/0/code"); a string, number or boolean there is the code.
	Pointer string `json:"pointer"`
	// Classes maps codes to classes; other codes follow the status.
	Classes map[string]Class `json:"classes"`
}

// IdempotencySpec describes a provider's idempotency keys.
type IdempotencySpec struct {
	// Header is the request header carrying the key (the operation's
	// requestIdentity).
	Header string `json:"header"`
	// Retention is how long the provider keeps a key, a Go duration such
	// as "24h"; an uncertain mutation is resent with its key only inside it.
	Retention string `json:"retention"`
	// Methods lists the methods that honour the key; empty means every
	// mutation (POST, PUT, PATCH, DELETE).
	Methods []string `json:"methods,omitempty"`
}

// FieldError names one invalid field of a Spec, as a JSON path relative to
// the Spec ("statuses.420", "budget.reset.format").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// SpecError lists every invalid field of a Spec.
type SpecError struct {
	Fields []FieldError
}

// Error implements error.
func (e *SpecError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid profile spec: " + strings.Join(parts, "; ")
}

func (e *SpecError) add(field, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Bounds of a Spec, so a stored one stays small.
const (
	maxSpecStatuses  = 100
	maxSpecCodes     = 200
	maxSpecCodeLen   = 128
	maxSpecPointer   = 256
	maxSpecHeaderLen = 64
	// MaxSpecRetention bounds IdempotencySpec.Retention.
	MaxSpecRetention = 90 * 24 * time.Hour
)

var specHeaderPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Validate checks every field and returns a *SpecError listing all that are
// invalid, in a stable order, or nil.
func (s Spec) Validate() error {
	e := &SpecError{}
	if len(s.Statuses) > maxSpecStatuses {
		e.add("statuses", "has %d entries; at most %d", len(s.Statuses), maxSpecStatuses)
	}
	for _, key := range sortedKeys(s.Statuses) {
		validateSpecStatus(e, key, s.Statuses[key])
	}
	if b := s.BodyCode; b != nil {
		switch {
		case b.Pointer == "":
			e.add("bodyCode.pointer", `is required: an RFC 6901 JSON pointer such as "/error/code"`)
		case len(b.Pointer) > maxSpecPointer || !validPointer(b.Pointer):
			e.add("bodyCode.pointer", `must be an RFC 6901 JSON pointer of at most %d bytes starting with '/', with '~' only as ~0 or ~1, such as "/error/code"`, maxSpecPointer)
		}
		switch {
		case len(b.Classes) == 0:
			e.add("bodyCode.classes", `needs at least one code, such as {"RATE_LIMITED": "rateLimited"}`)
		case len(b.Classes) > maxSpecCodes:
			e.add("bodyCode.classes", "has %d codes; at most %d", len(b.Classes), maxSpecCodes)
		}
		for _, code := range sortedKeys(b.Classes) {
			if code == "" || len(code) > maxSpecCodeLen {
				e.add("bodyCode.classes", "codes must be 1-%d bytes", maxSpecCodeLen)
				continue
			}
			validateSpecClass(e, "bodyCode.classes."+code, b.Classes[code])
		}
	}
	if s.RetryAfter != nil {
		validateTimeHeader(e, "retryAfter", *s.RetryAfter)
	}
	if b := s.Budget; b != nil {
		if b.Remaining == "" && b.Reset == nil {
			e.add("budget", "needs remaining, reset or both")
		}
		if b.Remaining != "" {
			validateHeaderName(e, "budget.remaining", b.Remaining, false)
		}
		if b.Limit != "" {
			validateHeaderName(e, "budget.limit", b.Limit, false)
			if b.Remaining == "" {
				e.add("budget.limit", "needs budget.remaining: a limit alone says nothing about what is left")
			}
		}
		if b.Reset != nil {
			validateTimeHeader(e, "budget.reset", *b.Reset)
		}
	}
	if i := s.Idempotency; i != nil {
		validateHeaderName(e, "idempotency.header", i.Header, true)
		if d, err := time.ParseDuration(i.Retention); err != nil || d < time.Minute || d > MaxSpecRetention {
			e.add("idempotency.retention", `is required: how long the provider keeps a key, a duration between 1m and %s such as "24h"`, formatDuration(MaxSpecRetention))
		}
		seen := map[string]bool{}
		for n, m := range i.Methods {
			switch m {
			case "POST", "PUT", "PATCH", "DELETE":
				if seen[m] {
					e.add("idempotency.methods["+strconv.Itoa(n)+"]", "%s is listed twice", m)
				}
				seen[m] = true
			default:
				e.add("idempotency.methods["+strconv.Itoa(n)+"]", "must be POST, PUT, PATCH or DELETE (in upper case)")
			}
		}
	}
	if s.MaxConcurrent < 0 || s.MaxConcurrent > 1000 {
		e.add("maxConcurrent", "must be between 0 (the generic default) and 1000")
	}
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

func validateSpecStatus(e *SpecError, key string, c Class) {
	field := "statuses." + key
	set, err := parseStatusPattern(key)
	switch {
	case err != nil || strings.Contains(key, ",") || set.any || set.other:
		e.add(field, `must be a status code between 300 and 599 ("420") or a range "3xx", "4xx" or "5xx"`)
		return
	case len(set.ranges) == 1 && set.ranges[0] < 3, len(set.codes) == 1 && set.codes[0] < 300:
		e.add(field, "1xx and 2xx are not classified by status: a 2xx is success (declare errors in 2xx bodies with bodyCode)")
		return
	}
	validateSpecClass(e, field, c)
}

// declarableClasses are the classes a Spec may give a status or a code.
func declarableClasses() []Class {
	return []Class{ClassRateLimited, ClassTransient, ClassPermanent, ClassAuthRevoked, ClassUnknownOutcome}
}

func validateSpecClass(e *SpecError, field string, c Class) {
	classes := declarableClasses()
	for _, ok := range classes {
		if c == ok {
			return
		}
	}
	names := make([]string, len(classes))
	for i, d := range classes {
		names[i] = string(d)
	}
	e.add(field, "must be one of %s, not %q", strings.Join(names, ", "), c)
}

func validateTimeHeader(e *SpecError, field string, th TimeHeader) {
	validateHeaderName(e, field+".header", th.Header, false)
	if _, ok := ParseResetForm(th.Format); !ok {
		e.add(field+".format", "must be one of %s", strings.Join(ResetFormNames(), ", "))
	}
}

// reservedHeaders may not carry an idempotency key: pacer or the
// transport set them, or they carry credentials.
func reservedHeaders() []string {
	return []string{
		"Authorization", "Proxy-Authorization", "Cookie", "Host", "Content-Length",
		"Content-Type", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade",
		"Keep-Alive", "Proxy-Connection", "User-Agent", "Expect",
	}
}

func validateHeaderName(e *SpecError, field, name string, request bool) {
	switch {
	case name == "":
		e.add(field, "is required: a header name")
	case len(name) > maxSpecHeaderLen || !specHeaderPattern.MatchString(name):
		e.add(field, "must be a header name of at most %d characters (letters, digits, '-' …)", maxSpecHeaderLen)
	case request:
		for _, r := range reservedHeaders() {
			if strings.EqualFold(r, name) {
				e.add(field, "%s is reserved: pacer or the transport sets it, or it carries credentials", r)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Key identifies the spec's content: equal specs have equal keys. A nil
// spec's key is empty. Engines cache profiles by it.
func (s *Spec) Key() string {
	if s == nil {
		return ""
	}
	b, err := json.Marshal(s) // map keys are sorted: the encoding is canonical
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
