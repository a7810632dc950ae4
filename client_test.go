package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/urfave/cli/v2"

	"pacer/db"
	"pacer/httpapi"
	"pacer/scheduler"
)

// cliToken is the API token of the test servers the client commands
// speak to; cliSecret a scope credential that must never be printed.
const (
	cliToken  = "cli-api-token-3e8a"
	cliSecret = "cli-scope-secret-77b1"
)

// cliEnv is a real pacer API (store in a TempDir, mock clock, engine)
// behind an httptest server, and a stand-in provider.
type cliEnv struct {
	t        *testing.T
	url      string
	provider string
	engine   *scheduler.Engine
	store    *db.DB
	clock    *clock.Mock
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	store, err := db.Open(filepath.Join(t.TempDir(), "pacer.db"), db.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC))
	sched, err := scheduler.New(store, mock, scheduler.Config{Engine: scheduler.EngineConfig{Random: func() float64 { return 0.5 }}})
	if err != nil {
		t.Fatal(err)
	}
	svc, engine := sched.Service, sched.Engine
	api, err := httpapi.New(httpapi.Config{Service: svc, Token: cliToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(svc.Notifier().Close) // end long-polls before the server closes
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, `{"ok":true}`)
		case "/uncertain":
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(prov.Close)
	return &cliEnv{t: t, url: ts.URL, provider: prov.URL, engine: engine, store: store, clock: mock}
}

// runEngine claims what is due and waits for the attempts to finish.
func (e *cliEnv) runEngine() {
	e.t.Helper()
	if _, err := e.engine.RunOnce(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.engine.Wait()
}

// cliResult is what one pacer command did.
type cliResult struct {
	stdout, stderr string
	code           int
	msg            string // the one line main would print after "pacer: "
}

// lockedBuffer is a bytes.Buffer safe for a command running in another
// goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// pacer runs the pacer command line with args against env (its --server
// and --api-token come first), stdin as standard input.
func (e *cliEnv) pacer(stdin string, args ...string) cliResult {
	e.t.Helper()
	return runPacer(context.Background(), nil, stdin, withServer(e, args)...)
}

// withServer inserts the env's --server and --api-token after the
// command words.
func withServer(e *cliEnv, args []string) []string {
	n := 1
	if len(args) > 1 && (args[0] == "ops" || args[0] == "scopes") {
		n = 2
	}
	out := append([]string{}, args[:n]...)
	out = append(out, "--server", e.url, "--api-token", cliToken)
	return append(out, args[n:]...)
}

// runPacer runs newApp with args; stdout goes to out when not nil.
func runPacer(ctx context.Context, out io.Writer, stdin string, args ...string) cliResult {
	var stdout, stderr lockedBuffer
	var w io.Writer = &stdout
	if out != nil {
		w = out
	}
	r := runPacerWith(ctx, w, &stderr, stdin, args...)
	r.stdout, r.stderr = stdout.String(), stderr.String()
	return r
}

// runPacerWith runs newApp with args in this process, as main would, its
// standard output and error going to stdout and stderr; the result has
// the exit code and message main would print. Runs in parallel tests set
// their commands up one at a time (cliSetup).
func runPacerWith(ctx context.Context, stdout, stderr io.Writer, stdin string, args ...string) cliResult {
	app := newApp()
	app.Writer, app.ErrWriter, app.Reader = stdout, stderr, strings.NewReader(stdin)
	cliSetup.Lock()
	var setUp sync.Once
	started := func() { setUp.Do(cliSetup.Unlock) }
	defer started()
	onAction(app.Commands, started)
	var r cliResult
	r.code, r.msg = exitStatus(app.RunContext(ctx, append([]string{"pacer"}, args...)))
	return r
}

// In-process runs of the command line in parallel tests (and the serves
// of startPacer) do not race (under -race): see cliSetup.
func TestInProcessCommandsRunInParallel(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(t.TempDir(), "pacer.db")
			for _, cmd := range []string{"users list", "check"} {
				r := runPacer(context.Background(), nil, "", append(strings.Fields(cmd), "--db", path)...)
				if r.code != 1 || !strings.Contains(r.msg, "no database file") {
					t.Errorf("%s on a missing database: exit %d %q, want 1 and no database file", cmd, r.code, r.msg)
				}
			}
		}()
	}
	wg.Wait()
}

