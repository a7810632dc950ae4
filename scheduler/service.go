package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/providers"
)

// MaxBatch bounds one batch enqueue.
const MaxBatch = 1000

// Service is the scheduler's API for people and programs: it validates
// input, records manual actions and wakes the engine. httpapi and the CLI
// speak to it; it speaks to the Store.
type Service struct {
	store  Store
	clock  clock.Clock
	policy Policy
	// wake is called after anything that may make work due now.
	wake func()
	// wakeFor is called after an enqueue created work due at a time
	// (Engine.WakeFor).
	wakeFor func(at time.Time)
	// changes is signaled by the store after each commit (see New).
	changes *Notifier
	// enqueues group-commits concurrent Enqueue calls (newEnqueueGroup).
	enqueues *groupCommit[enqueueCall, []EnqueueResult]
}

// Now is the scheduler's clock.
func (s *Service) Now() time.Time { return s.clock.Now().UTC() }

// Latest is the latest time a notBefore or release time may name now
// (Policy.Latest), for forms that offer a choice.
func (s *Service) Latest() time.Time { return s.policy.Latest(s.Now()) }

// ScopeInput is a scope as a person writes it.
type ScopeInput struct {
	Name        string
	Provider    string
	BaseURL     string
	Credentials Credentials
	// GrantScopes are an oauth2 grant's scopes, one each (PutScope checks
	// them and joins them into Credentials.Scopes).
	GrantScopes       []string
	IdempotencyHeader string
	// MaxConcurrent 0 means the profile's default.
	MaxConcurrent int
	RateLimit     *RateLimit
	// Group shares provider-wide limits; empty means the provider name.
	Group string
	// BudgetReserve keeps requests of the learned budget back.
	BudgetReserve int
	// Profile is the declarative profile a "custom" scope requires; only
	// such a scope takes one.
	Profile *providers.Spec
	// Invalid lists the fields the caller could not read (a duration that
	// does not parse): PutScope reports them with its own findings, in one
	// *ValidationError.
	Invalid []FieldError
}

var scopeNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// OperationIDPattern is what operation IDs and scope names may look like.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$`)

var headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// PutScope validates and stores a scope.
func (s *Service) PutScope(ctx context.Context, in ScopeInput, actor string) (Scope, bool, error) {
	cfg, err := s.validateScope(in)
	if err != nil {
		return Scope{}, false, err
	}
	sc, created, err := s.store.PutScope(ctx, cfg, Action{Actor: actor, At: s.Now(), Reason: "put scope"})
	if err != nil {
		return Scope{}, false, err
	}
	s.wake()
	return sc, created, nil
}

