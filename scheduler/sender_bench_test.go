package scheduler

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"pacer/providers"
)

// benchProvider is the provider of the send benchmarks: it answers 200
// with a small JSON body at once.
func benchProvider(b *testing.B) *httptest.Server {
	b.Helper()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	b.Cleanup(provider.Close)
	return provider
}

// benchClient is the engine's default client, the one both benchmarks use.
func benchClient(b *testing.B) *http.Client {
	b.Helper()
	cfg := EngineConfig{}
	if err := cfg.applyDefaults(); err != nil {
		b.Fatal(err)
	}
	return cfg.Client
}

// BenchmarkSend measures one attempt's send on the client side — building
// the request, the round trip over loopback, reading and redacting the
// answer — against a provider that answers 200 at once. Compare it with
// BenchmarkSendBare in the same run. Run:
// go test -run=^$ -bench=Send -benchmem ./scheduler/
func BenchmarkSend(b *testing.B) {
	provider := benchProvider(b)
	client := benchClient(b)
	creds := Credentials{Type: CredentialBearer, Token: "secret-token-value"}
	c := Claim{
		Operation: Operation{ID: "op", Kind: KindMutation, RequestIdentity: "op", Request: Request{Method: "POST", Path: "/x", Body: []byte(`{"n":1}`), ContentType: "application/json", Headers: map[string]string{"Accept": "application/json"}}},
		Scope:     Scope{ScopeConfig: ScopeConfig{Name: "s", Provider: "generic", BaseURL: provider.URL, Credentials: creds}},
	}
	profile := providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"})
	red := newRedactor(creds)
	s := newSender(client, DefaultResultLimit, "pacer")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sr := s.send(ctx, c, profile, red)
		if sr.result == nil || sr.result.Status != 200 {
			b.Fatalf("send: %+v", sr.exchange.Err)
		}
	}
}

// BenchmarkSendBare is the floor under BenchmarkSend: the same client and
// provider with nothing of pacer's around the round trip. "get" is a bare
// GET; "post" is BenchmarkSend's request (method, body, headers) built by
// hand, its body read and dropped.
func BenchmarkSendBare(b *testing.B) {
	provider := benchProvider(b)
	client := benchClient(b)
	ctx := context.Background()
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			req, err := http.NewRequestWithContext(ctx, "GET", provider.URL+"/x", nil)
			if err != nil {
				b.Fatal(err)
			}
			bareRoundTrip(b, client, req)
		}
	})
	b.Run("post", func(b *testing.B) {
		payload := []byte(`{"n":1}`)
		b.ReportAllocs()
		for range b.N {
			req, err := http.NewRequestWithContext(ctx, "POST", provider.URL+"/x", bytes.NewReader(payload))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", "pacer")
			req.Header.Set("Idempotency-Key", "op")
			req.Header.Set("Authorization", "Bearer secret-token-value")
			bareRoundTrip(b, client, req)
		}
	})
}

// bareRoundTrip sends req over client and reads and drops the answer.
func bareRoundTrip(b *testing.B, client *http.Client, req *http.Request) {
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("bare: %d %v", resp.StatusCode, err)
	}
}
