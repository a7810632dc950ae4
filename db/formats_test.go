package db_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"reflect"
	"testing"
	"time"

	"pacer/db"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// The JSON columns as this version of pacer writes them, copied from a
// database it wrote (TestStoredFormats/WritesTodaysRows writes them again
// and compares). A row stored by an earlier binary must go on reading
// into the same values whatever the domain types' fields are called:
// these literals are what is on disk, never to be regenerated to follow
// a rename.
const (
	storedSpec = `{"statuses":{"420":"rateLimited","5xx":"transient"},"bodyCode":{"pointer":"/error/code","classes":{"quota":"rateLimited"}},"retryAfter":{"header":"x-wait","format":"delta-seconds"},"budget":{"remaining":"x-left","limit":"x-max","reset":{"header":"x-reset","format":"epoch-seconds"}},"idempotency":{"header":"Idem-Key","retention":"24h","methods":["POST","PUT"]},"sharedLimits":true,"maxConcurrent":3}`

	storedRetryHeaders      = `{"Accept":"application/json","X-Trace":"t-1"}`
	storedRetryLastResponse = `{"status":503,"headers":{"Content-Type":"text/plain","Retry-After":"120"},"body":"dHJ5IGxhdGVyLCBwbGVhc2U=","truncated":true}`
	storedRetryHint         = `{"source":"retry-after","raw":"120","at":"2026-09-11T02:02:00Z","note":"clamped to 2m"}`
	storedRetryAttemptResp  = `{"status":503,"headers":{"Retry-After":"120"},"body":"dHJ5","truncated":true}`

	storedOKHeaders = `{"Accept":"application/json"}`
	storedOKResult  = `{"status":201,"headers":{"Location":"/things/1"},"body":"eyJpZCI6MX0="}`
	storedOKHint    = `{"source":"ratelimit","raw":"bad"}`

	storedEmptyResult = `{"status":204,"headers":null}`
)

// storedScopes are the sealed credentials of four scopes (under testKey,
// each bound to its scope's name) and their plaintext.
var storedScopes = []struct {
	name, sealedHex, plain string
	creds                  scheduler.Credentials
}{
	{"fmt-basic", "017ae02a2f2ccba7e6e7cd781179ad53e89b2c6cf7d93922d599c4f786983eafad11a6ce3b3dc7a6c4bb777aba57ed18b5f78438987dd49489e8a5f8c17aa2f70981c6b283501993db66100c27e425cf4bdfbd4e82",
		`{"type":"basic","username":"user-1","password":"pass-1"}`,
		scheduler.Credentials{Type: scheduler.CredentialBasic, Username: "user-1", Password: "pass-1"}},
	{"fmt-bearer", "01644ab2e9fe25032a7f27ef903d5912744a24ee7dffce8c0a8375fad81438d12345d3afabfeca1825a623a86c7e1592323516021044923348f18e67ceed",
		`{"type":"bearer","token":"tok-1"}`,
		scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "tok-1"}},
	{"fmt-header", "0137d0b0d29a6baafe923183b4ba64307ab8a9a4acef6a7a2ef0b8e10ed3ce82a4eeb90f78ff7bd8dd2ee24183c9eb11559097518068cc5cbeb7ee5dd254bbe9111da48f7f90fb5c6ab4ba68f832622508",
		`{"type":"header","name":"X-Api-Key","value":"val-1"}`,
		scheduler.Credentials{Type: scheduler.CredentialHeader, Name: "X-Api-Key", Value: "val-1"}},
	{"fmt-none", "011c1314ec436fe1c7d0ecc992473be43a8399efb2830c0714b316c227a0b9", `{}`, scheduler.Credentials{}},
}

// formatSpec is the profile storedSpec holds.
func formatSpec() *providers.Spec {
	return &providers.Spec{
		Statuses:     map[string]providers.Class{"420": providers.ClassRateLimited, "5xx": providers.ClassTransient},
		BodyCode:     &providers.BodyCodeSpec{Pointer: "/error/code", Classes: map[string]providers.Class{"quota": providers.ClassRateLimited}},
		RetryAfter:   &providers.TimeHeader{Header: "x-wait", Format: "delta-seconds"},
		Budget:       &providers.BudgetSpec{Remaining: "x-left", Limit: "x-max", Reset: &providers.TimeHeader{Header: "x-reset", Format: "epoch-seconds"}},
		Idempotency:  &providers.IdempotencySpec{Header: "Idem-Key", Retention: "24h", Methods: []string{"POST", "PUT"}},
		SharedLimits: true, MaxConcurrent: 3,
	}
}

