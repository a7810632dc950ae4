// Package stored holds the formats of the rows pacer's stores write,
// shared by every store (SQLite's db, PostgreSQL's pgstore), so that a rule
// of a stored format is written once: the JSON of the columns that hold
// headers, outcomes, results, hints and profiles, and the sealing of scope
// credentials at rest (AES-256-GCM).
package stored

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// The stored formats of the JSON columns. Each column's JSON is written
// from, and read into, a type of this file whose tags are the keys stored:
// the domain types (scheduler's, providers') may rename their fields and
// their own JSON tags (the API's and the profiles' formats) without
// changing a stored row, as the conversions below name every field once.
// db/formats_test.go keeps rows as written today and checks they still read
// into the same values and are still written the same way.
//
//	operations.headers        storedHeaders
//	operations.last_outcome   storedOutcome
//	operations.result         storedResult
//	operations.last_response  storedResult
//	attempts.hint             storedHint
//	attempts.response         storedResult
//	scopes.profile_spec       storedSpec
//	scopes.credentials        storedCredentials, sealed (seal.go)
//	scope_tokens.sealed       storedToken, sealed (token.go)

// storedHeaders is operations.headers: an operation's extra request
// headers, by name.
type storedHeaders map[string]string

// EncodeHeaders writes an operation's request headers; NULL for none.
func EncodeHeaders(h map[string]string) (sql.NullString, error) {
	if len(h) == 0 {
		return sql.NullString{}, nil
	}
	return encodeJSON(storedHeaders(h))
}

// DecodeHeaders reads what EncodeHeaders wrote; nil for NULL.
func DecodeHeaders(v sql.NullString) (map[string]string, error) {
	if !v.Valid {
		return nil, nil
	}
	var h storedHeaders
	if err := json.Unmarshal([]byte(v.String), &h); err != nil {
		return nil, err
	}
	return h, nil
}

// storedOutcome is operations.last_outcome: scheduler.OutcomeSummary
// without its Response (operations.last_response keeps that).
type storedOutcome struct {
	Class  string      `json:"class"`
	Status int         `json:"status,omitempty"`
	At     time.Time   `json:"at"`
	Hint   *storedHint `json:"hint,omitempty"`
	Reason string      `json:"reason,omitempty"`
	Detail string      `json:"detail,omitempty"`
}

// EncodeOutcome writes an operation's last outcome (its Response apart).
func EncodeOutcome(o scheduler.OutcomeSummary) (string, error) {
	v, err := encodeJSON(storedOutcome{
		Class: string(o.Class), Status: o.Status, At: o.At, Hint: toStoredHint(o.Hint),
		Reason: o.Reason, Detail: o.Detail,
	})
	return v.String, err
}

// DecodeOutcome reads what EncodeOutcome wrote; nil for NULL.
func DecodeOutcome(v sql.NullString) (*scheduler.OutcomeSummary, error) {
	if !v.Valid {
		return nil, nil
	}
	var s storedOutcome
	if err := json.Unmarshal([]byte(v.String), &s); err != nil {
		return nil, err
	}
	return &scheduler.OutcomeSummary{
		Class: providers.Class(s.Class), Status: s.Status, At: s.At, Hint: s.Hint.hint(),
		Reason: s.Reason, Detail: s.Detail,
	}, nil
}

// storedHint is attempts.hint and storedOutcome's hint: providers.Hint.
type storedHint struct {
	Source string    `json:"source,omitempty"`
	Raw    string    `json:"raw,omitempty"`
	At     time.Time `json:"at,omitzero"`
	Note   string    `json:"note,omitempty"`
}

// toStoredHint is h as stored; nil for nil.
func toStoredHint(h *providers.Hint) *storedHint {
	if h == nil {
		return nil
	}
	return &storedHint{Source: h.Source, Raw: h.Raw, At: h.At, Note: h.Note}
}

// hint is the stored hint as a providers.Hint; nil for nil.
func (s *storedHint) hint() *providers.Hint {
	if s == nil {
		return nil
	}
	return &providers.Hint{Source: s.Source, Raw: s.Raw, At: s.At, Note: s.Note}
}

// EncodeHint writes an attempt's hint; NULL for nil.
func EncodeHint(h *providers.Hint) (sql.NullString, error) {
	if h == nil {
		return sql.NullString{}, nil
	}
	return encodeJSON(toStoredHint(h))
}

