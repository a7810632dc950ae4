package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/httpapi"
	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/pgstore"
)

// Design §10 end to end, with the real binary on a throwaway PostgreSQL
// (internal/pgtest).

// pgKey is the base64 credentials key the tests' serves share.
func pgKey() string { return base64.StdEncoding.EncodeToString(pacertest.Key()) }

// otherKey is a valid key that is not pgKey.
func otherKey() string {
	return base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
}

// pgExec runs sql on the database at u.
func pgExec(t *testing.T, u, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// scrapeGauge reads the series named series (with its labels, as
// exposed) from p's /metrics; false when p does not report it.
func scrapeGauge(t *testing.T, p *pacerProc, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s/metrics: %d, %v", p.base, resp.StatusCode, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", series, line, err)
			}
			return f, true
		}
	}
	return 0, false
}

// lastNodeID is the last node id the database at u handed out: every
// registration draws one, even a node that has gone since.
func lastNodeID(t *testing.T, u string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id int64
	if err := conn.QueryRow(ctx, `SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence('nodes', 'id')), 0)`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// runBinaryIn runs the pacer binary with args in dir, its environment
// without the caller's PACER_ variables plus env, and returns what it
// printed and its exit code. A command still running after 30 s (a serve
// that was to be refused) is killed and fails the test.
func runBinaryIn(t *testing.T, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, pacerBin(t), args...)
	cmd.Dir, cmd.Env = dir, append(envWithoutPacer(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("pacer %v did not exit within 30 s (killed): %s", args, out)
	}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run pacer %v: %v", args, err)
		}
		return string(out), exit.ExitCode()
	}
	return string(out), 0
}

// wantRefused checks that a command exited with code and printed one line
// containing each of msgs.
func wantRefused(t *testing.T, what, out string, code, wantCode int, msgs ...string) {
	t.Helper()
	if code != wantCode || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("%s: exit %d %q, want exit %d and one line", what, code, out, wantCode)
	}
	for _, m := range msgs {
		if !strings.Contains(out, m) {
			t.Errorf("%s: %q does not say %q", what, out, m)
		}
	}
}