// cliSetup is held while an in-process run sets its commands up, until
// its command's action starts: urfave/cli v2 writes its package-level help
// command (helpCommand) while it sets a command up, so two apps doing so
// at once race.
var cliSetup sync.Mutex

// onAction makes every command of cmds, and of their subcommands, call
// started as its action begins.
func onAction(cmds []*cli.Command, started func()) {
	for _, c := range cmds {
		if act := c.Action; act != nil {
			c.Action = func(ctx *cli.Context) error {
				started()
				return act(ctx)
			}
		}
		onAction(c.Subcommands, started)
	}
}

// ok fails unless r succeeded; it returns stdout.
func (r cliResult) ok(t *testing.T) string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d: %s\nstderr: %s", r.code, r.msg, r.stderr)
	}
	return r.stdout
}

// fails checks that r exited with code and one line containing msg.
func (r cliResult) fails(t *testing.T, code int, msg string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.msg, msg) || strings.Contains(r.msg, "\n") {
		t.Fatalf("exit %d %q, want exit %d and one line containing %q", r.code, r.msg, code, msg)
	}
}

// writeFile writes content to a new file in dir and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// noSecret fails when any output carries the scope secret or the token.
func noSecret(t *testing.T, rs ...cliResult) {
	t.Helper()
	for _, r := range rs {
		for _, s := range []string{cliSecret, cliToken} {
			if strings.Contains(r.stdout+r.stderr+r.msg, s) {
				t.Fatalf("output carries a secret: %+v", r)
			}
		}
	}
}

func TestCLIScopes(t *testing.T) { // not parallel: t.Setenv
	e := newCLIEnv(t)
	tokenFile := writeFile(t, "token", cliSecret+"\n")

	created := e.pacer("", "scopes", "set", "acct", "--provider", "generic", "--base-url", e.provider, "--token-file", tokenFile, "--max-concurrent", "3", "--rate", "100/1m")
	if out := created.ok(t); !strings.Contains(out, "created scope acct") || !strings.Contains(out, "bearer") {
		t.Fatalf("set: %s", out)
	}
	list := e.pacer("", "scopes", "list")
	if out := list.ok(t); !strings.Contains(out, "SCOPE") || !strings.Contains(out, "acct") || !strings.Contains(out, "0/3") {
		t.Fatalf("list: %s", out)
	}
	var sl httpapi.ScopeList
	asJSON := e.pacer("", "scopes", "list", "--json")
	if err := json.Unmarshal([]byte(asJSON.ok(t)), &sl); err != nil || len(sl.Scopes) != 1 || sl.Scopes[0].RateLimit == nil || sl.Scopes[0].RateLimit.Requests != 100 {
		t.Fatalf("list --json: %v %s", err, asJSON.stdout)
	}
	show := e.pacer("", "scopes", "show", "acct")
	if out := show.ok(t); !strings.Contains(out, "100 per 1m") || !strings.Contains(out, e.provider) {
		t.Fatalf("show: %s", out)
	}
	noSecret(t, created, list, asJSON, show)

	t.Run("ReplaceKeepsCredentialsOrSaysSo", func(t *testing.T) {
		e.pacer("", "scopes", "set", "acct", "--provider", "generic", "--base-url", e.provider).fails(t, exitUsage, "has bearer credentials")
		t.Setenv("CLI_TEST_SCOPE_SECRET", cliSecret)
		r := e.pacer("", "scopes", "set", "acct", "--provider", "generic", "--base-url", e.provider, "--credentials", "header", "--header-name", "X-Key", "--token-env", "CLI_TEST_SCOPE_SECRET")
		if out := r.ok(t); !strings.Contains(out, "replaced scope acct") || !strings.Contains(out, "header") {
			t.Fatalf("set --token-env: %s", out)
		}
		noSecret(t, r)
	})
	t.Run("FromFile", func(t *testing.T) {
		f := writeFile(t, "scope.json", fmt.Sprintf(`{"provider":"generic","baseURL":%q,"maxConcurrent":2}`, e.provider))
		r := e.pacer("", "scopes", "set", "plain", "--file", f, "--max-concurrent", "5")
		if out := r.ok(t); !strings.Contains(out, "created scope plain") || !strings.Contains(out, "0/5") || !strings.Contains(out, "none") {
			t.Fatalf("set --file: %s", out)
		}
		bad := writeFile(t, "bad.json", `{"provider":"generic","baseURL":"x","tokn":"?"}`)
		e.pacer("", "scopes", "set", "plain", "--file", bad).fails(t, exitUsage, "unknown field")
	})
	t.Run("Pause", func(t *testing.T) {
		until := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
		out := e.pacer("", "scopes", "pause", "acct", "--until", until, "--reason", "provider maintenance").ok(t)
		if !strings.Contains(out, "paused") || !strings.Contains(out, until) || !strings.Contains(out, "provider maintenance") {
			t.Fatalf("pause: %s", out)
		}
		e.pacer("", "scopes", "pause", "acct", "--reason", "x").fails(t, exitUsage, "--until is required")
		e.pacer("", "scopes", "pause", "acct", "--until", "soon", "--reason", "x").fails(t, exitUsage, "RFC 3339")
		e.pacer("", "scopes", "pause", "acct", "--until", until).fails(t, exitUsage, "--reason is required")
		e.pacer("", "scopes", "pause", "missing", "--until", until, "--reason", "x").fails(t, exitNotFoundOrConflict, `no scope "missing"`)
	})
	t.Run("Resume", func(t *testing.T) {
		if out := e.pacer("", "scopes", "resume", "acct", "--reason", "token replaced").ok(t); !strings.Contains(out, "open") {
			t.Fatalf("resume: %s", out)
		}
		e.pacer("", "scopes", "resume", "acct").fails(t, exitUsage, "--reason is required")
		e.pacer("", "scopes", "resume", "missing", "--reason", "x").fails(t, exitNotFoundOrConflict, `no scope "missing"`)
	})
	t.Run("Errors", func(t *testing.T) {
		e.pacer("", "scopes", "show", "missing").fails(t, exitNotFoundOrConflict, `no scope "missing"`)
		e.pacer("", "scopes", "show").fails(t, exitUsage, "give one scope")
		e.pacer("", "scopes", "set", "x", "--provider", "generic", "--base-url", e.provider, "--rate", "fast").fails(t, exitUsage, "--rate")
		e.pacer("", "scopes", "set", "x", "--provider", "nope", "--base-url", "ftp://x", "--no-credentials").fails(t, exitUsage, "provider")
		e.pacer("", "scopes", "set", "x", "--provider", "generic", "--base-url", e.provider, "--token-env", "CLI_TEST_UNSET_VARIABLE").fails(t, exitUsage, "is not set")
		e.pacer("", "scopes", "list", "--bogus").fails(t, exitUsage, "bogus")
	})
}

