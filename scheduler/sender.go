package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"pacer/providers"
)

// classifyBodyLimit bounds how much of a response body a profile reads.
const classifyBodyLimit = 64 << 10

// sendResult is what one send produced.
type sendResult struct {
	exchange  providers.Exchange
	result    *Result
	redirects redirects
}

// maxPooledRead bounds the capacity of a read buffer the sender keeps for
// the next answer; a larger one (an answer longer than a profile reads) is
// left to the collector.
const maxPooledRead = classifyBodyLimit + 1

// sender sends the attempts of one engine: over its client, copied once so
// that it follows no redirect itself (send follows them), bounding stored
// answers to resultLimit and naming itself userAgent. It reads answers into
// reused buffers; it is safe for concurrent use.
type sender struct {
	client      *http.Client
	resultLimit int
	userAgent   string
	reads       sync.Pool // of *[]byte, each of length 0
}

// newSender returns the sender of attempts over client.
func newSender(client *http.Client, resultLimit int, userAgent string) *sender {
	cl := *client
	cl.CheckRedirect = useLastResponse
	return &sender{client: &cl, resultLimit: resultLimit, userAgent: userAgent}
}

// useLastResponse keeps net/http from following redirects: the sender
// follows them itself (redirectRule), with pacer's rules for bodies,
// identity and credentials.
func useLastResponse(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// send performs one attempt of c over s's client and reads the answer. It never
// returns an error: transport failures are part of the exchange, with
// Written telling whether any of the request may have left. Redirects are
// followed here, within the scope's origin, by redirectRule (design §12),
// all under ctx's one deadline; the profile classifies only the final
// answer. Everything the provider said (headers, body, a transport error's
// text) goes through red before anything reads or cuts it: the profile, its
// diagnostics and the stored result only ever see the redacted answer.
func (s *sender) send(ctx context.Context, c Claim, profile providers.Profile, red *redactor) sendResult {
	op, sc := c.Operation, c.Scope
	ex := providers.Exchange{Method: op.Request.Method, Mutation: op.Kind == KindMutation}
	var written atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { written.Store(true) },
		WroteRequest:     func(httptrace.WroteRequestInfo) { written.Store(true) },
	}
	ctx = httptrace.WithClientTrace(ctx, trace)
	target, err := url.Parse(sc.BaseURL + op.Request.Path)
	if err != nil {
		ex.Err = fmt.Errorf("build request: %w", err)
		return sendResult{exchange: ex}
	}
	origin := originOf(target)
	var rd redirects
	method, payload, ctype := op.Request.Method, op.Request.Body, op.Request.ContentType
	var resp *http.Response
	for {
		req, err := buildRequest(ctx, c, profile, target, method, payload, ctype, s.userAgent)
		if err != nil {
			ex.Err = fmt.Errorf("build request: %w", err)
			return sendResult{exchange: ex, redirects: rd}
		}
		ex.Method, ex.IdempotencyKeySent = method, profile.Idempotency().Applies(method)
		written.Store(false)
		resp, err = s.client.Do(req)
		if err != nil {
			ex.Err = red.Error(err)
			ex.Written = written.Load()
			return sendResult{exchange: ex, redirects: rd}
		}
		step := redirectRule(resp, op.Kind, method, payload, target, origin, len(rd.hops))
		if !step.follow {
			rd.verdict = step.verdict
			break
		}
		discard(resp)
		rd.hops = append(rd.hops, hop{status: resp.StatusCode, method: method, to: red.String(showURL(step.next))})
		if step.method != method {
			ctype = "" // a 303 read is fetched with GET, without the body
		}
		target, method, payload = step.next, step.method, step.body
	}
	defer resp.Body.Close()
	var hadSecret bool
	resp.Header, hadSecret = red.Header(resp.Header)
	resp.Trailer = nil
	resp.Status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	limit := max(s.resultLimit, classifyBodyLimit)
	read, readErr := s.read(resp.Body, limit+1)
	cutShort := len(read) > limit
	if readErr != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The provider answered 2xx but the body broke off: the effect
		// happened; keep what arrived and say so.
		cutShort = true
	}
	answer := red.String(read)
	if cutShort {
		answer = red.trimPartial(answer)
	}
	classified, kept := red.bound(answer, classifyBodyLimit), red.bound(answer, s.resultLimit)
	ex.Response, ex.Body = resp, []byte(classified)
	res := &Result{Status: resp.StatusCode, Headers: resultHeaders(resp.Header, red, !hadSecret), Body: ex.Body}
	if kept != classified { // nothing writes to either: equal bodies share their bytes
		res.Body = []byte(kept)
	}
	res.Truncated = cutShort || len(res.Body) < len(answer)
	return sendResult{exchange: ex, result: res, redirects: rd}
}

// read reads body to its end, or to its first n bytes, into a buffer it
// reuses, and returns what it read as text; err is the read's error (io.EOF
// is none). For a body that hands over what it holds before its error, as
// net/http's do, that is what io.ReadAll(io.LimitReader(body, n)) reads;
// only the sizes of the reads differ.
func (s *sender) read(body io.Reader, n int) (string, error) {
	bp, _ := s.reads.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := *bp
	var err error
	for len(b) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, max(512, cap(b))) // room doubles
		}
		var k int
		k, err = body.Read(b[len(b):min(cap(b), n)])
		b = b[:len(b)+k]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			break
		}
	}
	text := string(b)
	if cap(b) <= maxPooledRead {
		*bp = b[:0]
		s.reads.Put(bp)
	}
	return text, err
}

// buildRequest is one request of c's attempt: method and body to target,
// with the operation's headers, contentType if any, its request identity
// where the profile sends one for method, and the scope's credentials. Only targets on the
// scope's origin are ever built (redirectRule follows no other), so the
// credentials never leave it.
func buildRequest(ctx context.Context, c Claim, profile providers.Profile, target *url.URL, method string, payload []byte, contentType, userAgent string) (*http.Request, error) {
	op := c.Operation
	var body io.Reader
	if len(payload) > 0 {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range op.Request.Headers {
		req.Header.Set(k, v)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", userAgent)
	if idem := profile.Idempotency(); idem.Applies(method) {
		req.Header.Set(idem.Header, op.RequestIdentity)
	}
	authorize(req, c.Scope.Credentials)
	return req, nil
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
	case CredentialOAuth2, CredentialGitHubApp:
		if c.AccessToken != "" { // set by the token keeper (sendRenewing)
			req.Header.Set("Authorization", "Bearer "+c.AccessToken)
		}
	}
}

// resultHeaders keeps the response headers worth showing, without cookies
// or anything carrying the scope's secrets, bounded in count and size.
// clean says that no value of h holds a secret (redactor.Header found
// none): a header of one value is then only cut, as redacting it would
// change nothing; values joined may still spell one, and are redacted.
func resultHeaders(h http.Header, red *redactor, clean bool) map[string]string {
	out := make(map[string]string, min(len(h), 64))
	for k, v := range h {
		if len(out) >= 64 {
			break
		}
		switch k {
		case "Set-Cookie", "Authorization", "Proxy-Authenticate", "Www-Authenticate":
			continue
		}
		if clean && len(v) == 1 {
			out[k] = red.bound(v[0], 1024)
		} else {
			out[k] = red.Cut(strings.Join(v, ", "), 1024)
		}
	}
	return out
}
