package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/httpapi"
)

// identityBody is a POST on scope with request identity identity.
func identityBody(id, scope, identity string) string {
	return `{"operationId":"` + id + `","providerScope":"` + scope + `","request":{"method":"POST","path":"/charges","body":{"amount":100}},"requestIdentity":"` + identity + `"}`
}

// TestEnqueue_IdentityInUse checks that a second operation may not send
// another's request identity as an idempotency key the provider still
// remembers: the provider would answer it with the first one's result.
func TestEnqueue_IdentityInUse(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	idem := `{"provider":"generic","baseURL":"https://pay.example","idempotencyHeader":"Idempotency-Key"}` // retention 24h
	decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/pay", idem), http.StatusCreated)
	decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/pay-2", idem), http.StatusCreated)
	decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/plain", `{"provider":"generic","baseURL":"https://plain.example"}`), http.StatusCreated)

	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", identityBody("op-1", "pay", "charge-1")), http.StatusCreated)
	p := problemOf(t, b.do(http.MethodPost, "/v1/operations", identityBody("op-2", "pay", "charge-1")), http.StatusConflict)
	if p.Type != httpapi.ProblemTypeIdentityInUse || !strings.Contains(p.Detail, `"op-2"`) || !strings.Contains(p.Detail, "op-1") || !hasField(p, "requestIdentity", "") {
		t.Fatalf("problem: %+v", p)
	}
	problemOf(t, b.do(http.MethodGet, opPath("op-2", ""), ""), http.StatusNotFound)
	// The same operation again is judged by its content, as always.
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", identityBody("op-1", "pay", "charge-1")), http.StatusOK)
	// Another scope, or a provider that is sent no key, may share it.
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", identityBody("op-3", "pay-2", "charge-1")), http.StatusCreated)
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", identityBody("op-4", "plain", "charge-1")), http.StatusCreated)
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", identityBody("op-5", "plain", "charge-1")), http.StatusCreated)

	// Within one batch the second is refused, and only it.
	batch := decodeAs[httpapi.BatchResponse](t, b.do(http.MethodPost, "/v1/operations/batch",
		`{"operations":[`+identityBody("op-6", "pay", "charge-6")+`,`+identityBody("op-7", "pay", "charge-6")+`]}`), http.StatusOK)
	if batch.Results[0].Status != http.StatusCreated || batch.Results[1].Status != http.StatusConflict ||
		batch.Results[1].Problem == nil || batch.Results[1].Problem.Type != httpapi.ProblemTypeIdentityInUse {
		t.Fatalf("batch: %+v", batch.Results)
	}

	// A finished operation holds its identity for the provider's
	// retention, counted from its last update.
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, opPath("op-1", "/cancel"), `{"reason":"not needed"}`), http.StatusOK)
	b.clock.Add(23 * time.Hour)
	problemOf(t, b.do(http.MethodPost, "/v1/operations", identityBody("op-2", "pay", "charge-1")), http.StatusConflict)
	b.clock.Add(time.Hour + time.Second)
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", identityBody("op-2", "pay", "charge-1")), http.StatusCreated)
	// An unfinished one holds it however long ago it was last updated: it
	// will still send the key.
	problemOf(t, b.do(http.MethodPost, "/v1/operations", identityBody("op-8", "pay-2", "charge-1")), http.StatusConflict)
}

// keyBody is a POST on scope whose request headers carry header: key, with
// requestIdentity identity when not empty.
func keyBody(id, scope, header, key, identity string) string {
	body := `{"operationId":"` + id + `","providerScope":"` + scope + `","request":{"method":"POST","path":"/v1/charges","headers":{"` + header + `":"` + key + `","Accept":"application/json"},"body":{"amount":100}}`
	if identity != "" {
		body += `,"requestIdentity":"` + identity + `"`
	}
	return body + `}`
}

