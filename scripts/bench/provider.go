package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// providerLifetime bounds how long a provider process lives even if its
// parent never closes its stdin.
const providerLifetime = 30 * time.Minute

// runProvider is the "provider" subcommand: an HTTP server on 127.0.0.1
// answering 200 {"ok":true} at once. It prints its URL on stdout and exits
// when stdin closes or after providerLifetime. It records the lateness of
// requests carrying dueHeader, served at GET /lateness and cleared by
// POST /lateness/reset.
func runProvider() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "provider: listen:", err)
		os.Exit(1)
	}
	body := []byte(`{"ok":true}`)
	var late latenessRecorder
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrival := time.Now()
		if late.serve(w, r) {
			return
		}
		late.observe(arrival, r.Header.Get(dueHeader))
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "11")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("http://%s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	go func() {
		time.Sleep(providerLifetime)
		os.Exit(0)
	}()
	_ = srv.Serve(ln)
}

// providerProc is a running provider child.
type providerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startProvider re-executes this binary as the provider and waits for its URL.
func startProvider() (*providerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.Command(self, "provider")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("pipe provider stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("pipe provider stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start provider: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("read provider address: %w", err)
	}
	return &providerProc{cmd: cmd, stdin: stdin, url: strings.TrimSpace(line)}, nil
}

// stop closes the provider's stdin (it exits) and reaps it.
func (p *providerProc) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// newHTTPClient is the client every system's workers share: keep-alive
// connections enough for all workers.
func newHTTPClient(workers int) *http.Client {
	tr := &http.Transport{
		MaxIdleConns:        workers * 2,
		MaxIdleConnsPerHost: workers * 2,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// sendOne does the HTTP call every system makes per operation; a due time
// (Unix ms) other than 0 goes in dueHeader, for the lateness runs.
func sendOne(c *http.Client, url string, due int64) error {
	req, err := http.NewRequest(http.MethodPost, url+"/x", strings.NewReader(`{"n":1}`))
	if err != nil {
		return fmt.Errorf("make request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if due != 0 {
		req.Header.Set(dueHeader, strconv.FormatInt(due, 10))
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("send request: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("send request: status %d", resp.StatusCode)
	}
	return nil
}