// DecodeHint reads what EncodeHint wrote; nil for NULL.
func DecodeHint(v sql.NullString) (*providers.Hint, error) {
	if !v.Valid {
		return nil, nil
	}
	var s storedHint
	if err := json.Unmarshal([]byte(v.String), &s); err != nil {
		return nil, err
	}
	return s.hint(), nil
}

// storedResult is operations.result, operations.last_response and
// attempts.response: a scheduler.Result. Headers is written even when nil
// (as null).
type storedResult struct {
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      []byte            `json:"body,omitempty"`
	Truncated bool              `json:"truncated,omitempty"`
}

// EncodeResult writes a provider's answer; NULL for nil.
func EncodeResult(r *scheduler.Result) (sql.NullString, error) {
	if r == nil {
		return sql.NullString{}, nil
	}
	return encodeJSON(storedResult{Status: r.Status, Headers: r.Headers, Body: r.Body, Truncated: r.Truncated})
}

// DecodeResult reads what EncodeResult wrote; nil for NULL.
func DecodeResult(v sql.NullString) (*scheduler.Result, error) {
	if !v.Valid {
		return nil, nil
	}
	var s storedResult
	if err := json.Unmarshal([]byte(v.String), &s); err != nil {
		return nil, err
	}
	return &scheduler.Result{Status: s.Status, Headers: s.Headers, Body: s.Body, Truncated: s.Truncated}, nil
}

// storedSpec is scopes.profile_spec: a custom scope's declarative profile
// (providers.Spec), with its parts below.
type storedSpec struct {
	Statuses      map[string]string     `json:"statuses,omitempty"`
	BodyCode      *storedBodyCode       `json:"bodyCode,omitempty"`
	RetryAfter    *storedTimeHeader     `json:"retryAfter,omitempty"`
	Budget        *storedBudgetHeaders  `json:"budget,omitempty"`
	Idempotency   *storedIdempotencyKey `json:"idempotency,omitempty"`
	SharedLimits  bool                  `json:"sharedLimits,omitempty"`
	MaxConcurrent int                   `json:"maxConcurrent,omitempty"`
}

// storedBodyCode is providers.BodyCodeSpec.
type storedBodyCode struct {
	Pointer string            `json:"pointer"`
	Classes map[string]string `json:"classes"`
}

// storedTimeHeader is providers.TimeHeader.
type storedTimeHeader struct {
	Header string `json:"header"`
	Format string `json:"format"`
}

// storedBudgetHeaders is providers.BudgetSpec.
type storedBudgetHeaders struct {
	Remaining string            `json:"remaining,omitempty"`
	Limit     string            `json:"limit,omitempty"`
	Reset     *storedTimeHeader `json:"reset,omitempty"`
}

// storedIdempotencyKey is providers.IdempotencySpec.
type storedIdempotencyKey struct {
	Header    string   `json:"header"`
	Retention string   `json:"retention"`
	Methods   []string `json:"methods,omitempty"`
}

// EncodeProfileSpec writes a custom scope's declarative profile; NULL for
// a scope without one.
func EncodeProfileSpec(spec *providers.Spec) (sql.NullString, error) {
	if spec == nil {
		return sql.NullString{}, nil
	}
	s := storedSpec{
		Statuses: fromClasses(spec.Statuses), RetryAfter: toStoredTimeHeader(spec.RetryAfter),
		SharedLimits: spec.SharedLimits, MaxConcurrent: spec.MaxConcurrent,
	}
	if b := spec.BodyCode; b != nil {
		s.BodyCode = &storedBodyCode{Pointer: b.Pointer, Classes: fromClasses(b.Classes)}
	}
	if b := spec.Budget; b != nil {
		s.Budget = &storedBudgetHeaders{Remaining: b.Remaining, Limit: b.Limit, Reset: toStoredTimeHeader(b.Reset)}
	}
	if i := spec.Idempotency; i != nil {
		s.Idempotency = &storedIdempotencyKey{Header: i.Header, Retention: i.Retention, Methods: i.Methods}
	}
	v, err := encodeJSON(s)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("encode profile spec: %w", err)
	}
	return v, nil
}

