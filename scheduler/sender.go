package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
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
// Written telling whether any of the request may have left. Everything the
// provider said (headers, body, a transport error's text) goes through red
// before anything reads or cuts it: the profile, its diagnostics and the
// stored result only ever see the redacted answer.
func send(ctx context.Context, client *http.Client, c Claim, profile providers.Profile, red *redactor, resultLimit int, userAgent string) sendResult {
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
		ex.Err = red.Error(err)
		ex.Written = written.Load()
		return sendResult{exchange: ex}
	}
	defer resp.Body.Close()
	resp.Header, resp.Trailer = red.Header(resp.Header), nil
	resp.Status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	limit := max(resultLimit, classifyBodyLimit)
	read, readErr := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	cutShort := len(read) > limit
	if readErr != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The provider answered 2xx but the body broke off: the effect
		// happened; keep what arrived and say so.
		cutShort = true
	}
	answer := red.String(string(read))
	if cutShort {
		answer = red.trimPartial(answer)
	}
	ex.Response, ex.Body = resp, []byte(red.bound(answer, classifyBodyLimit))
	res := &Result{Status: resp.StatusCode, Headers: resultHeaders(resp.Header, red)}
	res.Body = []byte(red.bound(answer, resultLimit))
	res.Truncated = cutShort || len(res.Body) < len(answer)
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
func resultHeaders(h http.Header, red *redactor) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if len(out) >= 64 {
			break
		}
		switch k {
		case "Set-Cookie", "Authorization", "Proxy-Authenticate", "Www-Authenticate":
			continue
		}
		out[k] = red.Cut(strings.Join(v, ", "), 1024)
	}
	return out
}