// The client tests run one command at a time: urfave/cli's help flag is
// package-level state that concurrent apps would race on.

func TestCLIEnqueueAndOps(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	e.pacer("", "scopes", "set", "acct", "--provider", "generic", "--base-url", e.provider, "--no-credentials").ok(t)
	op := func(id, method, path string) string {
		return fmt.Sprintf(`{"operationId":%q,"providerScope":"acct","request":{"method":%q,"path":%q,"body":{"n":1}}}`, id, method, path)
	}

	t.Run("Enqueue", func(t *testing.T) {
		f := writeFile(t, "op.json", op("ok-1", "POST", "/ok"))
		if out := e.pacer("", "enqueue", "--file", f).ok(t); !strings.Contains(out, "ok-1") || !strings.Contains(out, "created") || !strings.Contains(out, "scheduled") {
			t.Fatalf("enqueue: %s", out)
		}
		if out := e.pacer("", "enqueue", "-f", f).ok(t); !strings.Contains(out, "exists") {
			t.Fatalf("enqueue again: %s", out)
		}
		batch := `{"operations":[` + op("uncertain-1", "POST", "/uncertain") + "," + op("reject-1", "POST", "/reject") + "," + op("later-1", "POST", "/ok") + `]}`
		if out := e.pacer(batch, "enqueue").ok(t); strings.Count(out, "created") != 3 {
			t.Fatalf("enqueue batch from stdin: %s", out)
		}
		var created httpapi.Operation
		if err := json.Unmarshal([]byte(e.pacer(op("json-1", "GET", "/ok"), "enqueue", "--json").ok(t)), &created); err != nil || created.OperationID != "json-1" || created.Kind != "read" {
			t.Fatalf("enqueue --json: %v %+v", err, created)
		}
	})
	t.Run("EnqueueErrors", func(t *testing.T) {
		e.pacer(op("ok-1", "POST", "/other"), "enqueue").fails(t, exitNotFoundOrConflict, "exists with other content")
		r := e.pacer(`{"operations":[`+op("b-1", "GET", "/ok")+","+op("ok-1", "POST", "/other")+`]}`, "enqueue")
		r.fails(t, exitNotFoundOrConflict, "1 of 2 operations rejected")
		if !strings.Contains(r.stdout, "b-1") || !strings.Contains(r.stdout, "rejected (409)") {
			t.Fatalf("batch lines: %s", r.stdout)
		}
		e.pacer(`{"operationId":"x","providerScope":"missing","request":{"method":"GET","path":"/"}}`, "enqueue").fails(t, exitUsage, "names no scope")
		e.pacer("", "enqueue", "--file", writeFile(t, "bad.json", `{"operationId": "x",`)).fails(t, exitUsage, "bad.json")
		e.pacer(`{"operationId":"x"} trailing`, "enqueue").fails(t, exitUsage, "invalid JSON")
		e.pacer(`[1,2]`, "enqueue").fails(t, exitUsage, "want a JSON object")
		e.pacer(`{"operationId":"x","providerScope":"acct","request":{"method":"GET","path":"/"},"colour":"red"}`, "enqueue").fails(t, exitUsage, `unknown field "colour"`)
		e.pacer("", "enqueue", "--file", filepath.Join(t.TempDir(), "none.json")).fails(t, exitUsage, "read --file")
		e.pacer("  ", "enqueue").fails(t, exitUsage, "stdin is empty")
		// Every field at fault in one line, those the API could not parse
		// and those the scheduler refused.
		r = e.pacer(`{"operationId":"x","providerScope":"acct","request":{"method":"BREW","path":"/"},"notBefore":"soon","retry":{"maxElapsed":"forever"}}`, "enqueue")
		for _, f := range []string{"notBefore", "request.method", "retry.maxElapsed"} {
			r.fails(t, exitUsage, f)
		}
	})

	e.pacer("", "ops", "cancel", "later-1", "--reason", "not needed").ok(t)
	e.runEngine() // ok-1 and json-1 succeed, reject-1 fails, uncertain-1 is held

	t.Run("List", func(t *testing.T) {
		out := e.pacer("", "ops", "list").ok(t)
		for _, want := range []string{"OPERATION", "ok-1", "succeeded", "held (unknownOutcome)", "failed (permanent)", "canceled"} {
			if !strings.Contains(out, want) {
				t.Fatalf("list lacks %q:\n%s", want, out)
			}
		}
		if out := e.pacer("", "ops", "list", "--state", "held").ok(t); !strings.Contains(out, "uncertain-1") || strings.Contains(out, "ok-1") {
			t.Fatalf("list --state held:\n%s", out)
		}
		if out := e.pacer("", "ops", "list", "--reason", "permanent").ok(t); !strings.Contains(out, "reject-1") || strings.Contains(out, "uncertain-1") {
			t.Fatalf("list --reason:\n%s", out)
		}
		if out := e.pacer("", "ops", "list", "--created-before", "2026-09-11T02:00:00Z").ok(t); !strings.Contains(out, "no operations") {
			t.Fatalf("list --created-before:\n%s", out)
		}
		paged := e.pacer("", "ops", "list", "--limit", "2")
		if !strings.Contains(paged.stderr, "--cursor") || strings.Count(paged.ok(t), "\n") != 3 {
			t.Fatalf("list --limit 2: %s / %s", paged.stdout, paged.stderr)
		}
		var all httpapi.OperationList
		if err := json.Unmarshal([]byte(e.pacer("", "ops", "list", "--limit", "2", "--all", "--json").ok(t)), &all); err != nil || len(all.Operations) != 6 || all.Next != nil {
			t.Fatalf("list --all --json: %v, %d operations", err, len(all.Operations))
		}
		e.pacer("", "ops", "list", "--created-after", "yesterday").fails(t, exitUsage, "RFC 3339")
		e.pacer("", "ops", "list", "--state", "sleeping").fails(t, exitUsage, "state must be one of")
	})
	t.Run("ShowAndAttempts", func(t *testing.T) {
		out := e.pacer("", "ops", "show", "uncertain-1").ok(t)
		for _, want := range []string{"held (unknownOutcome)", "POST /uncertain", "unknownOutcome HTTP 502"} {
			if !strings.Contains(out, want) {
				t.Fatalf("show lacks %q:\n%s", want, out)
			}
		}
		if out := e.pacer("", "ops", "attempts", "uncertain-1").ok(t); !strings.Contains(out, "unknownOutcome") || !strings.Contains(out, "502") || !strings.Contains(out, "held") || !strings.Contains(out, "DETAIL") {
			t.Fatalf("attempts:\n%s", out)
		}
		if out := e.pacer("", "ops", "audit", "later-1").ok(t); !strings.Contains(out, "WHO") || !strings.Contains(out, "cancel") || !strings.Contains(out, "not needed") {
			t.Fatalf("audit:\n%s", out)
		}
		e.pacer("", "ops", "audit", "nope").fails(t, exitNotFoundOrConflict, `no operation "nope"`)
		var al httpapi.AttemptList
		if err := json.Unmarshal([]byte(e.pacer("", "ops", "attempts", "ok-1", "--json").ok(t)), &al); err != nil || len(al.Attempts) != 1 || *al.Attempts[0].Status != 200 {
			t.Fatalf("attempts --json: %v %+v", err, al)
		}
		if out := e.pacer("", "ops", "attempts", "later-1").ok(t); !strings.Contains(out, "no attempts yet") {
			t.Fatalf("attempts of a canceled op: %s", out)
		}
	})
	t.Run("Actions", func(t *testing.T) {
		if out := e.pacer("", "ops", "resolve", "uncertain-1", "--outcome", "succeeded", "--reason", "found it").ok(t); !strings.Contains(out, "succeeded") {
			t.Fatalf("resolve: %s", out)
		}
		// Beyond the policy's horizon (design §11 "Times are bounded"):
		// refused, nothing changed, and every listing still reads.
		e.pacer("", "ops", "release", "reject-1", "--reason", "much later", "--at", "9999-12-31T23:59:59Z").
			fails(t, exitUsage, "at must not be later than 2027-09-11T02:00:00Z")
		e.pacer(`{"operationId":"far-1","providerScope":"acct","request":{"method":"GET","path":"/ok"},"notBefore":"9999-12-31T23:59:59Z"}`, "enqueue").
			fails(t, exitUsage, "notBefore must not be later than 2027-09-11T02:00:00Z")
		if out := e.pacer("", "ops", "list", "--state", "failed").ok(t); !strings.Contains(out, "reject-1") {
			t.Fatalf("list after refused release: %s", out)
		}
		if out := e.pacer("", "ops", "release", "reject-1", "--reason", "payload fixed", "--at", "2026-09-11T05:00:00Z").ok(t); !strings.Contains(out, "scheduled") || !strings.Contains(out, "2026-09-11T05:00:00Z") {
			t.Fatalf("release --at: %s", out)
		}
		// A release not sent yet is changed by releasing again, and undone
		// (design §14).
		if out := e.pacer("", "ops", "release", "reject-1", "--reason", "the window moved", "--at", "2026-09-11T06:00:00Z").ok(t); !strings.Contains(out, "2026-09-11T06:00:00Z") {
			t.Fatalf("change the release: %s", out)
		}
		if out := e.pacer("", "ops", "unrelease", "reject-1", "--reason", "not after all").ok(t); !strings.Contains(out, "failed") {
			t.Fatalf("unrelease: %s", out)
		}
		e.pacer("", "ops", "unrelease", "reject-1", "--reason", "again").fails(t, exitNotFoundOrConflict, "only a release not sent yet can be undone")
		e.pacer("", "ops", "unrelease", "reject-1").fails(t, exitUsage, "--reason is required")
		if out := e.pacer("", "ops", "release", "reject-1", "--reason", "payload fixed", "--at", "2026-09-11T05:00:00Z").ok(t); !strings.Contains(out, "scheduled") {
			t.Fatalf("release again: %s", out)
		}
		var canceled httpapi.Operation
		if err := json.Unmarshal([]byte(e.pacer("", "ops", "cancel", "reject-1", "--reason", "no longer needed", "--json").ok(t)), &canceled); err != nil || canceled.State != "canceled" {
			t.Fatalf("cancel --json: %v %+v", err, canceled)
		}
	})
	t.Run("ActionErrors", func(t *testing.T) {
		e.pacer("", "ops", "show", "nope").fails(t, exitNotFoundOrConflict, `no operation "nope"`)
		e.pacer("", "ops", "attempts", "nope").fails(t, exitNotFoundOrConflict, `no operation "nope"`)
		e.pacer("", "ops", "release", "nope", "--reason", "x").fails(t, exitNotFoundOrConflict, `no operation "nope"`)
		e.pacer("", "ops", "release", "ok-1", "--reason", "again").fails(t, exitNotFoundOrConflict, "only held or failed")
		// The refusal reads once, as the scheduler's TransitionError says it.
		if r, want := e.pacer("", "ops", "resolve", "ok-1", "--outcome", "failed", "--reason", "again"),
			`operation "ok-1": only operations held for unknownOutcome can be resolved; this one is succeeded`; r.msg != want {
			t.Fatalf("resolve a succeeded operation: %q, want %q", r.msg, want)
		}
		e.pacer("", "ops", "cancel", "ok-1").fails(t, exitUsage, "--reason is required")
		e.pacer("", "ops", "resolve", "ok-1", "--outcome", "maybe", "--reason", "x").fails(t, exitUsage, "--outcome")
		e.pacer("", "ops", "release", "ok-1", "--reason", "x", "--at", "tomorrow").fails(t, exitUsage, "--at")
		// Act on many (design §14): a filter is required; what matches is
		// acted on and counted.
		e.pacer("", "ops", "cancel", "--all", "--reason", "x").fails(t, exitUsage, "filter")
		e.pacer("", "ops", "release", "--all", "--state", "failed", "--at", "2026-09-12T00:00:00Z", "--reason", "x").fails(t, exitUsage, "--at does not go with --all")
		if out := e.pacer("", "ops", "release", "--all", "--state", "held", "--scope", "acct", "--reason", "provider fixed").ok(t); !strings.Contains(out, "released") || !strings.Contains(out, "operations") {
			t.Fatalf("release --all: %s", out)
		}
		// A time in the past is refused as the page refuses it: one rule.
		e.pacer("", "ops", "release", "ok-1", "--reason", "x", "--at", "2026-09-10T00:00:00Z").fails(t, exitUsage, "at must lie in the future")
		e.pacer("", "ops", "show", "a", "b").fails(t, exitUsage, "give one operation ID")
		e.pacer("", "ops", "cancel", "ok-1", "--reason").fails(t, exitUsage, "needs an argument")
	})
}