// DecodeProfileSpec reads what EncodeProfileSpec wrote; nil for NULL.
func DecodeProfileSpec(v sql.NullString) (*providers.Spec, error) {
	if !v.Valid {
		return nil, nil
	}
	var s storedSpec
	if err := json.Unmarshal([]byte(v.String), &s); err != nil {
		return nil, fmt.Errorf("decode profile spec: %w", err)
	}
	spec := &providers.Spec{
		Statuses: toClasses(s.Statuses), RetryAfter: s.RetryAfter.timeHeader(),
		SharedLimits: s.SharedLimits, MaxConcurrent: s.MaxConcurrent,
	}
	if b := s.BodyCode; b != nil {
		spec.BodyCode = &providers.BodyCodeSpec{Pointer: b.Pointer, Classes: toClasses(b.Classes)}
	}
	if b := s.Budget; b != nil {
		spec.Budget = &providers.BudgetSpec{Remaining: b.Remaining, Limit: b.Limit, Reset: b.Reset.timeHeader()}
	}
	if i := s.Idempotency; i != nil {
		spec.Idempotency = &providers.IdempotencySpec{Header: i.Header, Retention: i.Retention, Methods: i.Methods}
	}
	return spec, nil
}

// toStoredTimeHeader is h as stored; nil for nil.
func toStoredTimeHeader(h *providers.TimeHeader) *storedTimeHeader {
	if h == nil {
		return nil
	}
	return &storedTimeHeader{Header: h.Header, Format: h.Format}
}

// timeHeader is the stored time header as a providers.TimeHeader; nil for
// nil.
func (s *storedTimeHeader) timeHeader() *providers.TimeHeader {
	if s == nil {
		return nil
	}
	return &providers.TimeHeader{Header: s.Header, Format: s.Format}
}

// fromClasses is a map of classes as stored; nil for nil.
func fromClasses(m map[string]providers.Class) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, c := range m {
		out[k] = string(c)
	}
	return out
}

// toClasses reads what fromClasses wrote.
func toClasses(m map[string]string) map[string]providers.Class {
	if m == nil {
		return nil
	}
	out := make(map[string]providers.Class, len(m))
	for k, c := range m {
		out[k] = providers.Class(c)
	}
	return out
}

// storedCredentials is the plaintext of scopes.credentials, which
// sealCredentials encrypts: scheduler.Credentials.
type storedCredentials struct {
	Type     string `json:"type,omitempty"`
	Token    string `json:"token,omitempty"`
	Name     string `json:"name,omitempty"`
	Value    string `json:"value,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	TokenURL       string `json:"tokenURL,omitempty"`
	ClientID       string `json:"clientID,omitempty"`
	ClientSecret   string `json:"clientSecret,omitempty"`
	RefreshToken   string `json:"refreshToken,omitempty"`
	Scopes         string `json:"scopes,omitempty"`
	AuthStyle      string `json:"authStyle,omitempty"`
	AppID          int64  `json:"appID,omitempty"`
	InstallationID int64  `json:"installationID,omitempty"`
	PrivateKey     string `json:"privateKey,omitempty"`
}

// encodeCredentials is the plaintext that sealCredentials seals.
func encodeCredentials(c scheduler.Credentials) ([]byte, error) {
	return json.Marshal(storedCredentials{
		Type: string(c.Type), Token: c.Token, Name: c.Name, Value: c.Value, Username: c.Username, Password: c.Password,
		TokenURL: c.TokenURL, ClientID: c.ClientID, ClientSecret: c.ClientSecret, RefreshToken: c.RefreshToken,
		Scopes: c.Scopes, AuthStyle: c.AuthStyle, AppID: c.AppID, InstallationID: c.InstallationID, PrivateKey: c.PrivateKey,
	})
}

// decodeCredentials reads what encodeCredentials wrote.
func decodeCredentials(plain []byte) (scheduler.Credentials, error) {
	var s storedCredentials
	if err := json.Unmarshal(plain, &s); err != nil {
		return scheduler.Credentials{}, err
	}
	return scheduler.Credentials{
		Type: scheduler.CredentialType(s.Type), Token: s.Token, Name: s.Name, Value: s.Value,
		Username: s.Username, Password: s.Password,
		TokenURL: s.TokenURL, ClientID: s.ClientID, ClientSecret: s.ClientSecret, RefreshToken: s.RefreshToken,
		Scopes: s.Scopes, AuthStyle: s.AuthStyle, AppID: s.AppID, InstallationID: s.InstallationID, PrivateKey: s.PrivateKey,
	}, nil
}

// encodeJSON is v as a JSON column's value.
func encodeJSON(v any) (sql.NullString, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}
