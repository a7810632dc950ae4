package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"pacer/httpapi"
	"pacer/providers"
	"pacer/scheduler"
)

// operationBody returns a valid enqueue body for id on scope.
func operationBody(id, scope string) string {
	return `{
		"operationId": "` + id + `",
		"providerScope": "` + scope + `",
		"kind": "mutation",
		"request": {"method": "POST", "path": "/repos/acme/app/issues",
		            "headers": {"Accept": "application/json"},
		            "body": {"title": "Bug", "labels": ["a", "b"]}},
		"requestIdentity": "original-operation-request",
		"retry": {"maxAttempts": 8, "maxElapsed": "24h"}
	}`
}

// enqueue creates operation id on scope (creating the scope first when it
// does not exist).
func enqueue(t *testing.T, b *testBundle, id, scope string) httpapi.Operation {
	t.Helper()
	if res := b.do(http.MethodGet, "/v1/scopes/"+scope, ""); res.Status == http.StatusNotFound {
		putScope(t, b, scope)
	}
	return decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", operationBody(id, scope)), http.StatusCreated)
}

// assertNoOperations fails unless no operation is stored.
func assertNoOperations(t *testing.T, b *testBundle) {
	t.Helper()
	list := decodeAs[httpapi.OperationList](t, b.do(http.MethodGet, "/v1/operations", ""), http.StatusOK)
	if got, want := len(list.Operations), 0; got != want {
		t.Fatalf("operations stored: got %d, want %d", got, want)
	}
}

// opPath is the escaped path of operation id plus suffix.
func opPath(id, suffix string) string { return "/v1/operations/" + url.PathEscape(id) + suffix }

