package scheduler

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"pacer/providers"
)

// TestSenderReadMatchesReadAll checks that the sender's reused read buffer
// reads exactly what io.ReadAll(io.LimitReader(r, n)) reads: the same
// bytes, the same error, and nothing of r past the bound, for readers that
// hand over what they hold before their error (as net/http's bodies do;
// the read sizes differ). One sender reads every case in turn, so a reused
// buffer that kept an earlier answer's bytes would show.
func TestSenderReadMatchesReadAll(t *testing.T) {
	s := newSender(http.DefaultClient, DefaultResultLimit, "pacer")
	broken := errors.New("connection reset")
	readers := map[string]func(data []byte) io.Reader{
		"whole":    func(d []byte) io.Reader { return bytes.NewReader(d) },
		"one-byte": func(d []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(d)) },
		"half":     func(d []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(d)) },
		"data-eof": func(d []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(d)) },
		"broken":   func(d []byte) io.Reader { return io.MultiReader(bytes.NewReader(d), iotest.ErrReader(broken)) },
		"last-with-error": func(d []byte) io.Reader {
			return failLast{iotest.DataErrReader(bytes.NewReader(d)), broken}
		},
	}
	sizes := []int{0, 1, 511, 512, 513, 4096, maxPooledRead - 1, maxPooledRead, maxPooledRead + 1, 3 * maxPooledRead}
	bounds := []int{1, 512, 513, maxPooledRead, 2*maxPooledRead + 7}
	for name, reader := range readers {
		for _, size := range sizes {
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
			if size > 0 {
				data[size-1] = byte('A' + size%26)
			}
			for _, n := range bounds {
				want, wantErr := io.ReadAll(io.LimitReader(reader(data), int64(n)))
				r := reader(data)
				got, gotErr := s.read(r, n)
				if got != string(want) || gotErr != wantErr {
					t.Fatalf("%s, %d bytes, bound %d: read %d bytes, %v; want %d bytes, %v", name, size, n, len(got), gotErr, len(want), wantErr)
				}
				if name == "whole" {
					rest, _ := io.ReadAll(r)
					if len(got)+len(rest) != size {
						t.Fatalf("%s, %d bytes, bound %d: read %d and left %d, want nothing read past the bound", name, size, n, len(got), len(rest))
					}
				}
			}
		}
	}
}

// TestSendBoundsTheAnswer checks the body bounds of one send: the profile
// reads at most classifyBodyLimit bytes, the result keeps at most the
// result limit and says when it is cut, and a 2xx whose body breaks off is
// kept as far as it arrived, marked truncated.
func TestSendBoundsTheAnswer(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Has("break") {
			w.Header().Set("Content-Length", strconv.Itoa(n+100))
		}
		w.Write(bytes.Repeat([]byte("x"), n))
	}))
	defer provider.Close()
	creds := Credentials{Type: CredentialBearer, Token: "secret-token-value"}
	profile := providers.NewGeneric(providers.Options{})
	red := newRedactor(creds)
	cases := []struct {
		resultLimit, n     int
		brk                bool
		classified, kept   int
		truncated, sharing bool
	}{
		{resultLimit: MinResultLimit, n: 0, classified: 0, kept: 0, sharing: true},
		{resultLimit: MinResultLimit, n: 700, classified: 700, kept: 700, sharing: true},
		{resultLimit: MinResultLimit, n: MinResultLimit, classified: MinResultLimit, kept: MinResultLimit, sharing: true},
		{resultLimit: MinResultLimit, n: MinResultLimit + 1, classified: MinResultLimit + 1, kept: MinResultLimit, truncated: true},
		{resultLimit: MinResultLimit, n: classifyBodyLimit, classified: classifyBodyLimit, kept: MinResultLimit, truncated: true},
		{resultLimit: MinResultLimit, n: classifyBodyLimit + 1, classified: classifyBodyLimit, kept: MinResultLimit, truncated: true},
		{resultLimit: classifyBodyLimit, n: classifyBodyLimit, classified: classifyBodyLimit, kept: classifyBodyLimit, sharing: true},
		{resultLimit: classifyBodyLimit, n: classifyBodyLimit + 1, classified: classifyBodyLimit, kept: classifyBodyLimit, truncated: true, sharing: true},
		{resultLimit: 3 * classifyBodyLimit, n: 2 * classifyBodyLimit, classified: classifyBodyLimit, kept: 2 * classifyBodyLimit},
		{resultLimit: 3 * classifyBodyLimit, n: 3 * classifyBodyLimit, classified: classifyBodyLimit, kept: 3 * classifyBodyLimit},
		{resultLimit: 3 * classifyBodyLimit, n: 3*classifyBodyLimit + 1, classified: classifyBodyLimit, kept: 3 * classifyBodyLimit, truncated: true},
		{resultLimit: MinResultLimit, n: 700, brk: true, classified: 700, kept: 700, truncated: true, sharing: true},
		{resultLimit: MinResultLimit, n: 100, classified: 100, kept: 100, sharing: true}, // after a large answer
	}
	for _, c := range cases {
		s := newSender(provider.Client(), c.resultLimit, "pacer")
		path := "/x?n=" + strconv.Itoa(c.n)
		if c.brk {
			path += "&break"
		}
		claim := Claim{
			Operation: Operation{ID: "op", Kind: KindRead, Request: Request{Method: "GET", Path: path}},
			Scope:     Scope{ScopeConfig: ScopeConfig{Name: "s", Provider: "generic", BaseURL: provider.URL, Credentials: creds}},
		}
		for range 2 { // the second send reads into the first's buffer
			sr := s.send(context.Background(), claim, profile, red)
			res := sr.result
			if res == nil {
				t.Fatalf("%+v: no result: %v", c, sr.exchange.Err)
			}
			if len(sr.exchange.Body) != c.classified || len(res.Body) != c.kept || res.Truncated != c.truncated {
				t.Fatalf("%+v: profile read %d bytes, kept %d, truncated %v; want %d, %d, %v", c, len(sr.exchange.Body), len(res.Body), res.Truncated, c.classified, c.kept, c.truncated)
			}
			if strings.Trim(string(res.Body), "x") != "" || strings.Trim(string(sr.exchange.Body), "x") != "" {
				t.Fatalf("%+v: bodies hold bytes the provider did not send", c)
			}
			if shared := len(res.Body) > 0 && &res.Body[0] == &sr.exchange.Body[0]; shared != (c.sharing && c.kept > 0) {
				t.Fatalf("%+v: result and exchange share their body: %v, want %v", c, shared, c.sharing)
			}
		}
	}
}