func (s *Service) validateScope(in ScopeInput) (ScopeConfig, error) {
	v := &ValidationError{Fields: slices.Clone(in.Invalid)}
	if !scopeNamePattern.MatchString(in.Name) {
		v.add("providerScope", "must be 1-128 characters: letters, digits and . _ : - (starting with a letter or digit)")
	}
	profile, err := providers.Lookup(in.Provider, providers.Options{IdempotencyHeader: in.IdempotencyHeader, Spec: in.Profile})
	var specErr *providers.SpecError
	switch {
	case errors.As(err, &specErr):
		for _, f := range specErr.Fields {
			v.add("profile."+f.Field, f.Message)
		}
	case errors.Is(err, providers.ErrSpecRequired):
		v.add("profile", `is required when provider is "custom": declare the provider's status classes and headers (see GET /v1/providers)`)
	case err != nil:
		v.add("provider", err.Error())
	}
	if in.Profile != nil && in.Provider != providers.CustomName {
		v.add("profile", `only a "custom" scope takes a profile; built-in providers have their own`)
	}
	if msg := checkBaseURL(in.BaseURL); msg != "" {
		v.add("baseURL", msg)
	}
	if in.IdempotencyHeader != "" {
		if in.Provider == providers.CustomName {
			v.add("idempotencyHeader", "a custom scope declares its idempotency in profile.idempotency")
		} else if in.Provider != "generic" {
			v.add("idempotencyHeader", "only a generic scope takes an idempotency header; other profiles know their provider's own")
		} else if !headerNamePattern.MatchString(in.IdempotencyHeader) || forbiddenHeader(in.IdempotencyHeader) {
			v.add("idempotencyHeader", "must be a valid, non-reserved header name")
		}
	}
	validateCredentials(v, in.Credentials)
	validateGrant(v, in.Credentials, in.GrantScopes)
	if in.MaxConcurrent < 0 || in.MaxConcurrent > 1000 {
		v.add("maxConcurrent", "must be between 1 and 1000")
	}
	if in.Group != "" && !scopeNamePattern.MatchString(in.Group) {
		v.add("group", "must be 1-128 characters: letters, digits and . _ : -")
	}
	if in.BudgetReserve < 0 || in.BudgetReserve > 1_000_000 {
		v.add("budgetReserve", "must be between 0 and 1000000")
	}
	if rl := in.RateLimit; rl != nil {
		if rl.Requests < 1 || rl.Requests > 1_000_000 {
			v.add("rateLimit.requests", "must be between 1 and 1000000")
		}
		if !v.names("rateLimit.per") && (rl.Per < time.Second || rl.Per > 31*24*time.Hour) {
			v.add("rateLimit.per", "must be a duration between 1s and 744h")
		}
	}
	if err := v.err(); err != nil {
		return ScopeConfig{}, err
	}
	if len(in.GrantScopes) > 0 {
		in.Credentials.Scopes = strings.Join(in.GrantScopes, " ")
	}
	cfg := ScopeConfig{
		Name: in.Name, Provider: in.Provider, BaseURL: strings.TrimRight(in.BaseURL, "/"),
		Credentials: in.Credentials, IdempotencyHeader: in.IdempotencyHeader,
		MaxConcurrent: in.MaxConcurrent, RateLimit: in.RateLimit,
		Group: in.Group, BudgetReserve: in.BudgetReserve, Profile: in.Profile,
	}
	if cfg.Group == "" {
		cfg.Group = in.Provider
		if u, err := url.Parse(cfg.BaseURL); err == nil && in.Provider == providers.CustomName {
			// Custom scopes of unrelated providers must not share limits:
			// by default those of one host do.
			cfg.Group = providers.CustomName + ":" + u.Host
		}
	}
	d := profile.Defaults()
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = max(d.MaxConcurrent, 1)
	}
	if cfg.RateLimit == nil && d.Requests > 0 && d.Per > 0 {
		cfg.RateLimit = &RateLimit{Requests: d.Requests, Per: d.Per}
	}
	return cfg, nil
}

// MaxBaseURLLength bounds a scope's base URL.
const MaxBaseURLLength = 2048