func TestEnqueue(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		res := b.do(http.MethodPost, "/v1/operations", operationBody("sync-example-72", "account-a"))
		op := decodeAs[httpapi.Operation](t, res, http.StatusCreated)
		if got, want := res.Header.Get("Location"), "/v1/operations/sync-example-72"; got != want {
			t.Fatalf("Location: got %q, want %q", got, want)
		}
		if got, want := op.State, "scheduled"; got != want {
			t.Fatalf("state: got %q, want %q", got, want)
		}
		if got, want := op.Provider, "github"; got != want {
			t.Fatalf("provider: got %q, want %q", got, want)
		}
		if got, want := op.RequestIdentity, "original-operation-request"; got != want {
			t.Fatalf("requestIdentity: got %q, want %q", got, want)
		}
		if op.NextAttemptAt == nil || !op.NextAttemptAt.Equal(testNow) {
			t.Fatalf("nextAttemptAt: got %v, want %v", op.NextAttemptAt, testNow)
		}
		if op.Deadline == nil || !op.Deadline.Equal(testNow.Add(24*time.Hour)) {
			t.Fatalf("deadline: got %v, want %v", op.Deadline, testNow.Add(24*time.Hour))
		}
		if got, want := op.Retry, (httpapi.Retry{MaxAttempts: 8, MaxElapsed: "24h"}); got != want {
			t.Fatalf("retry: got %+v, want %+v", got, want)
		}
		if got, want := string(op.Request.Body), `{"title":"Bug","labels":["a","b"]}`; got != want {
			t.Fatalf("request.body: got %s, want %s", got, want)
		}
		if got, want := op.Request.Headers["Content-Type"], "application/json"; got != want {
			t.Fatalf("request content type: got %q, want %q", got, want)
		}
		if op.HoldReason != nil || op.FailureReason != nil || op.LastOutcome != nil || op.Result != nil {
			t.Fatalf("want null holdReason, failureReason, lastOutcome and no result: %s", res.Body)
		}
		for _, key := range []string{`"holdReason":null`, `"failureReason":null`, `"lastOutcome":null`} {
			if !strings.Contains(string(res.Body), key) {
				t.Fatalf("body lacks %s: %s", key, res.Body)
			}
		}
		got := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, "/v1/operations/sync-example-72", ""), http.StatusOK)
		if got.OperationID != op.OperationID || got.State != op.State || string(got.Request.Body) != string(op.Request.Body) {
			t.Fatalf("GET: got %+v, want %+v", got, op)
		}
	})

	t.Run("OKSameContent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := enqueue(t, b, "op-1", "account-a")
		// Whitespace differs, content does not.
		body := strings.Join(strings.Fields(operationBody("op-1", "account-a")), " ")
		again := decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", body), http.StatusOK)
		if !again.CreatedAt.Equal(*first.CreatedAt) || again.OperationID != first.OperationID {
			t.Fatalf("got %+v, want the existing %+v", again, first)
		}
	})

	t.Run("ErrConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enqueue(t, b, "op-1", "account-a")
		body := strings.Replace(operationBody("op-1", "account-a"), `"Bug"`, `"Other"`, 1)
		p := problemOf(t, b.do(http.MethodPost, "/v1/operations", body), http.StatusConflict)
		if got, want := p.Type, httpapi.ProblemTypeConflict; got != want {
			t.Fatalf("type: got %q, want %q", got, want)
		}
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, "/v1/operations/op-1", ""), http.StatusOK)
		if got, want := string(op.Request.Body), `{"title":"Bug","labels":["a","b"]}`; got != want {
			t.Fatalf("stored body changed: got %s, want %s", got, want)
		}
	})

	t.Run("ErrUnknownScope", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		p := problemOf(t, b.do(http.MethodPost, "/v1/operations", operationBody("op-1", "account-z")), http.StatusUnprocessableEntity)
		if got, want := p.Type, httpapi.ProblemTypeUnknownScope; got != want {
			t.Fatalf("type: got %q, want %q", got, want)
		}
		if !hasField(p, "providerScope", "") {
			t.Fatalf("errors: got %+v, want providerScope", p.Errors)
		}
		problemOf(t, b.do(http.MethodGet, "/v1/operations/op-1", ""), http.StatusNotFound)
		assertNoOperations(t, b)
	})

	t.Run("ErrCredentialHeaders", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		for _, h := range []string{"Authorization", "Cookie", "Proxy-Authorization", "Host", "authorization"} {
			t.Run(h, func(t *testing.T) {
				body := strings.Replace(operationBody("op-1", "account-a"), `"Accept": "application/json"`,
					`"Accept": "application/json", "`+h+`": "Bearer `+secretBearer+`"`, 1)
				p := problemOf(t, b.do(http.MethodPost, "/v1/operations", body), http.StatusUnprocessableEntity)
				if !hasField(p, "request.headers."+h, "put credentials on the scope") {
					t.Fatalf("errors: got %+v, want request.headers.%s saying to put credentials on the scope", p.Errors, h)
				}
				if !strings.Contains(p.Detail, "put credentials on the scope") {
					t.Fatalf("detail: got %q, want it to say to put credentials on the scope", p.Detail)
				}
				problemOf(t, b.do(http.MethodGet, "/v1/operations/op-1", ""), http.StatusNotFound)
			})
		}
		assertNoOperations(t, b)
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		valid := operationBody("op-1", "account-a")
		for _, tt := range []struct {
			name, old, new, field string
		}{
			{"method", `"method": "POST"`, `"method": "BREW"`, "request.method"},
			{"path", `"path": "/repos/acme/app/issues"`, `"path": "repos"`, "request.path"},
			{"kind", `"kind": "mutation"`, `"kind": "maybe"`, "kind"},
			{"operationId", `"operationId": "op-1"`, `"operationId": ""`, "operationId"},
			{"notBefore", `"requestIdentity"`, `"notBefore": "tomorrow", "requestIdentity"`, "notBefore"},
			{"maxElapsed", `"maxElapsed": "24h"`, `"maxElapsed": "a day"`, "retry.maxElapsed"},
			{"bodyAndBase64", `"body": {`, `"bodyBase64": "aGk=", "body": {`, "request.body"},
			{"base64", `"body": {"title": "Bug", "labels": ["a", "b"]}`, `"bodyBase64": "***", "headers": {"Content-Type": "text/plain"}`, "request.bodyBase64"},
			{"base64WithoutContentType", `"body": {"title": "Bug", "labels": ["a", "b"]}`, `"bodyBase64": "aGk="`, "request.headers.Content-Type"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				body := strings.Replace(valid, tt.old, tt.new, 1)
				if body == valid {
					t.Fatalf("replacement %q not applied", tt.old)
				}
				if tt.name == "base64" {
					body = strings.Replace(body, `"headers": {"Accept": "application/json"},`, "", 1)
				}
				p := problemOf(t, b.do(http.MethodPost, "/v1/operations", body), http.StatusUnprocessableEntity)
				if got, want := p.Type, httpapi.ProblemTypeValidation; got != want {
					t.Fatalf("type: got %q, want %q", got, want)
				}
				if !hasField(p, tt.field, "") {
					t.Fatalf("errors: got %+v, want field %q", p.Errors, tt.field)
				}
			})
		}
		assertNoOperations(t, b)
	})

	t.Run("ErrMalformed", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		valid := operationBody("op-1", "account-a")
		for _, tt := range []struct {
			name, body, detail string
		}{
			{"syntax", `{"operationId": "op-1",`, "malformed JSON"},
			{"syntaxMiddle", `{"operationId" "op-1"}`, "malformed JSON"},
			{"unknownField", strings.Replace(valid, `"kind"`, `"priority": 1, "kind"`, 1), `unknown field "priority"`},
			{"unknownNestedField", strings.Replace(valid, `"method"`, `"timeout": "1s", "method"`, 1), `unknown field "timeout"`},
			{"trailingData", valid + ` {"operationId": "op-2"}`, "after the JSON object"},
			{"trailingGarbage", valid + `x`, "after the JSON object"},
			{"wrongType", strings.Replace(valid, `"maxAttempts": 8`, `"maxAttempts": "8"`, 1), `"retry.maxAttempts"`},
			{"wrongHeaderType", strings.Replace(valid, `"application/json"`, `1`, 1), `"request.headers"`},
			{"notObject", `[` + valid + `]`, "JSON object"},
			{"empty", ``, "empty"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				req := b.request(http.MethodPost, "/v1/operations", tt.body)
				req.Header.Set("Content-Type", "application/json")
				p := problemOf(t, b.send(req), http.StatusBadRequest)
				if !strings.Contains(p.Detail, tt.detail) {
					t.Fatalf("detail: got %q, want it to contain %q", p.Detail, tt.detail)
				}
			})
		}
		assertNoOperations(t, b)
	})

	t.Run("ErrContentType", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1"} {
			req := b.request(http.MethodPost, "/v1/operations", operationBody("op-1", "account-a"))
			req.Header.Set("Content-Type", ct)
			problemOf(t, b.send(req), http.StatusUnsupportedMediaType)
		}
		req := b.request(http.MethodPost, "/v1/operations", operationBody("op-1", "account-a"))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		decodeAs[httpapi.Operation](t, b.send(req), http.StatusCreated)
	})

	t.Run("ErrTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		big := strings.Replace(operationBody("op-1", "account-a"), `"Bug"`, `"`+strings.Repeat("x", 2<<20)+`"`, 1)
		p := problemOf(t, b.do(http.MethodPost, "/v1/operations", big), http.StatusRequestEntityTooLarge)
		if !strings.Contains(p.Detail, "1048576") {
			t.Fatalf("detail: got %q, want the limit", p.Detail)
		}
		// RFC 9110 §15.5.14 names 413 "Content Too Large"; the instance
		// is the request's path.
		if p.Title != "Content Too Large" || p.Instance != "/v1/operations" {
			t.Fatalf("title, instance: got %q, %q, want Content Too Large, /v1/operations", p.Title, p.Instance)
		}
		assertNoOperations(t, b)
	})

	t.Run("OKBodyBase64", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		body := `{"operationId":"op-csv","providerScope":"account-a",
			"request":{"method":"PUT","path":"/upload","headers":{"content-type":"text/csv"},"bodyBase64":"YSxiCjEsMgo="}}`
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", body), http.StatusCreated)
		if op.Request.BodyBase64 == nil || *op.Request.BodyBase64 != "YSxiCjEsMgo=" || op.Request.Body != nil {
			t.Fatalf("request body: got %+v, want bodyBase64 YSxiCjEsMgo=", op.Request)
		}
		if got, want := op.Request.Headers["Content-Type"], "text/csv"; got != want {
			t.Fatalf("content type: got %q, want %q", got, want)
		}
		if got, want := op.Kind, "mutation"; got != want {
			t.Fatalf("kind: got %q, want %q", got, want)
		}
		// A read, by default from its method, not before a future time.
		body = `{"operationId":"op-read","providerScope":"account-a","notBefore":"2026-09-11T03:00:00Z",
			"request":{"method":"GET","path":"/repos/acme/app"}}`
		op = decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations", body), http.StatusCreated)
		if got, want := op.Kind, "read"; got != want {
			t.Fatalf("kind: got %q, want %q", got, want)
		}
		if want := testNow.Add(time.Hour); op.NextAttemptAt == nil || !op.NextAttemptAt.Equal(want) {
			t.Fatalf("nextAttemptAt: got %v, want %v", op.NextAttemptAt, want)
		}
		if got, want := op.RequestIdentity, "op-read"; got != want {
			t.Fatalf("requestIdentity: got %q, want %q", got, want)
		}
	})
}