// TestEnqueue_CallersIdempotencyKey checks design §12 "The caller's own
// idempotency key": the scope's idempotency header in request.headers
// becomes the request identity when none is given, is refused with 422
// naming the header when it contradicts the given one, and is never
// replaced; it is then kept once, as the identity pacer sends.
func TestEnqueue_CallersIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/stripe-a", `{"provider":"stripe","baseURL":"https://api.stripe.com"}`), http.StatusCreated)
	decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/pay", `{"provider":"generic","baseURL":"https://pay.example","idempotencyHeader":"X-Request-Key"}`), http.StatusCreated)
	putScope(t, b, "gh") // GitHub honours no idempotency header

	for _, c := range []struct{ scope, header, key, identity string }{
		{"stripe-a", "Idempotency-Key", "caller-key-1", ""},
		{"stripe-a", "idempotency-key", "caller-key-2", ""},             // any spelling of the name
		{"stripe-a", "Idempotency-Key", "caller-key-3", "caller-key-3"}, // agreeing is fine
		{"pay", "x-request-key", "caller-key-4", ""},                    // a generic scope's own header
	} {
		id := "op-" + c.key
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", keyBody(id, c.scope, c.header, c.key, c.identity)), http.StatusCreated)
		if op.RequestIdentity != c.key {
			t.Fatalf("%s: requestIdentity: got %q, want the caller's key %q", id, op.RequestIdentity, c.key)
		}
		for k := range op.Request.Headers {
			if strings.EqualFold(k, c.header) {
				t.Fatalf("%s: the key is kept as a header beside the identity pacer sends: %v", id, op.Request.Headers)
			}
		}
		if op.Request.Headers["Accept"] != "application/json" {
			t.Fatalf("%s: other headers: got %v", id, op.Request.Headers)
		}
	}
	// The caller's key is the identity: another operation may not send it.
	p := problemOf(t, b.do(http.MethodPost, "/v1/operations", keyBody("op-again", "stripe-a", "Idempotency-Key", "caller-key-1", "")), http.StatusConflict)
	if p.Type != httpapi.ProblemTypeIdentityInUse {
		t.Fatalf("problem: %+v", p)
	}

	// A key that contradicts requestIdentity is refused, naming the header.
	p = problemOf(t, b.do(http.MethodPost, "/v1/operations", keyBody("op-x", "stripe-a", "Idempotency-Key", "caller-key-5", "pacer-identity")), http.StatusUnprocessableEntity)
	if p.Type != httpapi.ProblemTypeValidation || !hasField(p, "request.headers.Idempotency-Key", "contradicts requestIdentity") {
		t.Fatalf("problem: %+v", p)
	}
	problemOf(t, b.do(http.MethodGet, opPath("op-x", ""), ""), http.StatusNotFound)
	p = problemOf(t, b.do(http.MethodPost, "/v1/operations", keyBody("op-y", "stripe-a", "Idempotency-Key", "", "")), http.StatusUnprocessableEntity)
	if !hasField(p, "request.headers.Idempotency-Key", "give a key") {
		t.Fatalf("problem: %+v", p)
	}
	// In a batch the whole call is refused, naming the item.
	p = problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", `{"operations":[`+
		keyBody("op-b1", "stripe-a", "Idempotency-Key", "caller-key-6", "")+`,`+
		keyBody("op-b2", "pay", "X-Request-Key", "caller-key-7", "other")+`]}`), http.StatusUnprocessableEntity)
	if !hasField(p, "operations[1].request.headers.X-Request-Key", "contradicts requestIdentity") {
		t.Fatalf("problem: %+v", p)
	}
	problemOf(t, b.do(http.MethodGet, opPath("op-b1", ""), ""), http.StatusNotFound)

	// A scope without an idempotency header passes the header on as is.
	op := decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", keyBody("op-gh", "gh", "Idempotency-Key", "caller-key-8", "")), http.StatusCreated)
	if op.RequestIdentity != "op-gh" || op.Request.Headers["Idempotency-Key"] != "caller-key-8" {
		t.Fatalf("github: identity %q, headers %v", op.RequestIdentity, op.Request.Headers)
	}
}