func TestCLIServerErrors(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)

	t.Run("ServerDown", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		down := "http://" + ln.Addr().String()
		ln.Close()
		for _, args := range [][]string{
			{"ops", "list", "--server", down},
			{"scopes", "list", "--server", down},
			{"enqueue", "--server", down},
			{"follow", "--server", down},
		} {
			runPacer(context.Background(), nil, `{"operationId":"x","providerScope":"a","request":{"method":"GET","path":"/"}}`, args...).
				fails(t, exitError, "cannot reach pacer at "+down)
		}
	})
	t.Run("WrongToken", func(t *testing.T) {
		r := runPacer(context.Background(), nil, "", "ops", "list", "--server", e.url, "--api-token", "wrong")
		r.fails(t, exitError, "the bearer token is not valid")
		if !strings.Contains(r.msg, "PACER_API_TOKEN") {
			t.Fatalf("no hint on setting the token: %s", r.msg)
		}
	})
	t.Run("TokenFromFile", func(t *testing.T) {
		f := writeFile(t, "token", cliToken+"\n")
		runPacer(context.Background(), nil, "", "scopes", "list", "--server", e.url, "--api-token-file", f).ok(t)
	})
	t.Run("BadServerURL", func(t *testing.T) {
		runPacer(context.Background(), nil, "", "ops", "list", "--server", "localhost:8080").fails(t, exitUsage, "--server")
	})
}