func TestEnqueue_MaxBodyBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{MaxBodyBytes: 1024})
	putScope(t, b, "account-a")
	body := strings.Replace(operationBody("op-1", "account-a"), `"Bug"`, `"`+strings.Repeat("x", 1500)+`"`, 1)
	problemOf(t, b.do(http.MethodPost, "/v1/operations", body), http.StatusRequestEntityTooLarge)
	// One operation of a batch has the same bound, and the problem names
	// it; nothing of the batch is stored.
	small := strings.Join(strings.Fields(operationBody("op-2", "account-a")), " ")
	p := problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", `{"operations":[`+small+`,`+body+`]}`), http.StatusRequestEntityTooLarge)
	if len(p.Errors) != 1 || p.Errors[0].Field != "operations[1]" || !strings.Contains(p.Detail, "operations[1]") || !strings.Contains(p.Detail, "at most 1024 bytes") {
		t.Fatalf("problem: got %+v, want operations[1] named with the bound", p)
	}
	assertNoOperations(t, b)
	// The batch as a whole has its own, larger limit.
	items := make([]string, 4)
	for i := range items {
		items[i] = strings.Join(strings.Fields(operationBody(fmt.Sprintf("op-%d", i), "account-a")), " ")
	}
	whole := `{"operations":[` + strings.Join(items, ",") + `]}`
	if len(whole) <= 1024 {
		t.Fatalf("batch of %d bytes: the test wants one over one operation's bound", len(whole))
	}
	res := b.do(http.MethodPost, "/v1/operations/batch", whole)
	batch := decodeAs[httpapi.BatchResponse](t, res, http.StatusOK)
	for i, r := range batch.Results {
		if got, want := r.Status, http.StatusCreated; got != want {
			t.Fatalf("status of %d: got %d, want %d", i, got, want)
		}
	}
}

