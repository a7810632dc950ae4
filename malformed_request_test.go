package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"pacer/httpapi"
)

// TestServeAnswersMalformedPathsWithProblems checks, with the real binary,
// that a request net/http refuses before any handler (an invalid escape
// in the path) is still answered with a problem document.
func TestServeAnswersMalformedPathsWithProblems(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	startPacer(t, filepath.Join(t.TempDir(), "pacer.db"), addr)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /v1/operations/%ZZ HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var p httpapi.Problem
	if res.StatusCode != http.StatusBadRequest || res.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(body, &p) != nil || p.Status != http.StatusBadRequest {
		t.Fatalf("got %d %s %s, want a 400 problem", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
}