// TestRedactorHeader checks that Header redacts every value, never changes
// the header it is given, and copies it only when a value holds a secret.
func TestRedactorHeader(t *testing.T) {
	red := newRedactor(Credentials{Type: CredentialBearer, Token: "secret-token-value"})
	clean := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"abc", "def"}}
	if got, had := red.Header(clean); had || got == nil || &got["X-Request-Id"][0] != &clean["X-Request-Id"][0] || got.Get("Content-Type") != "application/json" {
		t.Fatalf("clean header: got %v, %v, want the header itself", got, had)
	}
	echo := http.Header{"Content-Type": {"application/json"}, "X-Echo": {"ok", "Bearer secret-token-value"}}
	got, had := red.Header(echo)
	if want := "Bearer " + red.mark; got["X-Echo"][0] != "ok" || got["X-Echo"][1] != want || got.Get("Content-Type") != "application/json" || len(got) != 2 || !had {
		t.Fatalf("echoed secret: got %v, %v, want it redacted", got, had)
	}
	if echo["X-Echo"][1] != "Bearer secret-token-value" {
		t.Fatalf("Header changed the header it was given: %v", echo)
	}
	if got, had := red.Header(nil); got != nil || had {
		t.Fatalf("nil header: got %v", got)
	}
}

// failLast is a reader whose end is err instead of io.EOF.
type failLast struct {
	r   io.Reader
	err error
}

func (f failLast) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = f.err
	}
	return n, err
}

// TestResultHeadersRedact checks resultHeaders' redaction: a value is
// redacted unless the caller says no value holds a secret, and values
// joined into one are redacted even then, as they may spell one together.
func TestResultHeadersRedact(t *testing.T) {
	red := newRedactor(Credentials{Type: CredentialBearer, Token: "left, right-1234"})
	split := http.Header{"X-Echo": {"left", "right-1234"}, "X-Id": {"abc"}}
	if _, had := red.Header(split); had {
		t.Fatal("a value alone spells the secret; the test needs it split")
	}
	got := resultHeaders(split, red, true)
	if want := red.mark; got["X-Echo"] != want || got["X-Id"] != "abc" {
		t.Fatalf("secret split over two values: got %v, want X-Echo %s", got, want)
	}
	raw := http.Header{"X-Echo": {"token left, right-1234"}}
	if got := resultHeaders(raw, red, false); got["X-Echo"] != "token "+red.mark {
		t.Fatalf("unredacted header: got %v, want X-Echo redacted", got)
	}
}