func TestEnqueueBatch(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enqueue(t, b, "op-existing", "account-a")
		conflicting := strings.Replace(operationBody("op-conflict", "account-a"), `"Bug"`, `"Other"`, 1)
		enqueue(t, b, "op-conflict", "account-a")
		body := `{"operations":[` + strings.Join([]string{
			operationBody("op-new", "account-a"),
			operationBody("op-existing", "account-a"),
			conflicting,
			operationBody("op-lost", "account-z"),
		}, ",") + `]}`
		res := decodeAs[httpapi.BatchResponse](t, b.do(http.MethodPost, "/v1/operations/batch", body), http.StatusOK)
		want := []struct {
			id     string
			status int
		}{{"op-new", 201}, {"op-existing", 200}, {"op-conflict", 409}, {"op-lost", 422}}
		if got, want := len(res.Results), len(want); got != want {
			t.Fatalf("results: got %d, want %d", got, want)
		}
		for i, w := range want {
			r := res.Results[i]
			if r.OperationID != w.id || r.Status != w.status {
				t.Fatalf("result %d: got %s %d, want %s %d", i, r.OperationID, r.Status, w.id, w.status)
			}
			if ok := w.status < 300; ok != (r.Operation != nil) || ok == (r.Problem != nil) {
				t.Fatalf("result %d: got operation %v, problem %v", i, r.Operation, r.Problem)
			}
			if r.Problem != nil && r.Problem.Status != w.status {
				t.Fatalf("result %d: problem status %d, want %d", i, r.Problem.Status, w.status)
			}
		}
		if !hasField(*res.Results[3].Problem, "providerScope", "") {
			t.Fatalf("unknown scope problem: got %+v", res.Results[3].Problem)
		}
		decodeAs[httpapi.Operation](t, b.do(http.MethodGet, "/v1/operations/op-new", ""), http.StatusOK)
		problemOf(t, b.do(http.MethodGet, "/v1/operations/op-lost", ""), http.StatusNotFound)
	})

	t.Run("ErrInvalidItem", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		bad := strings.Replace(operationBody("op-2", "account-a"), `"POST"`, `"BREW"`, 1)
		cred := strings.Replace(operationBody("op-3", "account-a"), `"Accept"`, `"Cookie": "session=1", "Accept"`, 1)
		body := `{"operations":[` + operationBody("op-1", "account-a") + `,` + bad + `,` + cred + `]}`
		p := problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", body), http.StatusUnprocessableEntity)
		if !hasField(p, "operations[1].request.method", "") {
			t.Fatalf("errors: got %+v, want operations[1].request.method", p.Errors)
		}
		if !hasField(p, "operations[2].request.headers.Cookie", "put credentials on the scope") {
			t.Fatalf("errors: got %+v, want operations[2].request.headers.Cookie", p.Errors)
		}
		assertNoOperations(t, b)

		// Parse-level problems are named the same way.
		bad = strings.Replace(operationBody("op-2", "account-a"), `"24h"`, `"forever"`, 1)
		body = `{"operations":[` + operationBody("op-1", "account-a") + `,` + bad + `]}`
		p = problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", body), http.StatusUnprocessableEntity)
		if !hasField(p, "operations[1].retry.maxElapsed", "") {
			t.Fatalf("errors: got %+v, want operations[1].retry.maxElapsed", p.Errors)
		}
		assertNoOperations(t, b)
	})

	t.Run("ErrSize", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		p := problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", `{"operations":[]}`), http.StatusUnprocessableEntity)
		if !hasField(p, "operations", "1 to 1000") {
			t.Fatalf("errors: got %+v, want operations", p.Errors)
		}
		items := make([]string, scheduler.MaxBatch+1)
		for i := range items {
			items[i] = fmt.Sprintf(`{"operationId":"op-%d","providerScope":"account-a","request":{"method":"GET","path":"/"}}`, i)
		}
		p = problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", `{"operations":[`+strings.Join(items, ",")+`]}`), http.StatusUnprocessableEntity)
		if !hasField(p, "operations", "1 to 1000") {
			t.Fatalf("errors: got %+v, want operations", p.Errors)
		}
		problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", `{"operations":[{"operationId":"op-1","extra":1}]}`), http.StatusBadRequest)
		assertNoOperations(t, b)
	})
}

