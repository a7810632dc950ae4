package scheduler

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"

	"pacer/providers"
)

// classifyBodyLimit bounds how much of a response body a profile reads.
const classifyBodyLimit = 64 << 10

// sendResult is what one send produced.
type sendResult struct {
	exchange providers.Exchange
	result   *Result
}

// send performs one attempt of c over client and reads the answer. It never
// returns an error: transport failures are part of the exchange, with
// Written telling whether any of the request may have left.
func send(ctx context.Context, client *http.Client, c Claim, profile providers.Profile, resultLimit int, userAgent string) sendResult {
	op, sc := c.Operation, c.Scope
	ex := providers.Exchange{Method: op.Request.Method, Mutation: op.Kind == KindMutation}
	var written atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { written.Store(true) },
		WroteRequest:     func(httptrace.WroteRequestInfo) { written.Store(true) },
	}
	ctx = httptrace.WithClientTrace(ctx, trace)
	var body io.Reader
	if len(op.Request.Body) > 0 {
		body = bytes.NewReader(op.Request.Body)
	}
	req, err := http.NewRequestWithContext(ctx, op.Request.Method, sc.BaseURL+op.Request.Path, body)
	if err != nil {
		ex.Err = fmt.Errorf("build request: %w", err)
		return sendResult{exchange: ex}
	}
	for k, v := range op.Request.Headers {
		req.Header.Set(k, v)
	}
	if op.Request.ContentType != "" {
		req.Header.Set("Content-Type", op.Request.ContentType)
	}
	req.Header.Set("User-Agent", userAgent)
	if idem := profile.Idempotency(); idem.Applies(op.Request.Method) {
		req.Header.Set(idem.Header, op.RequestIdentity)
		ex.IdempotencyKeySent = true
	}
	authorize(req, sc.Credentials)

	resp, err := client.Do(req)
	if err != nil {
		ex.Err = err
		ex.Written = written.Load()
		return sendResult{exchange: ex}
	}
	defer resp.Body.Close()
	limit := max(resultLimit, classifyBodyLimit)
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	truncated := len(raw) > limit
	if truncated {
		raw = raw[:limit]
	}
	ex.Response, ex.Body = resp, raw[:min(len(raw), classifyBodyLimit)]
	if readErr != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The provider answered 2xx but the body broke off: the effect
		// happened; keep what arrived and say so.
		truncated = true
	}
	res := &Result{Status: resp.StatusCode, Headers: resultHeaders(resp.Header, sc.Credentials)}
	res.Body = redactBytes(raw[:min(len(raw), resultLimit)], sc.Credentials)
	res.Truncated = truncated || len(raw) > resultLimit
	return sendResult{exchange: ex, result: res}
}

// authorize adds the scope's credentials to req.
func authorize(req *http.Request, c Credentials) {
	switch c.Type {
	case CredentialBearer:
		req.Header.Set("Authorization", "Bearer "+c.Token)
	case CredentialHeader:
		req.Header.Set(c.Name, c.Value)
	case CredentialBasic:
		req.SetBasicAuth(c.Username, c.Password)
	}
}

// resultHeaders keeps the response headers worth showing, without cookies
// or anything carrying the scope's secrets, bounded in count and size.
func resultHeaders(h http.Header, c Credentials) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if len(out) >= 64 {
			break
		}
		switch k {
		case "Set-Cookie", "Authorization", "Proxy-Authenticate", "Www-Authenticate":
			continue
		}
		val := strings.Join(v, ", ")
		if len(val) > 1024 {
			val = val[:1024]
		}
		out[k] = redact(val, c)
	}
	return out
}

// redact replaces every secret of c in s.
func redact(s string, c Credentials) string {
	for _, secret := range c.Secrets() {
		s = strings.ReplaceAll(s, secret, "[redacted]")
		if c.Type == CredentialBasic {
			basic := base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password))
			s = strings.ReplaceAll(s, basic, "[redacted]")
		}
	}
	return s
}

func redactBytes(b []byte, c Credentials) []byte {
	for _, secret := range c.Secrets() {
		if bytes.Contains(b, []byte(secret)) {
			b = bytes.ReplaceAll(b, []byte(secret), []byte("[redacted]"))
		}
	}
	return b
}