// checkBaseURL returns what is wrong with a scope's base URL, or "".
func checkBaseURL(raw string) string {
	if len(raw) > MaxBaseURLLength {
		return fmt.Sprintf("must be at most %d bytes (got %d)", MaxBaseURLLength, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "must be an absolute http or https URL without credentials, query or fragment"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("has port %s: a port must be between 1 and 65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return "has an empty port: give one between 1 and 65535, or none"
	}
	if u.Hostname() == "" {
		return "must name a host"
	}
	return ""
}

func validateCredentials(v *ValidationError, c Credentials) {
	switch c.Type {
	case CredentialNone:
		if c != (Credentials{}) {
			v.add("credentials.type", "is required when credentials are given: bearer, header, basic, oauth2 or githubApp")
		}
	case CredentialOAuth2, CredentialGitHubApp:
		// validateGrant
	case CredentialBearer:
		if c.Token == "" || strings.ContainsAny(c.Token, "\r\n") {
			v.add("credentials.token", "is required for bearer credentials and must be one line")
		}
	case CredentialHeader:
		switch {
		case !headerNamePattern.MatchString(c.Name):
			v.add("credentials.name", "must be a valid header name")
		case transportHeader(c.Name):
			v.add("credentials.name", "must not be a hop-by-hop, host or framing header (Host, Connection, Content-Length, Transfer-Encoding, …): the transport sets those, and the credential would never be sent")
		}
		if c.Value == "" || strings.ContainsAny(c.Value, "\r\n") {
			v.add("credentials.value", "is required for header credentials and must be one line")
		}
	case CredentialBasic:
		if c.Username == "" || strings.ContainsAny(c.Username, ":\r\n") {
			v.add("credentials.username", "is required for basic credentials and may not contain ':'")
		}
		if strings.ContainsAny(c.Password, "\r\n") {
			v.add("credentials.password", "must be one line")
		}
	default:
		v.add("credentials.type", "must be bearer, header, basic, oauth2 or githubApp")
	}
}

// GetScope returns one scope, with its credentials' type but never their
// values.
func (s *Service) GetScope(ctx context.Context, name string) (Scope, error) {
	return s.store.GetScope(ctx, name)
}

// ListScopes returns every scope, with its credentials' type but never
// their values.
func (s *Service) ListScopes(ctx context.Context) ([]Scope, error) {
	return s.store.ListScopes(ctx)
}

// ResumeScope lifts every wait of a scope at once: its hold, its pause,
// its learned budget's wait and its rate slot.
func (s *Service) ResumeScope(ctx context.Context, name, reason, actor string) (Scope, error) {
	if err := requireReason(reason); err != nil {
		return Scope{}, err
	}
	sc, err := s.store.ResumeScope(ctx, name, Action{Actor: actor, At: s.Now(), Reason: reason})
	if err != nil {
		return Scope{}, err
	}
	s.wake()
	return sc, nil
}

// PauseInput is a person's pause of a scope (design §14).
type PauseInput struct {
	// Until is when the pause ends: after now, within the policy's
	// horizon.
	Until time.Time
	// Reason says why, for the audit trail. Required.
	Reason string
	// Invalid lists the fields the caller could not read (a time that
	// does not parse): PauseScope reports them with its own findings.
	Invalid []FieldError
}

// PauseScope pauses the scope by hand until in.Until (Store.PauseScope),
// after checking every field of in in one pass.
func (s *Service) PauseScope(ctx context.Context, name string, in PauseInput, actor string) (Scope, error) {
	v := &ValidationError{Fields: slices.Clone(in.Invalid)}
	checkReason(v, in.Reason)
	now := s.Now()
	if !slices.ContainsFunc(in.Invalid, func(f FieldError) bool { return f.Field == "until" }) {
		switch msg := s.policy.CheckTime(in.Until, now); {
		case in.Until.IsZero():
			v.add("until", "is required: the time the pause ends (resume lifts it sooner)")
		case msg != "":
			v.add("until", msg)
		case !in.Until.After(now):
			v.add("until", "must lie in the future")
		}
	}
	if err := v.err(); err != nil {
		return Scope{}, err
	}
	sc, err := s.store.PauseScope(ctx, name, CeilMillisecond(in.Until), Action{Actor: actor, At: now, Reason: in.Reason})
	if err != nil {
		return Scope{}, err
	}
	s.wake()
	return sc, nil
}

// OperationInput is an operation as a client writes it.
type OperationInput struct {
	ID              string
	Scope           string
	Kind            Kind // empty: from the method
	Method          string
	Path            string
	Headers         map[string]string
	Body            []byte
	ContentType     string
	RequestIdentity string     // empty: the operation ID
	NotBefore       *time.Time // nil: now
	MaxAttempts     int        // 0: default
	MaxElapsed      time.Duration
	// Invalid lists the fields the caller could not read (a time, a
	// duration or a body that does not parse), with paths relative to the
	// operation: Enqueue reports them with its own findings, in one
	// *ValidationError.
	Invalid []FieldError
}

// Enqueue validates and stores operations in one transaction. A validation
// failure of any item rejects the whole call with one *ValidationError
// naming every field at fault of every item (each item's Invalid fields
// and what Enqueue finds), prefixed by prefix(i), so nothing is stored;
// otherwise each item gets its own EnqueueResult, once it is committed.
// Concurrent calls share that transaction (group-committed, see
// newEnqueueGroup) with the results of the calls made one after another
// in arrival order. A call whose ctx ends while it waits returns
// ctx.Err(), and its operations may still have been committed, as when a
// client goes away while its transaction commits: enqueueing again with
// the same IDs tells.
func (s *Service) Enqueue(ctx context.Context, ins []OperationInput, prefix func(i int) string) ([]EnqueueResult, error) {
	if n := len(ins); n == 0 || n > MaxBatch {
		return nil, &ValidationError{Fields: []FieldError{{"operations", fmt.Sprintf("must hold 1 to %d operations (got %d)", MaxBatch, n)}}}
	}
	now := s.Now()
	idem, err := s.callerKeyHeaders(ctx, ins)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	all := &ValidationError{}
	ops := make([]NewOperation, len(ins))
	for i, in := range ins {
		op, err := s.normalize(in, now, idem[in.Scope])
		if err != nil {
			for _, f := range err.Fields {
				all.add(prefix(i)+f.Field, f.Message)
			}
			continue
		}
		ops[i] = op
	}
	if err := all.err(); err != nil {
		return nil, err
	}
	res, err := s.enqueues.do(ctx, enqueueCall{ops: ops, now: now})
	if err != nil {
		return nil, err
	}
	var due time.Time // the earliest new operation's
	for i, r := range res {
		if r.Created && (due.IsZero() || ops[i].NotBefore.Before(due)) {
			due = ops[i].NotBefore
		}
	}
	if !due.IsZero() {
		s.wakeFor(due)
	}
	return res, nil
}

// callerKeyHeaders returns the idempotency of the scopes of the operations
// of ins that carry request headers, one of which may be the scope's
// idempotency header (design §12 "The caller's own idempotency key"). An
// unknown scope has none here; the store rejects its operations.
func (s *Service) callerKeyHeaders(ctx context.Context, ins []OperationInput) (map[string]providers.Idempotency, error) {
	idem := map[string]providers.Idempotency{}
	for _, in := range ins {
		if _, seen := idem[in.Scope]; seen || len(in.Headers) == 0 || !scopeNamePattern.MatchString(in.Scope) {
			continue
		}
		sc, err := s.store.GetScope(ctx, in.Scope)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, err
		default:
			idem[in.Scope] = ScopeIdempotency(sc.Provider, sc.IdempotencyHeader, sc.Profile)
		}
	}
	return idem, nil
}

// ScopeIdempotency is the idempotency of a scope's provider (its profile
// for provider, idempotency header and declarative profile): the sender
// sends an operation's request identity as the key exactly when it
// Applies to the method, and the provider remembers it for Retention. A
// scope pacer cannot read (an unknown provider, from a newer binary) has
// none, as the engine then classifies it with the generic profile.
func ScopeIdempotency(provider, idempotencyHeader string, spec *providers.Spec) providers.Idempotency {
	p, err := providers.Lookup(provider, providers.Options{IdempotencyHeader: idempotencyHeader, Spec: spec})
	if err != nil {
		return providers.Idempotency{}
	}
	return p.Idempotency()
}

// transportHeaders are the hop-by-hop, host and framing headers that the
// HTTP transport writes itself: a value given for one is dropped or
// breaks the request, so no operation, credential or idempotency header
// may name one.
var transportHeaders = map[string]bool{
	"Host": true, "Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true,
}

// credentialHeaders carry credentials: only a scope sets them.
var credentialHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true,
	"X-Api-Key": true, "Api-Key": true, "X-Auth-Token": true,
}

