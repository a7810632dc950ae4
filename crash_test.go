package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pacer/internal/pgtest"
)

// The real binary, for the tests that need one (SIGKILL, signals, the
// process lock across processes, exit codes and what the process prints):
// built on first use by pacerBin, with the race detector when the tests
// run with it; binDir holds it.
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

func TestMain(m *testing.M) {
	// A developer's PACER_* settings must not steer the serves and commands
	// the tests run in this process (the binary gets envWithoutPacer).
	for _, kv := range os.Environ() {
		// (pgtest's own variable, naming a server for the tests, stays.)
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PACER_") && name != pgtest.EnvURL {
			os.Unsetenv(name)
		}
	}
	dir, err := os.MkdirTemp("", "pacer-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := pgtest.Main(m) // m.Run, then stops the PostgreSQL server a test started
	os.RemoveAll(dir)
	os.Exit(code)
}

// pacerBin returns the path of the pacer binary, building it on the first
// call.
func pacerBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(binDir, "pacer")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, ".")...)
		if out, err := build.CombinedOutput(); err != nil {
			binError = fmt.Errorf("build pacer: %v\n%s", err, out)
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// effectLog is a provider stand-in that applies each mutation it receives
// and remembers every request, so tests can count effects and keys.
type effectLog struct {
	mu       sync.Mutex
	requests []seenRequest
	effects  map[string]int // effect key → times applied
	hang     chan struct{}  // requests to /hang wait on it (bounded)
	arrived  chan string    // path of every arrival, for tests to wait on
}

type seenRequest struct {
	Path, Method, Key, Body string
	At                      time.Time
}

func newEffectLog() *effectLog {
	return &effectLog{effects: map[string]int{}, hang: make(chan struct{}), arrived: make(chan string, 1000)}
}

func (l *effectLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	l.requests = append(l.requests, seenRequest{Path: r.URL.Path, Method: r.Method, Key: key, Body: string(body), At: time.Now()})
	// A provider with idempotency applies a key once; without, every
	// request is an effect.
	effect := r.URL.Path + "#" + string(body)
	if key != "" {
		effect = r.URL.Path + "#key:" + key
	}
	first := l.effects[effect] == 0
	if r.Method != http.MethodGet && (key == "" || first) {
		l.effects[effect]++
	}
	l.mu.Unlock()
	l.arrived <- r.URL.Path
	if strings.HasPrefix(r.URL.Path, "/hang") && first {
		select { // the first send hangs until the test lets go, or at most 30 s
		case <-l.hang:
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"ok":true,"path":%q}`, r.URL.Path)
}

func (l *effectLog) snapshot() []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenRequest(nil), l.requests...)
}

func (l *effectLog) waitArrivals(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-l.arrived:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d requests reached the provider", i, n)
		}
	}
}

// pacerProc is one running pacer serve: the binary (cmd), or the serve
// command in this process (shutdown stops it).
type pacerProc struct {
	cmd  *exec.Cmd
	base string
	logs *lockedBuffer
	// done receives what an in-process serve returned.
	done     chan cliResult
	cancel   context.CancelFunc
	stopOnce sync.Once
	result   cliResult
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveArgs are the serve command line of startPacer and startPacerBinary.
func serveArgs(dbPath, addr string, extra ...string) []string {
	return append([]string{"serve", "--db", dbPath, "--listen", addr, "--request-timeout", "20s", "--lease", "30s", "--log-level", "debug"}, extra...)
}

// startPacer runs pacer serve in this process (see launchServe).
func startPacer(t *testing.T, dbPath, addr string, extra ...string) *pacerProc {
	t.Helper()
	return launchServe(t, addr, serveArgs(dbPath, addr, extra...)...)
}

// startPacerBinary runs pacer serve as the real binary (see
// launchServeBinary), for a test that kills or signals it.
func startPacerBinary(t *testing.T, dbPath, addr string, extra ...string) *pacerProc {
	t.Helper()
	return launchServeBinary(t, addr, serveArgs(dbPath, addr, extra...)...)
}

// launchServe runs the command line args (a serve command listening on
// addr) in this process, as main would (newApp; Main underneath), its
// logs in p.logs, and waits until it is healthy. It is stopped when the
// test ends (or by shutdown); its logs are shown if the test failed.
func launchServe(t *testing.T, addr string, args ...string) *pacerProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &pacerProc{base: "http://" + addr, logs: &lockedBuffer{}, done: make(chan cliResult, 1), cancel: cancel}
	go func() { p.done <- runPacerWith(ctx, io.Discard, p.logs, "", args...) }()
	t.Cleanup(func() {
		p.shutdown()
		if t.Failed() {
			t.Logf("pacer logs:\n%s", p.logs.String())
		}
	})
	p.waitHealthy(t, args)
	return p
}

// launchServeBinary runs the pacer binary with args (a serve command
// listening on addr), without the caller's PACER_ variables, and waits
// until it is healthy. The process is killed when the test ends; its logs
// are shown if the test failed.
func launchServeBinary(t *testing.T, addr string, args ...string) *pacerProc {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := exec.Command(pacerBin(t), args...)
	cmd.Env = envWithoutPacer()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pacerProc{cmd: cmd, base: "http://" + addr, logs: logs}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("pacer logs:\n%s", logs.String())
		}
	})
	p.waitHealthy(t, args)
	return p
}

// waitHealthy waits until p answers /healthz (at most 20 s), failing the
// test when it does not or an in-process serve ended.
func (p *pacerProc) waitHealthy(t *testing.T, args []string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case r := <-p.done:
			p.done <- r
			t.Fatalf("pacer %v ended before it was healthy: exit %d: %s\n%s", args, r.code, r.msg, p.logs.String())
		default:
		}
		if resp, err := http.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	t.Fatalf("pacer %v did not become healthy:\n%s", args, p.logs.String())
}

// shutdown stops pacer as SIGTERM would and waits for it: the binary with
// the signal, an in-process serve by ending its context. It returns what
// serve returned (nil when it stopped cleanly).
func (p *pacerProc) shutdown() error {
	if p.cmd != nil {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		return p.cmd.Wait()
	}
	p.stopOnce.Do(func() {
		p.cancel()
		p.result = <-p.done
	})
	if p.result.code != 0 {
		return fmt.Errorf("exit %d: %s", p.result.code, p.result.msg)
	}
	return nil
}

func (p *pacerProc) kill9(t *testing.T) {
	t.Helper()
	if p.cmd == nil {
		t.Fatal("kill9 needs the binary: start it with startPacerBinary")
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

func (p *pacerProc) call(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return p.callAs(t, "", method, path, body)
}

// callAs is call with the bearer token given, when not empty.
func (p *pacerProc) callAs(t *testing.T, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (p *pacerProc) waitState(t *testing.T, id, want string) map[string]any {
	t.Helper()
	var op map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, op = p.call(t, "GET", "/v1/operations/"+id, nil)
		if op["state"] == want {
			return op
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("operation %s: state %v, want %s (%v)", id, op["state"], want, op)
	return nil
}

func putScope(t *testing.T, p *pacerProc, name, baseURL, idemHeader string) {
	t.Helper()
	body := map[string]any{"provider": "generic", "baseURL": baseURL, "maxConcurrent": 1,
		"credentials": map[string]any{"type": "bearer", "token": "tok-" + name}}
	if idemHeader != "" {
		body["idempotencyHeader"] = idemHeader
	}
	if st, out := p.call(t, "PUT", "/v1/scopes/"+name, body); st != 201 && st != 200 {
		t.Fatalf("put scope %s: %d %v", name, st, out)
	}
}

func enqueue(t *testing.T, p *pacerProc, op map[string]any) {
	t.Helper()
	if st, out := p.call(t, "POST", "/v1/operations", op); st != 201 {
		t.Fatalf("enqueue %v: %d %v", op["operationId"], st, out)
	}
}

// TestCrashDuringInFlightMutation kills pacer with SIGKILL while two
// mutations are in flight — one to a provider without idempotency keys,
// one to a provider with them — restarts it on the same database and checks
// invariants 2, 3, 4 and 7: no duplicated effect, the same key on the
// resend, the uncertain non-idempotent mutation held, and the dead worker's
// capacity back at once.
func TestCrashDuringInFlightMutation(t *testing.T) {
	t.Parallel()
	prov := newEffectLog()
	provider := httptest.NewServer(prov)
	defer provider.Close()
	defer close(prov.hang)
	dbPath := filepath.Join(t.TempDir(), "pacer.db")
	addr := freeAddr(t)

	p := startPacerBinary(t, dbPath, addr)
	putScope(t, p, "plain", provider.URL, "")
	putScope(t, p, "keyed", provider.URL, "Idempotency-Key")
	enqueue(t, p, map[string]any{"operationId": "pay-plain", "providerScope": "plain",
		"request": map[string]any{"method": "POST", "path": "/hang/plain", "body": map[string]any{"amount": 1}}})
	enqueue(t, p, map[string]any{"operationId": "pay-keyed", "providerScope": "keyed", "requestIdentity": "intent-42",
		"request": map[string]any{"method": "POST", "path": "/hang/keyed", "body": map[string]any{"amount": 2}}})
	prov.waitArrivals(t, 2)
	p.kill9(t)

	p = startPacerBinary(t, dbPath, addr)
	held := p.waitState(t, "pay-plain", "held")
	if held["holdReason"] != "unknownOutcome" {
		t.Errorf("pay-plain holdReason = %v, want unknownOutcome", held["holdReason"])
	}
	p.waitState(t, "pay-keyed", "succeeded")

	// Capacity of the dead worker is back: the plain scope (maxConcurrent 1)
	// runs new work at once.
	enqueue(t, p, map[string]any{"operationId": "after-crash", "providerScope": "plain",
		"request": map[string]any{"method": "GET", "path": "/read"}})
	p.waitState(t, "after-crash", "succeeded")

	var plainSends, keyedSends int
	for _, r := range prov.snapshot() {
		switch r.Path {
		case "/hang/plain":
			plainSends++
		case "/hang/keyed":
			keyedSends++
			if r.Key != "intent-42" {
				t.Errorf("keyed resend carried key %q, want intent-42", r.Key)
			}
			if r.Body != `{"amount":2}` {
				t.Errorf("keyed resend body %q changed", r.Body)
			}
		}
	}
	if plainSends != 1 {
		t.Errorf("uncertain non-idempotent mutation sent %d times, want 1 (held, not resent)", plainSends)
	}
	if keyedSends != 2 {
		t.Errorf("idempotent mutation sent %d times, want 2 (original + resend with the same key)", keyedSends)
	}
	prov.mu.Lock()
	for effect, n := range prov.effects {
		if n != 1 {
			t.Errorf("effect %s applied %d times", effect, n)
		}
	}
	prov.mu.Unlock()
}

// TestRestartKeepsDelayedWork enqueues work for a few seconds ahead, kills
// pacer before it is due, restarts it, and checks that nothing was sent
// before its time and nothing was lost (invariants 1 and 7).
func TestRestartKeepsDelayedWork(t *testing.T) {
	t.Parallel()
	prov := newEffectLog()
	provider := httptest.NewServer(prov)
	defer provider.Close()
	dbPath := filepath.Join(t.TempDir(), "pacer.db")
	addr := freeAddr(t)

	p := startPacerBinary(t, dbPath, addr)
	putScope(t, p, "later", provider.URL, "")
	notBefore := time.Now().Add(3 * time.Second).UTC().Truncate(time.Millisecond)
	for i := range 5 {
		enqueue(t, p, map[string]any{"operationId": fmt.Sprintf("later-%d", i), "providerScope": "later",
			"notBefore": notBefore.Format(time.RFC3339Nano),
			"request":   map[string]any{"method": "POST", "path": fmt.Sprintf("/later/%d", i)}})
	}
	p.kill9(t)
	p = startPacerBinary(t, dbPath, addr)
	for i := range 5 {
		p.waitState(t, fmt.Sprintf("later-%d", i), "succeeded")
	}
	reqs := prov.snapshot()
	if len(reqs) != 5 {
		t.Fatalf("provider saw %d requests, want 5", len(reqs))
	}
	for _, r := range reqs {
		if r.At.Before(notBefore) {
			t.Errorf("%s sent at %s, before its notBefore %s", r.Path, r.At.Format(time.RFC3339Nano), notBefore.Format(time.RFC3339Nano))
		}
	}
}

// TestSecondServeRefused checks the process lock: a second pacer on the
// same database exits non-zero at once, naming the file.
func TestSecondServeRefused(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "pacer.db")
	startPacer(t, dbPath, freeAddr(t))
	out, err := exec.Command(pacerBin(t), "serve", "--db", dbPath, "--listen", freeAddr(t)).CombinedOutput()
	if err == nil {
		t.Fatalf("second serve succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), dbPath) {
		t.Errorf("message does not name the database file %s:\n%s", dbPath, out)
	}
}

// TestServeRefusesPublicAddressWithoutToken checks the loopback rule.
func TestServeRefusesPublicAddressWithoutToken(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "pacer.db")
	out, err := exec.Command(pacerBin(t), "serve", "--db", dbPath, "--listen", "0.0.0.0:0").CombinedOutput()
	if err == nil {
		t.Fatalf("serve on 0.0.0.0 without a token succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "api-token") {
		t.Errorf("message does not say to set --api-token:\n%s", out)
	}
	if _, statErr := os.Stat(dbPath); statErr == nil {
		t.Error("refused serve still created the database")
	}
}
