package scheduler

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	reportCPU(b)
	for range b.N {
		sr := s.send(ctx, c, profile, red)
		if sr.result == nil || sr.result.Status != 200 {
			b.Fatalf("send: %+v", sr.exchange.Err)
		}
	}
}

// cannedHeader is a provider's answer header as real ones come: rate-limit
// headers, an id, caching and transport headers.
var cannedHeader = http.Header{
	"Date":                      {"Wed, 02 Dec 2026 06:00:00 GMT"},
	"Content-Type":              {"application/json; charset=utf-8"},
	"Content-Length":            {"11"},
	"Cache-Control":             {"private, max-age=60, s-maxage=60"},
	"Vary":                      {"Accept, Authorization, Cookie", "Accept-Encoding"},
	"Etag":                      {`W/"a1b2c3d4e5f6"`},
	"X-Ratelimit-Limit":         {"5000"},
	"X-Ratelimit-Remaining":     {"4987"},
	"X-Ratelimit-Reset":         {"1796191200"},
	"X-Ratelimit-Resource":      {"core"},
	"X-Request-Id":              {"CAFE:1234:5678:9ABC"},
	"Strict-Transport-Security": {"max-age=31536000; includeSubdomains; preload"},
	"Server":                    {"provider.example"},
}

// cannedTransport answers every request at once from memory with
// cannedHeader and a small JSON body, as a fresh response each time (as
// net/http's transport does): it takes the network out of the send
// benchmarks, so what remains is the client's own cost.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	body := `{"ok":true}`
	return &http.Response{
		Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: cannedHeader.Clone(), Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}, nil
}

// BenchmarkSendCanned is one send against cannedTransport: "pacer" is
// BenchmarkSend's attempt, "bare" the same request built by hand and its
// answer read and dropped. The difference is pacer's client cost without
// the loopback's noise.
func BenchmarkSendCanned(b *testing.B) {
	client := &http.Client{Transport: cannedTransport{}}
	creds := Credentials{Type: CredentialBearer, Token: "secret-token-value"}
	ctx := context.Background()
	b.Run("pacer", func(b *testing.B) {
		c := Claim{
			Operation: Operation{ID: "op", Kind: KindMutation, RequestIdentity: "op", Request: Request{Method: "POST", Path: "/x", Body: []byte(`{"n":1}`), ContentType: "application/json", Headers: map[string]string{"Accept": "application/json"}}},
			Scope:     Scope{ScopeConfig: ScopeConfig{Name: "s", Provider: "generic", BaseURL: "http://provider.example", Credentials: creds}},
		}
		profile := providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"})
		red := newRedactor(creds)
		s := newSender(client, DefaultResultLimit, "pacer")
		b.ReportAllocs()
		reportCPU(b)
		for range b.N {
			sr := s.send(ctx, c, profile, red)
			if sr.result == nil || sr.result.Status != 200 {
				b.Fatalf("send: %+v", sr.exchange.Err)
			}
		}
	})
	b.Run("bare", func(b *testing.B) {
		payload := []byte(`{"n":1}`)
		b.ReportAllocs()
		reportCPU(b)
		for range b.N {
			req, err := http.NewRequestWithContext(ctx, "POST", "http://provider.example/x", bytes.NewReader(payload))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", "pacer")
			req.Header.Set("Idempotency-Key", "op")
			req.Header.Set("Authorization", "Bearer "+creds.Token)
			bareRoundTrip(b, client, req)
		}
	})
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
		reportCPU(b)
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
		reportCPU(b)
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