func TestListOperations(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for i := range 3 {
		enqueue(t, b, fmt.Sprintf("op-a-%d", i), "account-a")
		b.clock.Add(time.Second)
	}
	enqueue(t, b, "op-b-0", "account-b")
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations/op-a-1/cancel", `{"reason":"not needed"}`), http.StatusOK)

	t.Run("OKFilters", func(t *testing.T) {
		list := decodeAs[httpapi.OperationList](t, b.do(http.MethodGet, "/v1/operations?providerScope=account-a", ""), http.StatusOK)
		if got, want := ids(list), "op-a-2,op-a-1,op-a-0"; got != want {
			t.Fatalf("providerScope filter: got %s, want %s", got, want)
		}
		if list.Next != nil {
			t.Fatalf("next: got %q, want null", *list.Next)
		}
		list = decodeAs[httpapi.OperationList](t, b.do(http.MethodGet, "/v1/operations?state=canceled", ""), http.StatusOK)
		if got, want := ids(list), "op-a-1"; got != want {
			t.Fatalf("state filter: got %s, want %s", got, want)
		}
	})
	t.Run("OKPages", func(t *testing.T) {
		var all []string
		path := "/v1/operations?limit=3"
		for range 3 {
			list := decodeAs[httpapi.OperationList](t, b.do(http.MethodGet, path, ""), http.StatusOK)
			all = append(all, ids(list))
			if list.Next == nil {
				break
			}
			path = "/v1/operations?limit=3&cursor=" + url.QueryEscape(*list.Next)
		}
		if got, want := strings.Join(all, "|"), "op-b-0,op-a-2,op-a-1|op-a-0"; got != want {
			t.Fatalf("pages: got %s, want %s", got, want)
		}
	})
	t.Run("ErrInvalidQuery", func(t *testing.T) {
		for _, q := range []string{"limit=abc", "limit=0x", "limit=5000", "state=sleeping"} {
			p := problemOf(t, b.do(http.MethodGet, "/v1/operations?"+q, ""), http.StatusUnprocessableEntity)
			if field, _, _ := strings.Cut(q, "="); !hasField(p, field, "") {
				t.Fatalf("%s: errors %+v, want field %s", q, p.Errors, field)
			}
		}
	})
}

// ids joins the operation IDs of a page.
func ids(list httpapi.OperationList) string {
	out := make([]string, len(list.Operations))
	for i, op := range list.Operations {
		out[i] = op.OperationID
	}
	return strings.Join(out, ",")
}

