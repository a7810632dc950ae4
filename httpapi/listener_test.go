package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"pacer/httpapi"
)

// rawRequest writes req to the server at addr as is and reads the answer.
func rawRequest(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

// TestProblemListener checks that the requests net/http refuses before
// any handler runs (an invalid escape in the path, oversized headers) are
// answered with a problem document, and that other answers pass through.
func TestProblemListener(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	srv, err := httpapi.New(httpapi.Config{Service: b.svc, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener = httpapi.ProblemListener(ts.Listener)
	ts.Config.MaxHeaderBytes = 4096
	ts.Start()
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	auth := "Authorization: Bearer " + testToken + "\r\n"

	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"InvalidEscape", "GET /v1/operations/%ZZ HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", http.StatusBadRequest},
		{"TruncatedEscape", "GET /v1/operations/op%2 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", http.StatusBadRequest},
		{"HeadersTooLarge", "GET /v1/operations HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<16) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := rawRequest(t, addr, tc.req)
			if got, want := res.StatusCode, tc.status; got != want {
				t.Fatalf("status: got %d, want %d; body %s", got, want, body)
			}
			if got, want := res.Header.Get("Content-Type"), "application/problem+json"; got != want {
				t.Fatalf("Content-Type: got %q, want %q; body %s", got, want, body)
			}
			var p httpapi.Problem
			if err := json.Unmarshal(body, &p); err != nil || p.Status != tc.status || p.Detail == "" {
				t.Fatalf("problem: %v %+v from %s", err, p, body)
			}
		})
	}
	t.Run("OtherAnswersUntouched", func(t *testing.T) {
		res, body := rawRequest(t, addr, "GET /v1/operations/op%25ZZ HTTP/1.1\r\nHost: x\r\n"+auth+"Connection: close\r\n\r\n")
		var p httpapi.Problem
		if res.StatusCode != http.StatusNotFound || json.Unmarshal(body, &p) != nil || !strings.Contains(p.Detail, `"op%ZZ"`) {
			t.Fatalf("got %d %s, want the handler's 404 naming op%%ZZ", res.StatusCode, body)
		}
		res, body = rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "ok") {
			t.Fatalf("healthz: %d %s", res.StatusCode, body)
		}
	})
}
