package scheduler_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"pacer/httpapi"
	"pacer/scheduler"
)

// echoProvider answers with the credentials it received, in every
// spelling of scheduler.Echoes, in headers and body; the path picks the
// status and the shape.
func echoProvider(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var values []string
		if user, pass, ok := r.BasicAuth(); ok {
			values = append(values, pass, user+":"+pass)
		} else if v := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); v != "" {
			values = append(values, v)
		} else {
			values = append(values, r.Header.Get("X-Key"))
		}
		var body strings.Builder
		for i, v := range values {
			encs := scheduler.Echoes(v)
			names := make([]string, 0, len(encs))
			for n := range encs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				w.Header().Set(fmt.Sprintf("X-Echo-%d-%s", i, n), encs[n])
				fmt.Fprintf(&body, "%s=%s\n", n, encs[n])
			}
		}
		w.Header().Set("Www-Authenticate-Echo", r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, body.String())
		case "/ok-cut": // the stored result's bound falls inside the secret
			fmt.Fprint(w, strings.Repeat("x", 4096-10)+values[0]+" after")
		case "/bad":
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, body.String())
		case "/bad-cut": // the diagnostic's 512-byte bound falls inside the secret
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, strings.Repeat("x", 512-6)+values[0]+" after")
		case "/busy": // the secret as a timing hint, quoted by the decision
			w.Header().Set("Retry-After", values[0])
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, body.String())
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEchoedSecretsAreNeverStored: a provider echoing a scope's
// credentials (every type, every spelling, in headers and bodies, across
// the bounds where texts are cut) gets none of them into the stored
// attempts, the operation's result or its lastOutcome.
func TestEchoedSecretsAreNeverStored(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{ResultLimit: 4096})
	prov := echoProvider(t)
	secret := scheduler.TestSecret
	creds := map[string]scheduler.Credentials{
		"bearer": {Type: scheduler.CredentialBearer, Token: secret},
		"header": {Type: scheduler.CredentialHeader, Name: "X-Key", Value: secret},
		"basic":  {Type: scheduler.CredentialBasic, Username: "ann", Password: secret},
	}
	paths := []string{"/ok", "/ok-cut", "/bad", "/bad-cut", "/busy"}
	ctx := context.Background()
	for name, c := range creds {
		if _, _, err := h.svc.PutScope(ctx, scheduler.ScopeInput{Name: name, Provider: "generic", BaseURL: prov.URL, Credentials: c}, "test"); err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			h.enqueue(scheduler.OperationInput{ID: name + strings.ReplaceAll(p, "/", "-"), Scope: name, Method: "GET", Path: p})
		}
	}
	claimed := 0
	for n := h.pass(); n > 0; n = h.pass() {
		claimed += n
	}
	if claimed != len(creds)*len(paths) {
		t.Fatalf("claimed %d, want %d", claimed, len(creds)*len(paths))
	}
	forbidden := map[string]string{}
	for enc, e := range scheduler.Echoes(secret) {
		forbidden["secret/"+enc] = e
	}
	for enc, e := range scheduler.Echoes("ann:" + secret) {
		forbidden["ann:secret/"+enc] = e
	}
	redactions := 0
	for name := range creds {
		for _, p := range paths {
			id := name + strings.ReplaceAll(p, "/", "-")
			op := h.op(id)
			attempts, err := h.store.ListAttempts(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			answer := func(res *scheduler.Result) {
				if res != nil {
					texts = append(texts, string(res.Body))
					for k, v := range res.Headers {
						texts = append(texts, k+": "+v)
					}
				}
			}
			answer(op.Result)
			if lo := op.LastOutcome; lo != nil {
				answer(lo.Response)
				texts = append(texts, lo.Reason, lo.Detail)
				if lo.Hint != nil {
					texts = append(texts, lo.Hint.Raw, lo.Hint.Note)
				}
			}
			texts = append(texts, string(op.FailureReason))
			for _, a := range attempts {
				answer(a.Response)
				texts = append(texts, a.Reason, a.Detail, a.Decision)
				if a.Hint != nil {
					texts = append(texts, a.Hint.Raw, a.Hint.Note)
				}
			}
			all := strings.Join(texts, "\n")
			redactions += strings.Count(all, "[redacted]")
			for enc, e := range forbidden {
				if strings.Contains(all, e) {
					t.Errorf("%s: %s of the secret stored: %q", id, enc, e)
				}
				if len(e) >= 8 && strings.Contains(all, e[:8]) {
					t.Errorf("%s: the start of %s of the secret stored (%q)", id, enc, e[:8])
				}
			}
		}
	}
	if redactions < len(creds)*len(paths) {
		t.Fatalf("only %d redactions: the provider's echoes did not reach the store", redactions)
	}

	// What the API and the support page serve of them (a token-less server
	// on loopback: the page is open).
	api, err := httpapi.New(httpapi.Config{Service: h.svc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	check := func(label, text string) {
		t.Helper()
		for enc, e := range forbidden {
			if strings.Contains(text, e) {
				t.Errorf("%s serves %s of the secret", label, enc)
			}
		}
	}
	served := 0
	for name := range creds {
		for _, p := range paths {
			id := name + strings.ReplaceAll(p, "/", "-")
			for _, path := range []string{"/v1/operations/" + id, "/v1/operations/" + id + "/attempts", "/v1/operations?providerScope=" + name, "/ui/operations/" + id} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
				}
				served += strings.Count(string(body), "[redacted]")
				check("GET "+path, string(body))
				check("GET "+path+" (unescaped)", html.UnescapeString(string(body)))
				var doc any
				if json.Unmarshal(body, &doc) == nil {
					walkStrings(doc, func(s string) {
						check("GET "+path+" (decoded)", s)
						if b, err := base64.StdEncoding.DecodeString(s); err == nil {
							check("GET "+path+" (base64-decoded)", string(b))
						}
					})
				}
			}
		}
	}
	if served == 0 {
		t.Fatal("no redaction served: the checks saw none of the echoes")
	}
}

// walkStrings calls fn with every string in a decoded JSON document.
func walkStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	case map[string]any:
		for k, e := range x {
			fn(k)
			walkStrings(e, fn)
		}
	}
}