// Two `pacer serve` on one PostgreSQL database with the same key both
// answer; operations enqueued through either are sent once each, by
// whichever process claims them, and both see every result; a staff
// sign-in on one is a session on the other, and failed sign-ins on one
// count on the other.
func TestPostgresTwoServesOneDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prov := newEffectLog()
	provider := httptest.NewServer(prov)
	defer provider.Close()
	db := pgtest.URL(t)
	a := startPacerBinary(t, db, freeAddr(t), "--secret-key", pgKey())
	b := startPacerBinary(t, db, freeAddr(t), "--secret-key", pgKey())
	a.waitReady(t)
	b.waitReady(t)
	putScope(t, a, "shared", provider.URL, "Idempotency-Key")

	const n = 20
	for i := range n {
		via := []*pacerProc{a, b}[i%2]
		enqueue(t, via, map[string]any{"operationId": fmt.Sprintf("op-%d", i), "providerScope": "shared",
			"request": map[string]any{"method": "POST", "path": fmt.Sprintf("/charge/%d", i), "body": map[string]any{"n": i}}})
	}
	for i := range n {
		id := fmt.Sprintf("op-%d", i)
		a.waitState(t, id, "succeeded")
		b.waitState(t, id, "succeeded")
	}
	sends := map[string]int{}
	for _, r := range prov.snapshot() {
		sends[r.Path]++
	}
	for i := range n {
		if p := fmt.Sprintf("/charge/%d", i); sends[p] != 1 {
			t.Errorf("%s sent %d times, want once", p, sends[p])
		}
	}
	// The database-wide gauges come from one process only, so their sum
	// over the processes is the database's figure.
	succeeded, reporters := 0.0, 0
	for _, p := range []*pacerProc{a, b} {
		v, ok := scrapeGauge(t, p, `pacer_operations{state="succeeded"}`)
		if ok {
			succeeded, reporters = succeeded+v, reporters+1
		}
		if _, backlog := scrapeGauge(t, p, `pacer_feed_backlog`); backlog != ok {
			t.Errorf("%s reports pacer_operations %v but pacer_feed_backlog %v", p.base, ok, backlog)
		}
	}
	if reporters != 1 || succeeded != n {
		t.Errorf("pacer_operations{state=\"succeeded\"}: reported by %d processes, summing to %v; want 1 reporting %d", reporters, succeeded, n)
	}

	// Staff accounts and sessions are the database's, not a process's.
	const password = "a long staff password"
	r := runPacer(ctx, nil, password+"\n", "users", "add", "--db", db, "--secret-key", pgKey(), "alice")
	r.ok(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(a.base+"/ui/signin", url.Values{"name": {"alice"}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "pacer_session" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("sign in on %s: %d, cookies %v", a.base, resp.StatusCode, resp.Cookies())
	}
	// Failed sign-ins count across processes: after the limit on one,
	// the other refuses the name at once (429), without checking it.
	for i := range httpapi.SignInFailuresPerUser + 1 {
		p := []*pacerProc{a, b}[i/httpapi.SignInFailuresPerUser]
		resp, err := noRedirect.PostForm(p.base+"/ui/signin", url.Values{"name": {"mallory"}, "password": {"not the password"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusUnauthorized
		if i == httpapi.SignInFailuresPerUser {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("failed sign-in %d (on %s): %d, want %d", i+1, p.base, resp.StatusCode, want)
		}
	}
	for _, withCookie := range []bool{false, true} {
		req, _ := http.NewRequest("GET", b.base+"/ui/", nil)
		if withCookie {
			req.AddCookie(session)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if signedIn := resp.StatusCode == 200; signedIn != withCookie {
			t.Errorf("GET /ui/ on the other process, with the session cookie %v: %d", withCookie, resp.StatusCode)
		}
	}
}

// A serve starting on a database where another serve has a request in
// flight takes none of its leases (design §10): the operation stays
// running, is sent once, and the process holding it completes it.
func TestPostgresStartDoesNotTakeLiveLeases(t *testing.T) {
	t.Parallel()
	prov := newEffectLog()
	provider := httptest.NewServer(prov)
	defer provider.Close()
	db := pgtest.URL(t)
	a := startPacerBinary(t, db, freeAddr(t), "--secret-key", pgKey())
	putScope(t, a, "s", provider.URL, "")
	enqueue(t, a, map[string]any{"operationId": "slow-read", "providerScope": "s",
		"request": map[string]any{"method": "GET", "path": "/hang/read"}})
	enqueue(t, a, map[string]any{"operationId": "slow-write", "providerScope": "s",
		"request": map[string]any{"method": "POST", "path": "/hang/write", "body": map[string]any{"x": 1}}})
	prov.waitArrivals(t, 1) // the scope runs one at a time

	b := startPacerBinary(t, db, freeAddr(t), "--secret-key", pgKey())
	// /readyz answers 200 once b's claim loop has completed a pass: after
	// the start-up step that, on SQLite, recovers every lease.
	b.waitReady(t)
	running := 0
	for _, id := range []string{"slow-read", "slow-write"} {
		_, op := b.call(t, "GET", "/v1/operations/"+id, nil)
		if op["state"] == "running" {
			running++
		} else if op["state"] != "scheduled" {
			t.Errorf("%s after the second serve started: state %v, want running or scheduled (untouched)", id, op["state"])
		}
	}
	if running != 1 {
		t.Errorf("%d operations running after the second serve started, want the one in flight", running)
	}
	close(prov.hang) // the request in flight answers
	a.waitState(t, "slow-read", "succeeded")
	a.waitState(t, "slow-write", "succeeded")
	sends := map[string]int{}
	for _, r := range prov.snapshot() {
		sends[r.Path]++
	}
	if sends["/hang/read"] != 1 || sends["/hang/write"] != 1 {
		t.Errorf("sends = %v, want each once", sends)
	}
}

// A serve killed with SIGKILL while a request is in flight: the other
// serve, started just before (its session younger than its request
// timeout plus the lease margin, so the lock's evidence is not enough
// yet), leaves the lease alone at first and recovers it at the latest
// once it expired, so the operation (a mutation the provider deduplicates
// by its key) is sent again with the same key and succeeds.
func TestPostgresKilledServesLeaseRecoveredAfterExpiry(t *testing.T) {
	t.Parallel()
	prov := newEffectLog()
	provider := httptest.NewServer(prov)
	defer provider.Close()
	defer close(prov.hang)
	db := pgtest.URL(t)
	a := startPacerBinary(t, db, freeAddr(t), "--secret-key", pgKey(), "--request-timeout", "2s", "--lease", "7s")
	b := startPacerBinary(t, db, freeAddr(t), "--secret-key", pgKey())
	putScope(t, a, "s", provider.URL, "Idempotency-Key") // so the resend does not hang
	enqueue(t, a, map[string]any{"operationId": "orphan", "providerScope": "s", "requestIdentity": "intent-7",
		"request": map[string]any{"method": "POST", "path": "/hang/orphan", "body": map[string]any{"n": 7}}})
	prov.waitArrivals(t, 1)
	killed := time.Now()
	a.kill9(t)
	b.waitReady(t)
	if _, op := b.call(t, "GET", "/v1/operations/orphan", nil); op["state"] != "running" {
		t.Fatalf("right after the kill: state %v, want running (the lease has not expired)", op["state"])
	}
	b.waitState(t, "orphan", "succeeded") // within 30 s: the lease, a poll, the retry's backoff
	t.Logf("succeeded %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	sends := prov.snapshot()
	if len(sends) != 2 || sends[1].Key != "intent-7" {
		t.Errorf("sends = %+v, want 2 with the same key: the one cut off and the resend", sends)
	}
}

// On PostgreSQL the credentials key is required (no key file is made),
// given as PACER_SECRET_KEY or --secret-key-file, and a process whose key
// does not open the stored credentials refuses to start.
func TestPostgresKeyRequired(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	serve := []string{"serve", "--db", db, "--listen", addr}

	out, code := runBinaryIn(t, dir, nil, serve...)
	wantRefused(t, "serve without a key", out, code, 2, "PACER_SECRET_KEY", "--secret-key-file")
	out, code = runBinaryIn(t, dir, nil, append(serve, "--secret-key-file", filepath.Join(dir, "missing.key"))...)
	wantRefused(t, "serve with a missing key file", out, code, 2, "missing.key")
	out, code = runBinaryIn(t, dir, nil, "users", "list", "--db", db)
	wantRefused(t, "users list without a key", out, code, 2, "PACER_SECRET_KEY")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused commands left %v in their directory", entries)
	}
	if _, err := pgstore.Check(context.Background(), db); err == nil || !strings.Contains(err.Error(), "no pacer schema") {
		t.Errorf("after the refused commands: %v, want the database untouched", err)
	}

	// A first serve, with the key in the environment, stores a scope's
	// credentials.
	p := launchServeBinaryEnv(t, addr, []string{"PACER_SECRET_KEY=" + pgKey()}, serve...)
	putScope(t, p, "acme", "http://127.0.0.1:1", "")
	if err := p.shutdown(); err != nil {
		t.Fatal(err)
	}

	wrong := filepath.Join(dir, "wrong.key")
	if err := os.WriteFile(wrong, []byte(otherKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runBinaryIn(t, dir, nil, append(serve, "--secret-key-file", wrong)...)
	wantRefused(t, "serve with another key", out, code, 1, "does not open the stored credentials")
	out, code = runBinaryIn(t, dir, []string{"PACER_SECRET_KEY=" + otherKey()}, "users", "list", "--db", db)
	wantRefused(t, "users list with another key", out, code, 1, "does not open the stored credentials")

	// Before any scope exists, the first process's key is the database's.
	fresh := pgtest.URL(t)
	s, err := pgstore.Open(context.Background(), fresh, pgstore.Options{Key: pacertest.Key()})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, code = runBinaryIn(t, dir, nil, "serve", "--db", fresh, "--listen", addr, "--secret-key-file", wrong)
	wantRefused(t, "serve with another key on a database without scopes", out, code, 1, "does not open the stored credentials")

	right := filepath.Join(dir, "right.key")
	if err := os.WriteFile(right, []byte(pgKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	launchServeBinaryEnv(t, addr, nil, append(serve, "--secret-key-file", right)...)
}

// waitReady waits until p answers /readyz with 200 (at most 10 s): its
// database answers and its claim loop has completed a pass.
func (p *pacerProc) waitReady(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, out := p.call(t, "GET", "/readyz", nil)
		if st == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 10 s: %d %v", p.base, st, out)
		}
	}
}

// launchServeBinaryEnv is launchServeBinary with env added to the
// binary's environment.
func launchServeBinaryEnv(t *testing.T, addr string, env []string, args ...string) *pacerProc {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := exec.Command(pacerBin(t), args...)
	cmd.Env = append(envWithoutPacer(), env...)
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

// pacer check, backup and users on PostgreSQL, with SQLite's exit codes:
// check passes on a pacer database (0) and refuses, in one line (1), an
// empty one, another application's, a newer schema and a server it
// cannot reach, never printing the password; backup refuses with a
// pointer to pg_dump (2) without connecting; users works on the shared
// tables and refuses an empty database.
func TestPostgresCheckBackupUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	keyEnv := []string{"PACER_SECRET_KEY=" + pgKey()}

	empty := pgtest.URL(t)
	out, code := runBinaryIn(t, dir, nil, "check", "--db", empty)
	wantRefused(t, "check of an empty database", out, code, 1, "no pacer schema", "only pacer serve creates")
	out, code = runBinaryIn(t, dir, keyEnv, "users", "list", "--db", empty)
	wantRefused(t, "users list on an empty database", out, code, 1, "no pacer schema", "only pacer serve creates")

	db := pgtest.URL(t)
	s, err := pgstore.Open(ctx, db, pgstore.Options{Key: pacertest.Key()}) // as serve would
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, code = runBinaryIn(t, dir, nil, "check", "--db", db)
	if want := fmt.Sprintf("schema version %d", pgstore.SchemaVersion()); code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, want) {
		t.Errorf("check: exit %d %q, want 0 and ok with %s", code, out, want)
	}
	out, code = runBinaryIn(t, dir, []string{"PACER_DB=" + db}, "check")
	if code != 0 {
		t.Errorf("check with PACER_DB: exit %d %q", code, out)
	}

	nodesBefore := lastNodeID(t, db)
	r := runPacer(ctx, nil, "a long staff password\n", "users", "add", "--db", db, "--secret-key", pgKey(), "--role", "viewer", "vic")
	r.ok(t)
	out, code = runBinaryIn(t, dir, append(keyEnv, "PACER_DB="+db), "users", "list")
	if code != 0 || !strings.Contains(out, "vic") || !strings.Contains(out, "viewer") {
		t.Errorf("users list: exit %d %q, want vic, a viewer", code, out)
	}
	if after := lastNodeID(t, db); after != nodesBefore {
		t.Errorf("users registered %d nodes: a command that runs no scheduler is no node", after-nodesBefore)
	}

	foreign := pgtest.URL(t)
	pgExec(t, foreign, `CREATE TABLE invoices (id int)`)
	out, code = runBinaryIn(t, dir, nil, "check", "--db", foreign)
	wantRefused(t, "check of another application's database", out, code, 1, "not a pacer database")

	newer := pgtest.URL(t)
	if s, err := pgstore.Open(ctx, newer, pgstore.Options{Key: pacertest.Key()}); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	pgExec(t, newer, `UPDATE pacer_schema SET version = version + 1`)
	out, code = runBinaryIn(t, dir, nil, "check", "--db", newer)
	wantRefused(t, "check of a newer schema", out, code, 1, "newer than this pacer binary knows")

	const unreachable = "postgres://pacer:s3cret-pw@127.0.0.1:1/pacer?connect_timeout=2"
	out, code = runBinaryIn(t, dir, nil, "check", "--db", unreachable)
	wantRefused(t, "check of a server that does not answer", out, code, 1, "127.0.0.1")
	if strings.Contains(out, "s3cret-pw") {
		t.Errorf("check printed the password: %q", out)
	}

	out, code = runBinaryIn(t, dir, nil, "serve", "--db", unreachable, "--secret-key", pgKey(), "--listen", freeAddr(t))
	wantRefused(t, "serve on a server that does not answer", out, code, 1, "127.0.0.1")
	if strings.Contains(out, "s3cret-pw") {
		t.Errorf("serve printed the password: %q", out)
	}

	out, code = runBinaryIn(t, dir, nil, "backup", "--db", unreachable, "--to", filepath.Join(dir, "copy.db"))
	wantRefused(t, "backup on PostgreSQL", out, code, 2, "pg_dump")
	if strings.Contains(out, "s3cret-pw") {
		t.Errorf("backup printed the password: %q", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("backup left %v", entries)
	}
}