func TestCLIFollow(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	e.pacer("", "scopes", "set", "acct", "--provider", "generic", "--base-url", e.provider, "--no-credentials").ok(t)
	// Enqueue over HTTP, not with the command line, while follow runs.
	enqueue := func(id string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.url+"/v1/operations", strings.NewReader(fmt.Sprintf(`{"operationId":%q,"providerScope":"acct","request":{"method":"GET","path":"/ok"}}`, id)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+cliToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("enqueue %s: %s", id, res.Status)
		}
	}

	// follow prints changes as they commit: an enqueue, then the engine's
	// claim and completion, each waking its long-poll.
	ctx, cancel := context.WithCancel(context.Background())
	var out lockedBuffer
	done := make(chan cliResult, 1)
	go func() { done <- runPacer(ctx, &out, "", withServer(e, []string{"follow", "--limit", "2"})...) }()
	waitFor := func(want ...string) {
		t.Helper()
		for i := 0; ; i++ {
			s := out.String()
			all := true
			for _, w := range want {
				all = all && strings.Contains(s, w)
			}
			if all {
				return
			}
			if i == 30_000 {
				t.Fatalf("follow printed %q, want %q", s, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	enqueue("f-1")
	waitFor("scheduled", "f-1")
	e.runEngine()
	waitFor("running", "succeeded")
	cancel() // SIGINT
	select {
	case r := <-done:
		r.ok(t)
	case <-time.After(30 * time.Second):
		t.Fatal("follow did not stop when interrupted")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "1 ") || !strings.Contains(lines[2], "succeeded") {
		t.Fatalf("follow printed:\n%s", out.String())
	}

	// Resuming after the last sequence number seen prints only what came
	// since, here as JSON lines.
	enqueue("f-2")
	ctx, cancel = context.WithCancel(context.Background())
	var out2 lockedBuffer
	go func() {
		done <- runPacer(ctx, &out2, "", withServer(e, []string{"follow", "--after", "3", "--json"})...)
	}()
	for i := 0; !strings.Contains(out2.String(), "\n"); i++ {
		if i == 30_000 {
			t.Fatal("follow --after printed nothing")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	(<-done).ok(t)
	var ch httpapi.Change
	if err := json.Unmarshal([]byte(strings.Split(out2.String(), "\n")[0]), &ch); err != nil || ch.Seq != 4 || ch.OperationID != "f-2" || ch.State != "scheduled" {
		t.Fatalf("follow --after 3 --json: %v %s", err, out2.String())
	}

	t.Run("Errors", func(t *testing.T) {
		e.pacer("", "follow", "--wait", "2m").fails(t, exitUsage, "--wait")
		e.pacer("", "follow", "--after", "-1").fails(t, exitUsage, "--after")
		e.pacer("", "follow", "--scope", "no spaces").fails(t, exitUsage, "providerScope")
		// A scope that does not exist is said at once, not waited on.
		e.pacer("", "follow", "--scope", "typo").fails(t, exitNotFoundOrConflict, `no scope "typo"`)
	})
	t.Run("ErrGap", func(t *testing.T) {
		// A cursor ahead of the database (restored from an older backup),
		// then one behind what retention kept: follow stops with a clear
		// line instead of silently skipping.
		// Bounded, so a follow that skips silently fails the test (it would
		// end as if interrupted) instead of hanging it.
		follow := func(after string) cliResult {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return runPacer(ctx, nil, "", withServer(e, []string{"follow", "--after", after, "--wait", "0s"})...)
		}
		follow("99").fails(t, exitNotFoundOrConflict, "after=99 is ahead of the change feed, whose newest change is 4")
		e.clock.Add(time.Hour)
		if _, err := e.store.PruneFinished(context.Background(), scheduler.PruneParams{Before: e.clock.Now(), Limit: 100}); err != nil {
			t.Fatal(err)
		}
		follow("1").fails(t, exitError, "the changes after 1 were pruned by retention")
	})
}

// One convention for every usage error (issue 14): one line naming the
// command as typed, exit 2; an unknown command is one too (not 3, which
// means "no such operation"); flags may follow the operand everywhere.
func TestCLIUsageErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runPacer(ctx, nil, "", "bogus").fails(t, exitUsage, `unknown command "bogus"`)
	runPacer(ctx, nil, "", "serve", "--retention", "5", "--db", filepath.Join(t.TempDir(), "x.db")).fails(t, exitUsage, "see pacer serve --help")
	runPacer(ctx, nil, "", "ops", "show").fails(t, exitUsage, "pacer ops show [flags] OPERATION_ID")
	runPacer(ctx, nil, "", "ops", "list", "--bogus").fails(t, exitUsage, "see pacer ops list --help")
	runPacer(ctx, nil, "", "scopes", "pause").fails(t, exitUsage, "pacer scopes pause [flags] SCOPE")
	// users add NAME --db PATH: the flag after the operand is read (the
	// database does not exist, so that is what it says).
	missing := filepath.Join(t.TempDir(), "none.db")
	if r := runPacer(ctx, nil, "a long staff password\n", "users", "add", "alice", "--db", missing); r.code == 0 || !strings.Contains(r.msg, missing) {
		t.Fatalf("users add alice --db PATH: exit %d %q, want the --db path read", r.code, r.msg)
	}
}