func TestOperationIDWithSlash(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const id = "sync/acme/72"
	putScope(t, b, "account-a")
	res := b.do(http.MethodPost, "/v1/operations", operationBody(id, "account-a"))
	decodeAs[httpapi.Operation](t, res, http.StatusCreated)
	if got, want := res.Header.Get("Location"), "/v1/operations/sync%2Facme%2F72"; got != want {
		t.Fatalf("Location: got %q, want %q", got, want)
	}

	op := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath(id, ""), ""), http.StatusOK)
	if got, want := op.OperationID, id; got != want {
		t.Fatalf("operationId: got %q, want %q", got, want)
	}
	decodeAs[httpapi.AttemptList](t, b.do(http.MethodGet, opPath(id, "/attempts"), ""), http.StatusOK)

	// Unescaped, the path names no route; the problem says how to escape.
	p := problemOf(t, b.do(http.MethodGet, "/v1/operations/"+id, ""), http.StatusNotFound)
	if !strings.Contains(p.Detail, "%2F") {
		t.Fatalf("detail: got %q, want a hint to escape '/' as %%2F", p.Detail)
	}
	// The last segment of an unescaped ID is never taken for an action.
	problemOf(t, b.do(http.MethodGet, "/v1/operations/sync/attempts", ""), http.StatusNotFound)

	op = decodeAs[httpapi.Operation](t, b.do(http.MethodPost, opPath(id, "/cancel"), `{"reason":"duplicate"}`), http.StatusOK)
	if got, want := op.State, "canceled"; got != want {
		t.Fatalf("state: got %q, want %q", got, want)
	}
	audit := decodeAs[httpapi.AuditList](t, b.do(http.MethodGet, opPath(id, "/audit"), ""), http.StatusOK)
	if got, want := len(audit.Audit), 1; got != want {
		t.Fatalf("audit entries: got %d, want %d", got, want)
	}
	// Other characters may be escaped too.
	decodeAs[httpapi.Operation](t, b.do(http.MethodGet, "/v1/operations/sync%2Facme%2F%37%32", ""), http.StatusOK)
}