// transportHeader reports whether name is one of transportHeaders.
func transportHeader(name string) bool {
	return transportHeaders[http.CanonicalHeaderKey(name)]
}

// forbiddenHeader reports whether a client may not set name on a request:
// a transport or a credential header.
func forbiddenHeader(name string) bool {
	return transportHeader(name) || credentialHeaders[http.CanonicalHeaderKey(name)]
}

// normalize validates in and returns the operation to store. idem is its
// scope's idempotency: a request header named as the scope's idempotency
// header is the caller's own key, which becomes the request identity when
// none is given and may not contradict a given one; pacer never replaces
// it. When pacer sends the identity as the key (idem applies to the
// method), the header is not kept beside it, so it is sent once.
func (s *Service) normalize(in OperationInput, now time.Time, idem providers.Idempotency) (NewOperation, *ValidationError) {
	v := &ValidationError{Fields: slices.Clone(in.Invalid)}
	const idRule = "1-200 characters, letters, digits and . _ : @ / - (starting with a letter or digit)"
	switch {
	case in.ID == "":
		v.add("operationId", "is required: "+idRule)
	case !idPattern.MatchString(in.ID):
		v.add("operationId", "must be "+idRule)
	}
	switch {
	case in.Scope == "":
		v.add("providerScope", "is required: the scope to send it through")
	case !scopeNamePattern.MatchString(in.Scope):
		v.add("providerScope", "must be a scope name: 1-128 characters, letters, digits and . _ : - (starting with a letter or digit)")
	}
	method := strings.ToUpper(in.Method)
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		v.add("request.method", "must be GET, HEAD, OPTIONS, POST, PUT, PATCH or DELETE")
	}
	if u, err := url.Parse(in.Path); err != nil || !strings.HasPrefix(in.Path, "/") || strings.HasPrefix(in.Path, "//") || u.Host != "" || u.Fragment != "" || len(in.Path) > 4096 {
		v.add("request.path", "must be a path starting with a single '/', without host or fragment, at most 4096 bytes")
	}
	headers := map[string]string{}
	var callerKey, callerKeyField string
	keys := make([]string, 0, len(in.Headers))
	for k := range in.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := in.Headers[k]
		switch {
		case !headerNamePattern.MatchString(k):
			v.add("request.headers."+k, "is not a valid header name")
		case forbiddenHeader(k):
			v.add("request.headers."+k, "may not be set on an operation: put credentials on the scope (PUT /v1/scopes/{providerScope}); hop-by-hop and host headers are set by pacer")
		case strings.ContainsAny(val, "\r\n\x00"):
			v.add("request.headers."+k, "must be one line")
		case strings.EqualFold(k, "Content-Type"):
			// carried in ContentType
		case idem.Header != "" && strings.EqualFold(k, idem.Header):
			callerKey, callerKeyField = val, "request.headers."+k
			if !idem.Applies(method) {
				headers[http.CanonicalHeaderKey(k)] = val
			}
		default:
			headers[http.CanonicalHeaderKey(k)] = val
		}
	}
	if len(headers) > 64 {
		v.add("request.headers", "at most 64 headers")
	}
	kind := in.Kind
	switch kind {
	case "":
		kind = KindMutation
		if method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions {
			kind = KindRead
		}
	case KindRead, KindMutation:
	default:
		v.add("kind", "must be read or mutation")
	}
	identity, identityField := in.RequestIdentity, "requestIdentity"
	switch {
	case callerKeyField != "" && callerKey == "":
		v.add(callerKeyField, "is the scope's idempotency header: give a key, or leave the header out and pacer sends requestIdentity in it")
	case callerKeyField != "" && identity == "":
		identity, identityField = callerKey, callerKeyField
	case callerKeyField != "" && identity != callerKey:
		v.add(callerKeyField, fmt.Sprintf("is the scope's idempotency header and contradicts requestIdentity: pacer sends requestIdentity as the %s key, so give the same key in both or only one", idem.Header))
	}
	if identity == "" {
		identity = in.ID
	}
	if len(identity) > 255 || strings.ContainsAny(identity, "\r\n\x00\"") {
		v.add(identityField, "must be at most 255 characters on one line, without quotes")
	}
	if len(in.Body) > 0 && in.ContentType == "" {
		v.add("request.headers.Content-Type", "is required with bodyBase64")
	}
	if in.MaxAttempts < 0 {
		v.add("retry.maxAttempts", "must be positive")
	}
	if msg := s.policy.CheckMaxElapsed(in.MaxElapsed); msg != "" {
		v.add("retry.maxElapsed", msg)
	}
	notBefore := now
	if in.NotBefore != nil {
		if msg := s.policy.CheckTime(*in.NotBefore, now); msg != "" {
			v.add("notBefore", msg)
		}
		notBefore = in.NotBefore.UTC()
		if notBefore.Before(now) {
			notBefore = now
		}
	}
	if len(v.Fields) > 0 {
		return NewOperation{}, v
	}
	op := NewOperation{
		ID: in.ID, Scope: in.Scope, Kind: kind,
		Request:         Request{Method: method, Path: in.Path, Headers: headers, Body: in.Body, ContentType: in.ContentType},
		RequestIdentity: identity,
		NotBefore:       CeilMillisecond(notBefore),
		Retry:           s.policy.ClampRetry(in.MaxAttempts, in.MaxElapsed),
	}
	if len(op.Request.Headers) == 0 {
		op.Request.Headers = nil
	}
	op.ContentHash = contentHash(op, in.NotBefore)
	return op, nil
}

