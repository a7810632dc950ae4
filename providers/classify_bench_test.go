package providers_test

import (
	"net/http"
	"testing"

	"pacer/providers"
)

// BenchmarkClassify measures one classification per op for the answers the
// engine sees most: a success with rate-limit headers, a 429 with a
// Retry-After, a primary rate limit with a reset epoch, and a 5xx on a
// mutation sent with an idempotency key (examples from providers.md).
//
//	go test -run='^$' -bench=Classify -count=10 ./providers/
func BenchmarkClassify(b *testing.B) {
	cases := []struct {
		name     string
		provider string
		ex       exchange
	}{
		{"github/200-budget", "github", exchange{status: 200, header: header(
			"Date", httpDate(now), "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4987",
			"X-RateLimit-Used", "13", "X-RateLimit-Reset", "1789095600", "X-RateLimit-Resource", "core")}},
		{"github/403-primary", "github", exchange{status: 403, header: header(
			"Date", httpDate(now), "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "1789095600"), body: `{"message":"API rate limit exceeded"}`}},
		{"stripe/429-retry-after", "stripe", exchange{method: http.MethodPost, key: true, status: 429, header: header(
			"Date", httpDate(now), "Retry-After", "2"), body: `{"error":{"type":"rate_limit_error"}}`}},
		{"stripe/500-keyed", "stripe", exchange{method: http.MethodPost, key: true, status: 500, header: header(
			"Date", httpDate(now)), body: `{"error":{"type":"api_error"}}`}},
		{"generic/200", "generic", exchange{status: 200, header: header("Date", httpDate(now))}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p, err := providers.Lookup(c.provider, providers.Options{})
			if err != nil {
				b.Fatal(err)
			}
			ex := c.ex.build()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if out := p.Classify(ex); out.Class == "" {
					b.Fatal("no class")
				}
			}
		})
	}
}