func TestManualActions(t *testing.T) {
	t.Parallel()

	t.Run("ErrInvalidTransition", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enqueue(t, b, "op-1", "account-a")
		for _, tt := range []struct{ action, body string }{
			{"release", `{"reason":"retry it"}`},
			{"resolve", `{"outcome":"succeeded","reason":"checked"}`},
		} {
			p := problemOf(t, b.do(http.MethodPost, opPath("op-1", "/"+tt.action), tt.body), http.StatusConflict)
			if got, want := p.Type, httpapi.ProblemTypeInvalidTransition; got != want {
				t.Fatalf("%s type: got %q, want %q", tt.action, got, want)
			}
			if !strings.Contains(p.Detail, "scheduled") {
				t.Fatalf("%s detail: got %q, want the current state", tt.action, p.Detail)
			}
		}
		decodeAs[httpapi.Operation](t, b.do(http.MethodPost, opPath("op-1", "/cancel"), `{"reason":"stop"}`), http.StatusOK)
		for _, action := range []string{"cancel", "release", "resolve"} {
			body := `{"outcome":"failed","reason":"again"}`
			if action != "resolve" {
				body = `{"reason":"again"}`
			}
			problemOf(t, b.do(http.MethodPost, opPath("op-1", "/"+action), body), http.StatusConflict)
		}
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath("op-1", ""), ""), http.StatusOK)
		if got, want := op.State, "canceled"; got != want {
			t.Fatalf("state: got %q, want %q", got, want)
		}
		if op.NextAttemptAt != nil {
			t.Fatalf("nextAttemptAt: got %v, want null", op.NextAttemptAt)
		}
	})

	t.Run("ErrReasonRequired", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enqueue(t, b, "op-1", "account-a")
		for _, tt := range []struct{ action, body string }{
			{"cancel", ``},
			{"cancel", `{}`},
			{"release", `{"reason":""}`},
			{"resolve", `{"outcome":"failed"}`},
		} {
			p := problemOf(t, b.do(http.MethodPost, opPath("op-1", "/"+tt.action), tt.body), http.StatusUnprocessableEntity)
			if !hasField(p, "reason", "required") {
				t.Fatalf("%s %s: errors %+v, want reason", tt.action, tt.body, p.Errors)
			}
		}
		p := problemOf(t, b.do(http.MethodPost, opPath("op-1", "/resolve"), `{"outcome":"maybe","reason":"x"}`), http.StatusUnprocessableEntity)
		if !hasField(p, "outcome", "") {
			t.Fatalf("errors: got %+v, want outcome", p.Errors)
		}
		p = problemOf(t, b.do(http.MethodPost, opPath("op-1", "/release"), `{"at":"soon","reason":"x"}`), http.StatusUnprocessableEntity)
		if !hasField(p, "at", "RFC 3339") {
			t.Fatalf("errors: got %+v, want at", p.Errors)
		}
		problemOf(t, b.do(http.MethodPost, opPath("op-1", "/cancel"), `{"reason":"x","why":"y"}`), http.StatusBadRequest)
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath("op-1", ""), ""), http.StatusOK)
		if got, want := op.State, "scheduled"; got != want {
			t.Fatalf("state: got %q, want %q", got, want)
		}
		audit := decodeAs[httpapi.AuditList](t, b.do(http.MethodGet, opPath("op-1", "/audit"), ""), http.StatusOK)
		if got, want := len(audit.Audit), 0; got != want {
			t.Fatalf("audit entries: got %d, want %d", got, want)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, path := range []string{"", "/attempts", "/audit"} {
			p := problemOf(t, b.do(http.MethodGet, opPath("op-z", path), ""), http.StatusNotFound)
			if got, want := p.Detail, `no operation "op-z"`; got != want {
				t.Fatalf("detail: got %q, want %q", got, want)
			}
		}
		problemOf(t, b.do(http.MethodPost, opPath("op-z", "/cancel"), `{"reason":"x"}`), http.StatusNotFound)
		problemOf(t, b.do(http.MethodPost, opPath("op-z", "/release"), `{"reason":"x"}`), http.StatusNotFound)
		problemOf(t, b.do(http.MethodPost, opPath("op-z", "/resolve"), `{"outcome":"failed","reason":"x"}`), http.StatusNotFound)
	})

	t.Run("OKHeld", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enqueue(t, b, "op-1", "account-a")
		enqueue(t, b, "op-2", "account-a")
		holdAll(t, b, 2)

		op := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath("op-1", ""), ""), http.StatusOK)
		if op.State != "held" || op.HoldReason == nil || *op.HoldReason != "unknownOutcome" || !op.MaybeApplied {
			t.Fatalf("got state %q hold %v maybeApplied %v, want held for unknownOutcome, maybe applied", op.State, op.HoldReason, op.MaybeApplied)
		}
		if op.LastOutcome == nil || op.LastOutcome.Class != "unknownOutcome" || op.LastOutcome.Status == nil || *op.LastOutcome.Status != 502 {
			t.Fatalf("lastOutcome: got %+v, want unknownOutcome 502", op.LastOutcome)
		}
		if op.LastOutcome.Hint == nil || op.LastOutcome.Hint.Source != "retry-after" || op.LastOutcome.Hint.Raw != "abc" {
			t.Fatalf("hint: got %+v, want retry-after abc", op.LastOutcome.Hint)
		}
		attempts := decodeAs[httpapi.AttemptList](t, b.do(http.MethodGet, opPath("op-1", "/attempts"), ""), http.StatusOK)
		if got, want := len(attempts.Attempts), 1; got != want {
			t.Fatalf("attempts: got %d, want %d", got, want)
		}
		a := attempts.Attempts[0]
		if a.Number != 1 || a.Class == nil || *a.Class != "unknownOutcome" || a.DurationMs == nil || *a.DurationMs != 1500 ||
			a.Decision == nil || a.Decision.State != "held" || a.Stale {
			t.Fatalf("attempt: got %+v", a)
		}

		// Release at a later time; the request identity stays.
		at := b.svc.Now().Add(time.Hour)
		op = decodeAs[httpapi.Operation](t, b.do(http.MethodPost, opPath("op-1", "/release"),
			`{"at":"`+at.Format(time.RFC3339)+`","reason":"provider confirmed nothing happened"}`), http.StatusOK)
		if op.State != "scheduled" || op.NextAttemptAt == nil || !op.NextAttemptAt.Equal(at) || op.HoldReason != nil || !op.MaybeApplied {
			t.Fatalf("released: got state %q at %v hold %v maybeApplied %v (a release keeps it)", op.State, op.NextAttemptAt, op.HoldReason, op.MaybeApplied)
		}
		if got, want := op.RequestIdentity, "original-operation-request"; got != want {
			t.Fatalf("requestIdentity: got %q, want %q", got, want)
		}

		op = decodeAs[httpapi.Operation](t, b.do(http.MethodPost, opPath("op-2", "/resolve"),
			`{"outcome":"succeeded","reason":"issue exists at the provider"}`), http.StatusOK)
		if got, want := op.State, "succeeded"; got != want || op.MaybeApplied {
			t.Fatalf("resolved: got %q maybeApplied %v, want %q and settled", got, op.MaybeApplied, want)
		}
		audit := decodeAs[httpapi.AuditList](t, b.do(http.MethodGet, opPath("op-2", "/audit"), ""), http.StatusOK)
		if got, want := len(audit.Audit), 1; got != want {
			t.Fatalf("audit entries: got %d, want %d", got, want)
		}
		e := audit.Audit[0]
		if e.Action != "resolve" || e.Actor != httpapi.ActorAPI || e.Reason != "issue exists at the provider" || e.At == nil || !e.At.Equal(b.svc.Now()) {
			t.Fatalf("audit entry: got %+v", e)
		}
	})
}

