package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pacer/db"
	"pacer/internal/pgtest"
)

// envWithoutPacer is the test's environment without PACER_* variables, so
// a developer's settings cannot steer the binary under test.
func envWithoutPacer() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PACER_") {
			env = append(env, kv)
		}
	}
	return env
}

// startDemoServe starts `pacer serve --demo` with args and waits for it
// to be healthy.
func startDemoServe(t *testing.T, addr string, args ...string) *pacerProc {
	t.Helper()
	return launchServe(t, addr, append([]string{"serve", "--demo", "--listen", addr}, args...)...)
}

// TestServeDemo runs `pacer serve --demo` without --db: a throwaway
// database, the demo scopes, and held operations within seconds; the
// database is gone after a clean stop.
func TestServeDemo(t *testing.T) {
	t.Parallel()
	p := startDemoServe(t, freeAddr(t))
	waitDemoShown(t, p)
	if err := p.shutdown(); err != nil {
		t.Fatalf("pacer --demo exit: %v", err)
	}
	if logged := p.logs.String(); !strings.Contains(logged, "demo running") || !strings.Contains(logged, p.base+"/ui/") {
		t.Errorf("the demo's start-up log does not point to the support page %s/ui/", p.base)
	}
	dbPath := loggedDB(t, p.logs.String()) // the buffer is complete once serve has returned
	if !strings.Contains(dbPath, "pacer-demo-") {
		t.Errorf("demo database %q is not a throwaway one", dbPath)
	}
	if _, err := os.Stat(filepath.Dir(dbPath)); !os.IsNotExist(err) {
		t.Errorf("the throwaway database directory %s is still there (%v)", filepath.Dir(dbPath), err)
	}
}

// waitDemoShown waits (at most 30 s) until the demo of p shows its held
// operations (unknownOutcome, authRevoked), its scopes and its attempts
// in /metrics.
func waitDemoShown(t *testing.T, p *pacerProc) {
	t.Helper()
	var ops struct {
		Operations []struct {
			OperationID, State, HoldReason string
		}
	}
	reasons := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); !reasons["unknownOutcome"] || !reasons["authRevoked"]; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no unknownOutcome and authRevoked holds after 30 s: %+v", ops)
		}
		if st, _ := p.call(t, "GET", "/v1/operations?state=held", nil); st != 200 {
			t.Fatalf("list held: %d", st)
		}
		resp, err := http.Get(p.base + "/v1/operations?state=held")
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&ops)
		resp.Body.Close()
		for _, op := range ops.Operations {
			reasons[op.HoldReason] = true
		}
	}
	st, scopes := p.call(t, "GET", "/v1/scopes", nil)
	if st != 200 || !strings.Contains(toJSON(scopes), "demo-github") || !strings.Contains(toJSON(scopes), "demo-crm") {
		t.Errorf("demo scopes: %d %v", st, scopes)
	}
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	metrics.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(metrics.String(), `pacer_attempts_total{class="unknownOutcome",provider="generic"}`) {
		t.Errorf("demo attempts not in /metrics:\n%s", metrics.String())
	}

}

// serve --demo --db postgres://… (the README: --db takes either kind of
// database): the demo runs on PostgreSQL as on a file, and then refuses
// that database, which has scopes now, pointing to --demo-force.
func TestPostgresServeDemo(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	key := []string{"--db", url, "--secret-key", pgKey()}
	p := startDemoServe(t, freeAddr(t), key...)
	waitDemoShown(t, p)
	if err := p.shutdown(); err != nil {
		t.Fatalf("pacer --demo --db postgres://… exit: %v", err)
	}
	if logged := p.logs.String(); !strings.Contains(logged, "demo running") {
		t.Errorf("no demo start-up log:\n%s", logged)
	}

	out, code := runBinaryIn(t, t.TempDir(), nil, append([]string{"serve", "--demo", "--listen", freeAddr(t)}, key...)...)
	wantRefused(t, "serve --demo on a PostgreSQL database with scopes", out, code, 2, "--demo-force")
}

// TestServeDemoRefusesRealDatabase: --demo on a database that has scopes
// is refused unless --demo-force.
func TestServeDemoRefusesRealDatabase(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "pacer.db")
	p := startPacer(t, dbPath, freeAddr(t))
	putScope(t, p, "customer-a", "https://api.example.com", "")
	_ = p.shutdown()

	cmd := exec.Command(pacerBin(t), "serve", "--demo", "--db", dbPath, "--listen", freeAddr(t))
	cmd.Env = envWithoutPacer()
	out, err := cmd.CombinedOutput()
	exit, ok := err.(*exec.ExitError)
	if !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "--demo-force") {
		t.Fatalf("serve --demo on a database with scopes: %v\n%s\nwant exit 2 naming --demo-force", err, out)
	}
	key, _, err := db.LoadOrCreateKeyFile(dbPath + ".key")
	if err != nil {
		t.Fatal(err)
	}
	store, err := db.Open(dbPath, db.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	scopes, err := store.ListScopes(context.Background())
	store.Close()
	if err != nil || len(scopes) != 1 {
		t.Fatalf("after the refusal the database has %d scopes (%v), want the 1 it had", len(scopes), err)
	}

	p = startDemoServe(t, freeAddr(t), "--db", dbPath, "--demo-force")
	if st, _ := p.call(t, "GET", "/v1/scopes/demo-shop", nil); st != 200 {
		t.Errorf("--demo-force: demo scope missing (%d)", st)
	}
	if st, _ := p.call(t, "GET", "/v1/scopes/customer-a", nil); st != 200 {
		t.Errorf("--demo-force: the existing scope is gone (%d)", st)
	}
}

// loggedDB finds the database path in pacer's "pacer serving" log line.
func loggedDB(t *testing.T, logs string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct{ Msg, DB string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "pacer serving" {
			return line.DB
		}
	}
	t.Fatalf("no 'pacer serving' line in the logs:\n%s", logs)
	return ""
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
