package scheduler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"pacer/providers"
)

// BenchmarkSend measures one attempt's send on the client side — building
// the request, the round trip over loopback, reading and redacting the
// answer — against a provider that answers 200 at once. Run:
// go test -run=^$ -bench=Send -benchmem ./scheduler/
func BenchmarkSend(b *testing.B) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer provider.Close()
	cfg := EngineConfig{}
	if err := cfg.applyDefaults(); err != nil {
		b.Fatal(err)
	}
	creds := Credentials{Type: CredentialBearer, Token: "secret-token-value"}
	c := Claim{
		Operation: Operation{ID: "op", Kind: KindMutation, RequestIdentity: "op", Request: Request{Method: "POST", Path: "/x", Body: []byte(`{"n":1}`), ContentType: "application/json", Headers: map[string]string{"Accept": "application/json"}}},
		Scope:     Scope{ScopeConfig: ScopeConfig{Name: "s", Provider: "generic", BaseURL: provider.URL, Credentials: creds}},
	}
	profile := providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"})
	red := newRedactor(creds)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sr := send(ctx, cfg.Client, c, profile, red, DefaultResultLimit, "pacer")
		if sr.result == nil || sr.result.Status != 200 {
			b.Fatalf("send: %+v", sr.exchange.Err)
		}
	}
}
