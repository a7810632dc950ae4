package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"

	"pacer/httpapi"
	"pacer/internal/pacertest"
	"pacer/metrics"
	"pacer/scheduler"
)

// loadOpenAPI loads and validates the embedded document and returns it
// with a router over its paths.
func loadOpenAPI(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPIDocument())
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the OpenAPI document is invalid: %v", err)
	}
	doc.Servers = nil // match paths on any test server's address
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return doc, router
}

// apiEnv is a server with every optional route (metrics, a failing
// readiness probe on demand) over a real store, with an engine and a
// stand-in provider to bring operations into every state.
type apiEnv struct {
	t        *testing.T
	url      string
	clock    *clock.Mock
	svc      *scheduler.Service
	engine   *scheduler.Engine
	handler  http.Handler
	notReady bool
}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	store := pacertest.OpenStore(t)
	mock := clock.NewMock()
	mock.Set(testNow)
	sched, err := scheduler.New(store, mock, scheduler.Config{Engine: scheduler.EngineConfig{Random: func() float64 { return 0.5 }}})
	if err != nil {
		t.Fatal(err)
	}
	svc, engine := sched.Service, sched.Engine
	meter, err := metrics.New(metrics.Config{Counts: store, Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	env := &apiEnv{t: t, clock: mock, svc: svc, engine: engine}
	srv, err := httpapi.New(httpapi.Config{
		Service: svc, Token: testToken, Logger: slog.New(slog.DiscardHandler), Metrics: meter.Handler(),
		Ready: func(context.Context) error {
			if env.notReady {
				return errors.New("the test says so")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env.handler = srv.Handler()
	ts := httptest.NewServer(env.handler)
	t.Cleanup(ts.Close)
	env.url = ts.URL
	return env
}

// provider answers by path: /ok 200 with JSON, /limited 429 with a
// Retry-After, /reject 400 with a JSON error, /uncertain 500 with HTML.
func newStandInProvider(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":7}`)
		case "/limited":
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/reject":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"message":"Validation Failed","errors":[{"resource":"Label","code":"already_exists","field":"name"}]}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "<html>busy</html>")
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// exchange is one request sent to the server and validated.
type exchange struct {
	method, path, body string
	status             int
	// noToken sends the request without the API token.
	noToken bool
	// contentType replaces application/json.
	contentType string
	// validRequest also validates the request against the document.
	validRequest bool
}

// TestOpenAPI validates real responses of every route, success and
// problem, against the embedded OpenAPI document, and checks that the
// document and the router list the same routes.
func TestOpenAPI(t *testing.T) {
	doc, router := loadOpenAPI(t)
	env := newAPIEnv(t)
	provider := newStandInProvider(t)

	// covered[route][class] records what was seen: "2xx" and "problem".
	covered := map[string]map[string]bool{}
	send := func(t *testing.T, x exchange) []byte {
		t.Helper()
		build := func() *http.Request {
			var rd io.Reader
			if x.body != "" {
				rd = strings.NewReader(x.body)
			}
			req, err := http.NewRequest(x.method, env.url+x.path, rd)
			if err != nil {
				t.Fatal(err)
			}
			if x.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if x.contentType != "" {
				req.Header.Set("Content-Type", x.contentType)
			}
			if !x.noToken {
				req.Header.Set("Authorization", "Bearer "+testToken)
			}
			return req
		}
		res, err := http.DefaultClient.Do(build())
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != x.status {
			t.Fatalf("%s %s: status %d, want %d: %s", x.method, x.path, res.StatusCode, x.status, body)
		}
		req := build()
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s: not in the OpenAPI document: %v", x.method, x.path, err)
		}
		in := &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		}
		if x.validRequest {
			if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
				t.Fatalf("%s %s: the request does not match the document: %v", x.method, x.path, err)
			}
		}
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		out.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Fatalf("%s %s → %d: the response does not match the document: %v\n%s", x.method, x.path, res.StatusCode, err, body)
		}
		key := x.method + " " + route.Path
		if covered[key] == nil {
			covered[key] = map[string]bool{}
		}
		class := "problem"
		if res.StatusCode < 300 {
			class = "2xx"
		}
		covered[key][class] = true
		return body
	}
	run := func(name string, xs ...exchange) {
		t.Run(name, func(t *testing.T) {
			for _, x := range xs {
				send(t, x)
			}
		})
	}
	get := func(path string, status int) exchange { return exchange{method: "GET", path: path, status: status} }
	post := func(path, body string, status int) exchange {
		return exchange{method: "POST", path: path, body: body, status: status, validRequest: status < 300}
	}
	put := func(path, body string, status int) exchange {
		return exchange{method: "PUT", path: path, body: body, status: status, validRequest: status < 300}
	}
	enqueue := func(id, method, path string) string {
		return fmt.Sprintf(`{"operationId":%q,"providerScope":"acct","request":{"method":%q,"path":%q,"headers":{"Accept":"application/json"},"body":{"n":1}},"retry":{"maxAttempts":3,"maxElapsed":"1h"}}`, id, method, path)
	}

	run("Health",
		get("/healthz", 200),
		get("/readyz", 200),
		exchange{method: "GET", path: "/v1/openapi.json", status: 200, noToken: true},
		get("/metrics", 200),
		exchange{method: "GET", path: "/metrics", status: 401, noToken: true},
		get("/v1/providers", 200),
		exchange{method: "GET", path: "/v1/providers", status: 401, noToken: true},
	)
	env.notReady = true
	run("NotReady", get("/readyz", 503))
	env.notReady = false

	run("Scopes",
		put("/v1/scopes/acct", fmt.Sprintf(`{"provider":"generic","baseURL":%q,"credentials":{"type":"bearer","token":"%s"},"maxConcurrent":4,"rateLimit":{"requests":100,"per":"1m"}}`, provider, secretBearer), 201),
		put("/v1/scopes/acct", fmt.Sprintf(`{"provider":"generic","baseURL":%q,"credentials":{"type":"header","name":"X-Key","value":"%s"}}`, provider, secretHeader), 200),
		put("/v1/scopes/other", fmt.Sprintf(`{"provider":"github","baseURL":"https://api.github.com","credentials":{"type":"basic","username":"u","password":"%s"},"idempotencyHeader":""}`, secretPassword), 201),
		put("/v1/scopes/bad", `{"provider":"nope","baseURL":"ftp://x"}`, 422),
		put("/v1/scopes/bad", `{"provider":`, 400),
		exchange{method: "PUT", path: "/v1/scopes/bad", body: "x", contentType: "text/plain", status: 415},
		get("/v1/scopes", 200),
		exchange{method: "GET", path: "/v1/scopes", status: 401, noToken: true},
		get("/v1/scopes/acct", 200),
		get("/v1/scopes/missing", 404),
		post("/v1/scopes/acct/resume", `{"reason":"checked"}`, 200),
		post("/v1/scopes/acct/resume", `{}`, 422),
		post("/v1/scopes/missing/resume", `{"reason":"checked"}`, 404),
		post("/v1/scopes/acct/pause", `{"until":"2099-01-01T00:00:00Z","reason":"maintenance"}`, 422),
		post("/v1/scopes/missing/pause", `{"until":"`+testNow.Add(time.Hour).UTC().Format(time.RFC3339)+`","reason":"maintenance"}`, 404),
		post("/v1/scopes/acct/pause", `{"until":"`+testNow.Add(time.Hour).UTC().Format(time.RFC3339)+`","reason":"maintenance"}`, 200),
		post("/v1/scopes/acct/resume", `{"reason":"maintenance over"}`, 200),
	)

	// limited-1 is due a second after the others: its 429 pauses the
	// scope at once for the engine's other workers too, so a request of
	// the scope leased beside it would not be sent (it would wait for the
	// pause), and the others are to be sent.
	limited := fmt.Sprintf(`{"operationId":"limited-1","providerScope":"acct","notBefore":%q,"request":{"method":"GET","path":"/limited","headers":{"Accept":"application/json"}},"retry":{"maxAttempts":3,"maxElapsed":"1h"}}`,
		env.clock.Now().Add(time.Second).UTC().Format(time.RFC3339))
	run("Enqueue",
		post("/v1/operations", enqueue("ok-1", "GET", "/ok"), 201),
		post("/v1/operations", enqueue("ok-1", "GET", "/ok"), 200),
		post("/v1/operations", enqueue("ok-1", "GET", "/other"), 409),
		post("/v1/operations", `{"operationId":"x","providerScope":"missing","request":{"method":"GET","path":"/"}}`, 422),
		post("/v1/operations", `{"operationId":"x","providerScope":"acct","request":{"method":"GET","path":"/"},"extra":1}`, 400),
		post("/v1/operations", `{"operationId":"x","providerScope":"acct","request":{"method":"GET","path":"/"},"notBefore":"9999-12-31T23:59:59Z"}`, 422),
		post("/v1/operations/batch", `{"operations":[`+limited+`,`+enqueue("reject-1", "POST", "/reject")+`,`+
			enqueue("uncertain-1", "POST", "/uncertain")+`,`+enqueue("later-1", "POST", "/ok")+`,`+enqueue("ok-1", "GET", "/other")+`,`+
			`{"operationId":"y","providerScope":"missing","request":{"method":"GET","path":"/"}}]}`, 200),
		post("/v1/operations/batch", `{"operations":[]}`, 422),
		post("/v1/operations/batch", `[]`, 400),
	)
	// Cancel later-1 before the engine runs, then run everything: ok-1
	// succeeds, reject-1 fails, uncertain-1 is held for unknownOutcome;
	// a second later limited-1 waits for budget.
	run("Cancel", post("/v1/operations/later-1/cancel", `{"reason":"not needed"}`, 200))
	for range 2 {
		if _, err := env.engine.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		env.engine.Wait()
		env.clock.Add(time.Second)
	}

	run("Operations",
		get("/v1/operations", 200),
		get("/v1/operations?state=held&providerScope=acct&reason=unknownOutcome&limit=2", 200),
		get("/v1/operations?createdAfter=2026-09-11T00:00:00Z&createdBefore=2026-09-12T00:00:00Z&updatedAfter=2026-09-11T00:00:00Z&updatedBefore=2026-09-12T00:00:00Z&limit=1", 200),
		get("/v1/operations?state=nope&createdAfter=yesterday", 422),
		get("/v1/operations/ok-1", 200),
		get("/v1/operations/limited-1", 200),
		get("/v1/operations/reject-1", 200),    // lastOutcome.response with a JSON body
		get("/v1/operations/uncertain-1", 200), // and with another (bodyBase64)
		get("/v1/operations/missing", 404),
		get("/v1/operations/ok-1/attempts", 200),
		get("/v1/operations/limited-1/attempts", 200),
		get("/v1/operations/uncertain-1/attempts", 200),
		get("/v1/operations/reject-1/attempts", 200),
		get("/v1/operations/missing/attempts", 404),
		get("/v1/operations/later-1/audit", 200),
		get("/v1/operations/missing/audit", 404),
		post("/v1/operations/reject-1/release", `{"reason":"fixed the payload","at":"2026-09-11T03:00:00Z"}`, 200),
		post("/v1/operations/reject-1/release", `{"reason":"a later window","at":"2026-09-11T04:00:00Z"}`, 200),
		post("/v1/operations/reject-1/unrelease", `{}`, 422),
		post("/v1/operations/reject-1/unrelease", `{"reason":"not after all"}`, 200),
		post("/v1/operations/reject-1/unrelease", `{"reason":"again"}`, 409),
		post("/v1/operations/missing/unrelease", `{"reason":"x"}`, 404),
		post("/v1/operations/reject-1/release", `{"reason":"fixed the payload","at":"2026-09-11T03:00:00Z"}`, 200),
		post("/v1/operations/ok-1/release", `{"reason":"again"}`, 409),
		post("/v1/operations/missing/release", `{"reason":"again"}`, 404),
		post("/v1/operations/ok-1/release", `{}`, 422),
		post("/v1/operations/ok-1/release", `{"reason":"much later","at":"9999-12-31T23:59:59Z"}`, 422),
		post("/v1/operations/uncertain-1/resolve", `{"outcome":"succeeded","reason":"found it"}`, 200),
		post("/v1/operations/uncertain-1/resolve", `{"outcome":"succeeded","reason":"again"}`, 409),
		post("/v1/operations/uncertain-1/resolve", `{"outcome":"maybe","reason":"x"}`, 422),
		post("/v1/operations/missing/resolve", `{"outcome":"failed","reason":"x"}`, 404),
		post("/v1/operations/bulk", `{"action":"cancel","filter":{},"reason":"x"}`, 422),
		post("/v1/operations/bulk", `{"action":"release","filter":{"state":"failed","providerScope":"nope"},"reason":"provider fixed"}`, 200),
		post("/v1/operations/ok-1/cancel", `{"reason":"too late"}`, 409),
		post("/v1/operations/missing/cancel", `{"reason":"x"}`, 404),
		exchange{method: "POST", path: "/v1/operations/ok-1/cancel", body: `{"reason":`, status: 400},
	)

	run("Changes",
		get("/v1/changes", 200),
		get("/v1/changes?after=3&limit=2&providerScope=acct", 200),
		get("/v1/changes?after=3&wait=0s", 200),
		get("/v1/changes?after=1000&wait=0s", 409),
		get("/v1/changes?after=-1&wait=soon", 422),
	)

	t.Run("EveryRouteCovered", func(t *testing.T) {
		var missing []string
		for path, item := range doc.Paths.Map() {
			for method := range item.Operations() {
				key := method + " " + path
				c := covered[key]
				if !c["2xx"] {
					missing = append(missing, key+" (success)")
				}
				if path != "/healthz" && path != "/v1/openapi.json" && !c["problem"] {
					missing = append(missing, key+" (problem)")
				}
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Fatalf("responses not validated:\n%s", strings.Join(missing, "\n"))
		}
	})

	t.Run("RouterAndDocumentAgree", func(t *testing.T) {
		var inRouter, inDoc []string
		err := chi.Walk(env.handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			if !strings.HasPrefix(route, "/ui") && route != "/" {
				inRouter = append(inRouter, method+" "+strings.TrimSuffix(route, "/"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for path, item := range doc.Paths.Map() {
			for method := range item.Operations() {
				inDoc = append(inDoc, method+" "+path)
			}
		}
		sort.Strings(inRouter)
		sort.Strings(inDoc)
		inRouter = slices.Compact(inRouter)
		if got, want := strings.Join(inRouter, "\n"), strings.Join(inDoc, "\n"); got != want {
			t.Fatalf("router routes:\n%s\n\ndocument operations:\n%s", got, want)
		}
	})
}

// TestOpenAPIServed checks GET /v1/openapi.json: the embedded document,
// as JSON, without a token.
func TestOpenAPIServed(t *testing.T) {
	b := setup(t, setupOpts{})
	req := b.request(http.MethodGet, "/v1/openapi.json", "")
	req.Header.Del("Authorization")
	res := b.send(req)
	if res.Status != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", res.Status, res.Header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(res.Body, &doc); err != nil || doc.OpenAPI != "3.1.0" || !bytes.Equal(res.Body, httpapi.OpenAPIDocument()) {
		t.Fatalf("openapi %q, err %v", doc.OpenAPI, err)
	}
}