// CeilMillisecond rounds t up to the next whole millisecond, the
// resolution of stored times: a not-before time stored rounded down could
// let a send leave up to a millisecond early.
func CeilMillisecond(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); r.Before(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

// contentHash fingerprints what the client asked for: the normalized
// operation, with notBefore only when the client gave one.
func contentHash(op NewOperation, notBefore *time.Time) string {
	fp := struct {
		Scope, Kind, Identity string
		Request               Request
		NotBefore             string
		Retry                 Retry
	}{op.Scope, string(op.Kind), op.RequestIdentity, op.Request, "", op.Retry}
	if notBefore != nil {
		fp.NotBefore = notBefore.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(fp) // cannot fail: plain values only
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// GetOperation returns one operation.
func (s *Service) GetOperation(ctx context.Context, id string) (Operation, error) {
	return s.store.GetOperation(ctx, id)
}

// ListOperations returns one page of operations.
// MaxSearch bounds the ID prefix a search takes, and SearchMatches how
// many matches it lists.
const (
	MaxSearch     = 256
	SearchMatches = 20
)

// FindOperation finds operations by their ID (design §14): exact is the
// operation with ID q when there is one; otherwise matches are the
// operations whose ID starts with q, in ID order, at most SearchMatches.
func (s *Service) FindOperation(ctx context.Context, q string) (exact *Operation, matches []Operation, err error) {
	if q == "" || len(q) > MaxSearch {
		v := &ValidationError{}
		v.add("q", fmt.Sprintf("must be an operation ID or the start of one, of 1 to %d bytes", MaxSearch))
		return nil, nil, v
	}
	op, err := s.store.GetOperation(ctx, q)
	switch {
	case err == nil:
		return &op, nil, nil
	case !errors.Is(err, ErrNotFound):
		return nil, nil, err
	}
	matches, err = s.store.FindOperations(ctx, q, SearchMatches)
	return nil, matches, err
}

// ListOperations returns one page of operations matching f, newest first.
func (s *Service) ListOperations(ctx context.Context, f OperationFilter) (OperationPage, error) {
	v := &ValidationError{}
	if f.State != "" && !f.State.Valid() {
		v.add("state", "must be one of scheduled, waitingForBudget, running, held, succeeded, failed, canceled")
	}
	if f.Limit == 0 {
		f.Limit = 50
	}
	if f.Limit < 1 || f.Limit > 1000 {
		v.add("limit", "must be between 1 and 1000")
	}
	if len(f.Reason) > 64 {
		v.add("reason", "must be a hold or failure reason such as unknownOutcome or permanent")
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		v.add("createdBefore", "must be later than createdAfter")
	}
	if !f.UpdatedAfter.IsZero() && !f.UpdatedBefore.IsZero() && !f.UpdatedAfter.Before(f.UpdatedBefore) {
		v.add("updatedBefore", "must be later than updatedAfter")
	}
	if err := v.err(); err != nil {
		return OperationPage{}, err
	}
	return s.store.ListOperations(ctx, f)
}

// ListAttempts returns an operation's attempts.
func (s *Service) ListAttempts(ctx context.Context, id string) ([]Attempt, error) {
	return s.store.ListAttempts(ctx, id)
}

// ListAudit returns an operation's audit trail.
func (s *Service) ListAudit(ctx context.Context, id string) ([]AuditEntry, error) {
	return s.store.ListAudit(ctx, id)
}

// Release runs a held or failed operation again at `at` (now when nil).
func (s *Service) Release(ctx context.Context, id string, at *time.Time, reason, actor string) (Operation, error) {
	v := &ValidationError{}
	checkReason(v, reason)
	now := s.Now()
	when := now
	if at != nil {
		// One rule for the page, the CLI and the API (issue 14): a time
		// given must lie ahead, within the horizon; none means now.
		switch msg := s.policy.CheckTime(*at, now); {
		case msg != "":
			v.add("at", msg)
		case !at.After(now):
			v.add("at", "must lie in the future; leave it out to release now")
		default:
			when = at.UTC()
		}
	}
	if err := v.err(); err != nil {
		return Operation{}, err
	}
	op, err := s.store.ReleaseOperation(ctx, id, CeilMillisecond(when), Action{Actor: actor, At: now, Reason: reason})
	if err != nil {
		return Operation{}, err
	}
	s.wake()
	return op, nil
}

// Resolution is what a person found at the provider for an operation
// held with an unknown outcome (design §14): three choices that mean the
// same on the page, in the CLI and in the API, each audited as a resolve.
type Resolution string

// The three resolutions, as the API and CLI write them.
const (
	// ResolvedApplied: the provider applied it; it ends succeeded.
	ResolvedApplied Resolution = "succeeded"
	// ResolvedResend: it did not; it is sent again now with the same
	// request identity and a fresh retry budget.
	ResolvedResend Resolution = "release"
	// ResolvedNotApplied: it did not, and it must not be sent; it ends
	// failed with FailureResolvedFailed.
	ResolvedNotApplied Resolution = "failed"
)

// Resolutions are the resolutions, in the order pages and help list them.
var Resolutions = []Resolution{ResolvedApplied, ResolvedResend, ResolvedNotApplied}

// Words say what r does, for the page's choices, the CLI's help and the
// API's error.
func (r Resolution) Words() string {
	switch r {
	case ResolvedApplied:
		return "it applied it: the operation ends succeeded"
	case ResolvedResend:
		return "it did not: send it again now, with the same request identity"
	case ResolvedNotApplied:
		return "it did not, and it must not be sent: the operation ends failed (resolvedFailed)"
	}
	return ""
}

// ResolutionChoices says what each resolution means, for an error about
// a value that is none of them.
func ResolutionChoices() string {
	var parts []string
	for _, r := range Resolutions {
		parts = append(parts, fmt.Sprintf("%q (%s)", string(r), r.Words()))
	}
	return "must be one of " + strings.Join(parts, ", ")
}

// Resolve records what a person found at the provider for an uncertain
// mutation (design §14): applied, not applied and sent again (checked and
// released in one transaction, Store.ReleaseUnapplied), or not applied
// and not to be sent.
func (s *Service) Resolve(ctx context.Context, id string, res Resolution, reason, actor string) (Operation, error) {
	v := &ValidationError{}
	checkReason(v, reason)
	if res.Words() == "" {
		v.add("outcome", ResolutionChoices())
	}
	if err := v.err(); err != nil {
		return Operation{}, err
	}
	now := s.Now()
	act := Action{Actor: actor, At: now, Reason: reason}
	if res == ResolvedResend {
		op, err := s.store.ReleaseUnapplied(ctx, id, CeilMillisecond(now), act)
		if err != nil {
			return Operation{}, err
		}
		s.wake()
		return op, nil
	}
	return s.store.ResolveOperation(ctx, id, res == ResolvedApplied, act)
}

// Bounds of an action on many operations (design §14): each transaction
// takes BulkBatch of them, and one call at most BulkMax.
const (
	BulkBatch = 100
	BulkMax   = 10000
)

// BulkInput is an action on every operation matching a filter.
type BulkInput struct {
	// Action is ActRelease (now) or ActCancel.
	Action ManualAction
	// Filter selects the operations; at least one of State, Scope and
	// Reason must be set, so that no call acts on everything by mistake.
	Filter OperationFilter
	Reason string
}

// BulkResult says what an action on many did.
type BulkResult struct {
	// Changed counts the operations released or canceled; Skipped those
	// that matched but whose state did not allow it (a release of a
	// scheduled one) or changed meanwhile.
	Changed, Skipped int
	// More is true when BulkMax operations were looked at and more may
	// match: call again.
	More bool
}

// Bulk releases or cancels every operation matching in.Filter (design
// §14), BulkBatch per transaction, each audited as the single action, at
// most BulkMax in one call.
func (s *Service) Bulk(ctx context.Context, in BulkInput, actor string) (BulkResult, error) {
	v := &ValidationError{}
	checkReason(v, in.Reason)
	if in.Action != ActRelease && in.Action != ActCancel {
		v.add("action", `must be "release" or "cancel"`)
	}
	f := in.Filter
	if f.State == "" && f.Scope == "" && f.Reason == "" {
		v.add("filter", "must name a state, a providerScope or a reason: an action on many never takes everything by default")
	}
	if f.State != "" && !f.State.Valid() {
		v.add("filter.state", "must be one of scheduled, waitingForBudget, running, held, succeeded, failed, canceled")
	}
	if err := v.err(); err != nil {
		return BulkResult{}, err
	}
	now := s.Now()
	act := Action{Actor: actor, At: now, Reason: in.Reason}
	f.Limit, f.Cursor = BulkBatch, ""
	var res BulkResult
	seen := 0
	for seen < BulkMax {
		page, err := s.store.ListOperations(ctx, f)
		if err != nil {
			return res, err
		}
		ids := make([]string, len(page.Operations))
		for i, op := range page.Operations {
			ids[i] = op.ID
		}
		if len(ids) > 0 {
			n, err := s.store.ActOnOperations(ctx, in.Action, ids, CeilMillisecond(now), act)
			if err != nil {
				return res, err
			}
			res.Changed += n
			res.Skipped += len(ids) - n
			seen += len(ids)
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	res.More = seen >= BulkMax
	if res.Changed > 0 {
		s.wake()
	}
	return res, nil
}

// Unrelease undoes a release that has not been sent yet (design §14): the
// operation goes back to what it was released from.
func (s *Service) Unrelease(ctx context.Context, id, reason, actor string) (Operation, error) {
	if err := requireReason(reason); err != nil {
		return Operation{}, err
	}
	return s.store.UnreleaseOperation(ctx, id, Action{Actor: actor, At: s.Now(), Reason: reason})
}

// Cancel cancels an operation that is not running or finished.
func (s *Service) Cancel(ctx context.Context, id, reason, actor string) (Operation, error) {
	if err := requireReason(reason); err != nil {
		return Operation{}, err
	}
	op, err := s.store.CancelOperation(ctx, id, Action{Actor: actor, At: s.Now(), Reason: reason})
	if err != nil {
		return Operation{}, err
	}
	return op, nil
}

// requireReason is checkReason alone: nil, or a *ValidationError.
func requireReason(reason string) error {
	v := &ValidationError{}
	checkReason(v, reason)
	return v.err()
}

// checkReason records in v what is wrong with a manual action's reason.
func checkReason(v *ValidationError, reason string) {
	switch {
	case strings.TrimSpace(reason) == "":
		v.add("reason", "is required (at most 1000 characters): say why, for the audit trail")
	case len(reason) > 1000:
		v.add("reason", fmt.Sprintf("must be at most 1000 characters (got %d)", len(reason)))
	}
}