// holdAll claims n due operations through the store and completes each
// attempt as an unknown outcome, so the operations are held.
func holdAll(t *testing.T, b *testBundle, n int) {
	t.Helper()
	completeDue(t, b, n,
		providers.Outcome{
			Class: providers.ClassUnknownOutcome, Status: 502, Reason: "ambiguous-5xx", Detail: "bad gateway",
			Hint: providers.Hint{Source: "retry-after", Raw: "abc", Note: "not a number"},
		},
		scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "mutation may have been applied", MaybeApplied: true})
}

// completeDue claims n due operations through the store, as the engine
// would, and completes each attempt 1.5s after its claim with out and dec.
// The scope's rate limit spaces claims, so the clock moves on a second
// whenever nothing is admitted.
func completeDue(t *testing.T, b *testBundle, n int, out providers.Outcome, dec scheduler.Decision) {
	t.Helper()
	ctx := context.Background()
	for tries := 0; n > 0; tries++ {
		if tries == 20 {
			t.Fatalf("claim: %d operations never admitted", n)
		}
		claims, err := b.store.ClaimDue(ctx, scheduler.ClaimParams{Now: b.svc.Now(), Limit: n, LeaseFor: time.Minute})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(claims) == 0 {
			b.clock.Add(time.Second)
			continue
		}
		finished := b.svc.Now().Add(1500 * time.Millisecond)
		cs := make([]scheduler.Completion, len(claims))
		for i, c := range claims {
			cs[i] = scheduler.Completion{
				OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt,
				FinishedAt: finished, Outcome: out, Decision: dec,
			}
		}
		applied, err := b.store.Complete(ctx, cs)
		if err != nil {
			t.Fatalf("complete: %v", err)
		}
		for i, ok := range applied {
			if !ok {
				t.Fatalf("completion %d not applied", i)
			}
		}
		n -= len(claims)
	}
}

func TestGetOperation_Result(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	succeed := func(id string, res scheduler.Result) httpapi.Operation {
		t.Helper()
		enqueue(t, b, id, "account-a")
		completeDue(t, b, 1, providers.Outcome{Class: providers.ClassSuccess, Status: res.Status},
			scheduler.Decision{State: scheduler.StateSucceeded, Reason: "created", Result: &res})
		return decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath(id, ""), ""), http.StatusOK)
	}

	op := succeed("op-json", scheduler.Result{Status: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"id":1}`)})
	if op.State != "succeeded" || op.Result == nil || op.Result.Status != 201 || string(op.Result.Body) != `{"id":1}` || op.Result.BodyBase64 != nil {
		t.Fatalf("result: got %+v", op.Result)
	}
	if op.NextAttemptAt != nil {
		t.Fatalf("nextAttemptAt: got %v, want null", op.NextAttemptAt)
	}
	op = succeed("op-text", scheduler.Result{Status: 200, Body: []byte("plain text"), Truncated: true})
	if op.Result == nil || op.Result.Body != nil || op.Result.BodyBase64 == nil || *op.Result.BodyBase64 != "cGxhaW4gdGV4dA==" || !op.Result.Truncated {
		t.Fatalf("result: got %+v", op.Result)
	}
	if op.Result.Headers == nil {
		t.Fatalf("result headers: got null, want {}")
	}
}