// formatOps are the operations whose rows hold the stored JSON: one
// retried after an answer with a hint, one succeeded with a result, one
// succeeded with an empty answer. Each is claimed at t0 and completed at
// finished with its completion.
var formatOps = []struct {
	id, scope string
	headers   map[string]string
	finished  time.Time
	comp      scheduler.Completion
	// The request's and the attempt's stored JSON (empty for NULL): the
	// answer is the operation's result or last response.
	headersJSON, answer, hint, attemptResponse string
}{
	{
		id: "fmt-retry", scope: "fmt-bearer", headers: map[string]string{"Accept": "application/json", "X-Trace": "t-1"},
		finished: t0.Add(time.Second),
		comp: scheduler.Completion{
			Outcome: providers.Outcome{Class: providers.ClassTransient, Status: 503,
				Hint:   providers.Hint{Source: "retry-after", Raw: "120", At: t0.Add(2 * time.Minute).In(time.FixedZone("CET", 3600)), Note: "clamped to 2m"},
				Reason: "unavailable", Detail: "503 Service Unavailable: try later"},
			Decision:        scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0.Add(2 * time.Minute), Reason: "retry-after 120s honoured"},
			Response:        &scheduler.Result{Status: 503, Headers: map[string]string{"Retry-After": "120", "Content-Type": "text/plain"}, Body: []byte("try later, please"), Truncated: true},
			AttemptResponse: &scheduler.Result{Status: 503, Headers: map[string]string{"Retry-After": "120"}, Body: []byte("try"), Truncated: true},
		},
		headersJSON: storedRetryHeaders, answer: storedRetryLastResponse,
		hint: storedRetryHint, attemptResponse: storedRetryAttemptResp,
	},
	{
		id: "fmt-ok", scope: "fmt-header", headers: map[string]string{"Accept": "application/json"},
		finished: t0.Add(time.Second),
		comp: scheduler.Completion{
			Outcome: providers.Outcome{Class: providers.ClassSuccess, Status: 201, Hint: providers.Hint{Source: "ratelimit", Raw: "bad"}},
			Decision: scheduler.Decision{State: scheduler.StateSucceeded, Reason: "created",
				Result: &scheduler.Result{Status: 201, Headers: map[string]string{"Location": "/things/1"}, Body: []byte(`{"id":1}`)}},
		},
		headersJSON: storedOKHeaders, answer: storedOKResult, hint: storedOKHint,
	},
	{
		id: "fmt-empty", scope: "fmt-basic", finished: t0.Add(1500 * time.Millisecond),
		comp: scheduler.Completion{
			Outcome:  providers.Outcome{Class: providers.ClassSuccess, Status: 204},
			Decision: scheduler.Decision{State: scheduler.StateSucceeded, Reason: "done", Result: &scheduler.Result{Status: 204}},
		},
		answer: storedEmptyResult,
	},
}

// storedJSON is a JSON column as text, "" for NULL.
type storedJSON = sql.NullString

