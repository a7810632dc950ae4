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