// TestStoredFormats guards the JSON columns' stored formats: rows as
// written today still read into the same values (so a later rename of a
// domain type's field cannot break old rows), and today's values are
// still written as those rows. The sealed credentials read back only
// through the claim path.
func TestStoredFormats(t *testing.T) {
	ctx := context.Background()

	// putFormatScopes creates the four scopes and enqueues formatOps, one
	// more operation per scope so that each scope is claimed.
	putFormatScopes := func(t *testing.T, d *db.DB) {
		t.Helper()
		for _, s := range storedScopes {
			cfg := scheduler.ScopeConfig{Name: s.name, Provider: "generic", BaseURL: "https://api.example.com", Credentials: s.creds, MaxConcurrent: 4}
			if s.name == "fmt-bearer" {
				cfg.Provider, cfg.Profile = "custom", formatSpec()
			}
			if _, _, err := d.PutScope(ctx, cfg, scheduler.Action{Actor: "test", At: t0, Reason: "setup"}); err != nil {
				t.Fatal(err)
			}
		}
		var ops []scheduler.NewOperation
		for _, f := range formatOps {
			op := storetest.NewOp(f.id, f.scope, t0)
			op.Request.Headers = f.headers
			ops = append(ops, op)
		}
		ops = append(ops, storetest.NewOp("fmt-none-op", "fmt-none", t0))
		storetest.Enqueue(t, d, t0, ops...)
	}
	// completeFormatOps completes formatOps, claimed as claims.
	completeFormatOps := func(t *testing.T, d *db.DB, claims []scheduler.Claim) {
		t.Helper()
		for _, c := range claims {
			for _, f := range formatOps {
				if f.id != c.Operation.ID {
					continue
				}
				comp := f.comp
				comp.OperationID, comp.LeaseToken, comp.Attempt, comp.FinishedAt = c.Operation.ID, c.Operation.LeaseToken, c.Operation.Attempt, f.finished
				if applied, err := d.Complete(ctx, []scheduler.Completion{comp}); err != nil || !applied[0] {
					t.Fatalf("complete %s: %v, %v", f.id, applied, err)
				}
			}
		}
	}
	// columns reads the stored JSON of the operation id's request and
	// first attempt.
	columns := func(t *testing.T, raw *sql.DB, id string) (headers, answer, hint, attemptResponse storedJSON) {
		t.Helper()
		err := raw.QueryRow(`SELECT r.headers, a.answer, a.hint, a.response
			FROM operations o JOIN operation_requests r ON r.id = o.id JOIN attempts a ON a.operation_id = o.id AND a.number = 1
			WHERE o.operation_id = ?`, id).
			Scan(&headers, &answer, &hint, &attemptResponse)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	nullable := func(s string) storedJSON { return storedJSON{String: s, Valid: s != ""} }

	t.Run("WritesTodaysRows", func(t *testing.T) {
		d, path := newTestDB(t)
		putFormatScopes(t, d)
		completeFormatOps(t, d, storetest.Claim(t, d, t0, 10))
		raw := rawDB(t, path)
		for _, f := range formatOps {
			h, a, hint, ar := columns(t, raw, f.id)
			for _, c := range []struct {
				column    string
				got, want storedJSON
			}{
				{"operation_requests.headers", h, nullable(f.headersJSON)}, {"attempts.answer", a, nullable(f.answer)},
				{"attempts.hint", hint, nullable(f.hint)}, {"attempts.response", ar, nullable(f.attemptResponse)},
			} {
				if c.got != c.want {
					t.Errorf("%s %s written as\n\t%v\nwant today's\n\t%v", f.id, c.column, c.got, c.want)
				}
			}
		}
		var spec storedJSON
		if err := raw.QueryRow(`SELECT profile_spec FROM scopes WHERE name = 'fmt-bearer'`).Scan(&spec); err != nil {
			t.Fatal(err)
		}
		if spec != nullable(storedSpec) {
			t.Errorf("profile_spec written as\n\t%v\nwant today's\n\t%s", spec, storedSpec)
		}
		for _, s := range storedScopes {
			var blob []byte
			if err := raw.QueryRow(`SELECT credentials FROM scopes WHERE name = ?`, s.name).Scan(&blob); err != nil {
				t.Fatal(err)
			}
			if plain, err := d.SealedPlaintext(s.name, blob); err != nil || plain != s.plain {
				t.Errorf("credentials of %s sealed as %q (%v), want today's %q", s.name, plain, err, s.plain)
			}
		}
	})

	t.Run("ReadsTodaysRows", func(t *testing.T) {
		d, path := newTestDB(t)
		putFormatScopes(t, d)
		raw := rawDB(t, path)
		for _, s := range storedScopes {
			blob, err := hex.DecodeString(s.sealedHex)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(`UPDATE scopes SET credentials = ? WHERE name = ?`, blob, s.name); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := raw.Exec(`UPDATE scopes SET profile_spec = ? WHERE name = 'fmt-bearer'`, storedSpec); err != nil {
			t.Fatal(err)
		}

		// Only claims carry the credentials' values.
		claims := storetest.Claim(t, d, t0, 10)
		if len(claims) != len(storedScopes) {
			t.Fatalf("claimed %d operations, want one per scope (%d)", len(claims), len(storedScopes))
		}
		for _, s := range storedScopes {
			found := false
			for _, c := range claims {
				if c.Scope.Name == s.name {
					found = true
					if c.Scope.Credentials != s.creds {
						t.Errorf("claim of scope %s: stored credentials read as %#v type %q, want the sealed ones (token %v, value %v, password %v)",
							s.name, c.Scope.Credentials, c.Scope.Credentials.Type,
							c.Scope.Credentials.Token == s.creds.Token, c.Scope.Credentials.Value == s.creds.Value, c.Scope.Credentials.Password == s.creds.Password)
					}
				}
			}
			if !found {
				t.Errorf("no claim of scope %s", s.name)
			}
		}
		sc, err := d.GetScope(ctx, "fmt-bearer")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sc.Profile, formatSpec()) {
			t.Errorf("stored profile spec read as %+v, want %+v", sc.Profile, formatSpec())
		}

		// Completed, then given the stored rows' JSON.
		completeFormatOps(t, d, claims)
		for _, f := range formatOps {
			_, err := raw.Exec(`UPDATE operation_requests SET headers = ? WHERE id = (SELECT id FROM operations WHERE operation_id = ?)`,
				nullable(f.headersJSON), f.id)
			if err != nil {
				t.Fatal(err)
			}
			_, err = raw.Exec(`UPDATE attempts SET hint = ?, response = ?, answer = ? WHERE number = 1 AND operation_id = (SELECT id FROM operations WHERE operation_id = ?)`,
				nullable(f.hint), nullable(f.attemptResponse), nullable(f.answer), f.id)
			if err != nil {
				t.Fatal(err)
			}
		}
		check := func(id, what string, got, want any) {
			t.Helper()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: stored %s read as\n\t%#v\nwant\n\t%#v", id, what, got, want)
			}
		}
		at := t0.Add(time.Second)
		retryHint := &providers.Hint{Source: "retry-after", Raw: "120", At: t0.Add(2 * time.Minute), Note: "clamped to 2m"}
		okHint := &providers.Hint{Source: "ratelimit", Raw: "bad"}
		want := map[string]struct {
			headers         map[string]string
			outcome         *scheduler.OutcomeSummary
			result          *scheduler.Result
			hint            *providers.Hint
			attemptResponse *scheduler.Result
		}{
			"fmt-retry": {
				headers: map[string]string{"Accept": "application/json", "X-Trace": "t-1"},
				outcome: &scheduler.OutcomeSummary{Class: providers.ClassTransient, Status: 503, At: at, Hint: retryHint,
					Reason: "unavailable", Detail: "503 Service Unavailable: try later",
					Response: &scheduler.Result{Status: 503, Headers: map[string]string{"Retry-After": "120", "Content-Type": "text/plain"}, Body: []byte("try later, please"), Truncated: true}},
				hint:            retryHint,
				attemptResponse: &scheduler.Result{Status: 503, Headers: map[string]string{"Retry-After": "120"}, Body: []byte("try"), Truncated: true},
			},
			"fmt-ok": {
				headers: map[string]string{"Accept": "application/json"},
				outcome: &scheduler.OutcomeSummary{Class: providers.ClassSuccess, Status: 201, At: at, Hint: okHint},
				result:  &scheduler.Result{Status: 201, Headers: map[string]string{"Location": "/things/1"}, Body: []byte(`{"id":1}`)},
				hint:    okHint,
			},
			"fmt-empty": {
				outcome: &scheduler.OutcomeSummary{Class: providers.ClassSuccess, Status: 204, At: t0.Add(1500 * time.Millisecond)},
				result:  &scheduler.Result{Status: 204},
			},
		}
		for id, w := range want {
			op := storetest.GetOp(t, d, id)
			check(id, "headers", op.Request.Headers, w.headers)
			check(id, "last outcome and response", op.LastOutcome, w.outcome)
			check(id, "result", op.Result, w.result)
			as, err := d.ListAttempts(ctx, id)
			if err != nil || len(as) != 1 {
				t.Fatalf("attempts of %s: %d, %v", id, len(as), err)
			}
			check(id, "attempt hint", as[0].Hint, w.hint)
			check(id, "attempt response", as[0].Response, w.attemptResponse)
		}
	})
}
