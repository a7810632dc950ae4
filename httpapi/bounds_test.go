package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/httpapi"
	"pacer/scheduler"
)

// withField returns an enqueue body for id on scope with one top-level
// field added (such as `"notBefore":"…"`) or the retry replaced.
func withField(id, scope, field string) string {
	body := operationBody(id, scope)
	if strings.HasPrefix(field, `"retry"`) {
		return strings.Replace(body, `"retry": {"maxAttempts": 8, "maxElapsed": "24h"}`, field, 1)
	}
	return strings.Replace(body, `"requestIdentity"`, field+`, "requestIdentity"`, 1)
}

// fieldError fails unless p is a validation problem naming field with a
// message holding want.
func fieldError(t *testing.T, p httpapi.Problem, field, want string) {
	t.Helper()
	for _, f := range p.Errors {
		if f.Field == field {
			if !strings.Contains(f.Message, want) {
				t.Fatalf("%s: got message %q, want it to hold %q", field, f.Message, want)
			}
			return
		}
	}
	t.Fatalf("no field error for %s: %+v", field, p)
}

// TestTimesBounded checks design §11 "Times are bounded": every time and
// duration from outside lies within the policy's horizon, or the call is
// a 422 naming the field and the bound, and nothing is stored.
func TestTimesBounded(t *testing.T) {
	t.Parallel()
	horizonEnd := testNow.Add(scheduler.DefaultHorizon)

	t.Run("ErrNotBefore", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		for _, tc := range []struct{ value, want string }{
			{"9999-12-31T23:59:59Z", horizonEnd.Format(time.RFC3339)},
			{horizonEnd.Add(time.Second).Format(time.RFC3339), horizonEnd.Format(time.RFC3339)},
			{"1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z"},
			{"0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z"},
		} {
			p := problemOf(t, b.do(http.MethodPost, "/v1/operations", withField("op-1", "account-a", `"notBefore":"`+tc.value+`"`)), http.StatusUnprocessableEntity)
			fieldError(t, p, "notBefore", tc.want)
		}
		assertNoOperations(t, b)
		// The horizon itself is still accepted; a past time means now.
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations",
			withField("op-1", "account-a", `"notBefore":"`+horizonEnd.Format(time.RFC3339)+`"`)), http.StatusCreated)
		if !op.NextAttemptAt.Equal(horizonEnd) {
			t.Fatalf("nextAttemptAt: got %v, want %v", op.NextAttemptAt, horizonEnd)
		}
		op = decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations",
			withField("op-2", "account-a", `"notBefore":"1970-01-01T00:00:00Z"`)), http.StatusCreated)
		if !op.NextAttemptAt.Equal(testNow) {
			t.Fatalf("nextAttemptAt: got %v, want now %v", op.NextAttemptAt, testNow)
		}
	})

	t.Run("ErrNotBeforeInBatch", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		body := `{"operations":[` + operationBody("op-1", "account-a") + `,` +
			withField("op-2", "account-a", `"notBefore":"9999-12-31T23:59:59Z"`) + `]}`
		p := problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", body), http.StatusUnprocessableEntity)
		fieldError(t, p, "operations[1].notBefore", "must not be later than")
		assertNoOperations(t, b)
	})

	t.Run("NotBeforeRoundedUp", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		at := testNow.Add(time.Hour + 400*time.Microsecond)
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations",
			withField("op-1", "account-a", `"notBefore":"`+at.Format(time.RFC3339Nano)+`"`)), http.StatusCreated)
		// Stored times are milliseconds: rounded down, the send could
		// leave 0.4 ms before the time asked for.
		if want := testNow.Add(time.Hour + time.Millisecond); !op.NextAttemptAt.Equal(want) {
			t.Fatalf("nextAttemptAt: got %v, want %v (rounded up)", op.NextAttemptAt.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
	})

	t.Run("ErrMaxElapsed", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		for _, v := range []string{"500us", "1ns", "-1s"} {
			p := problemOf(t, b.do(http.MethodPost, "/v1/operations", withField("op-1", "account-a", `"retry": {"maxElapsed": "`+v+`"}`)), http.StatusUnprocessableEntity)
			fieldError(t, p, "retry.maxElapsed", "at least 1ms")
		}
		assertNoOperations(t, b)
		// The least is accepted; beyond the cap is shortened to it.
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations",
			withField("op-1", "account-a", `"retry": {"maxElapsed": "1ms"}`)), http.StatusCreated)
		if got, want := op.Retry.MaxElapsed, "1ms"; got != want {
			t.Fatalf("maxElapsed: got %q, want %q", got, want)
		}
		op = decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations",
			withField("op-2", "account-a", `"retry": {"maxElapsed": "2000000h"}`)), http.StatusCreated)
		if got, want := op.Retry.MaxElapsed, formatHours(scheduler.DefaultMaxElapsedCap); got != want {
			t.Fatalf("maxElapsed: got %q, want the cap %q", got, want)
		}
	})

	t.Run("ErrReleaseAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enqueue(t, b, "op-1", "account-a")
		holdAll(t, b, 1)
		horizon := b.svc.Now().Add(scheduler.DefaultHorizon)
		for _, tc := range []struct{ value, want string }{
			{"9999-12-31T23:59:59Z", horizon.Format(time.RFC3339)},
			{horizon.Add(time.Minute).Format(time.RFC3339), horizon.Format(time.RFC3339)},
			{"1900-01-01T00:00:00Z", "1970-01-01T00:00:00Z"},
		} {
			p := problemOf(t, b.do(http.MethodPost, opPath("op-1", "/release"), `{"at":"`+tc.value+`","reason":"try later"}`), http.StatusUnprocessableEntity)
			fieldError(t, p, "at", tc.want)
		}
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath("op-1", ""), ""), http.StatusOK)
		if got, want := op.State, "held"; got != want {
			t.Fatalf("state after refused releases: got %q, want %q", got, want)
		}
		decodeAs[httpapi.OperationList](t, b.do(http.MethodGet, "/v1/operations", ""), http.StatusOK)
	})

	t.Run("StoredExtremeStillReads", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		enqueue(t, b, "op-1", "account-a")
		holdAll(t, b, 1)
		// A release written before the bounds held (or by hand): its
		// deadline, at + 24h, lies in year 10000, which JSON cannot say.
		far := time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
		if _, err := b.store.ReleaseOperation(context.Background(), "op-1", far, scheduler.Action{Actor: "test", At: b.svc.Now(), Reason: "by hand"}); err != nil {
			t.Fatal(err)
		}
		op := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath("op-1", ""), ""), http.StatusOK)
		if !op.Deadline.Equal(scheduler.LatestTime) || !op.NextAttemptAt.Equal(far) {
			t.Fatalf("got deadline %v next %v, want %v and %v", op.Deadline, op.NextAttemptAt, scheduler.LatestTime, far)
		}
		list := decodeAs[httpapi.OperationList](t, b.do(http.MethodGet, "/v1/operations", ""), http.StatusOK)
		if got, want := len(list.Operations), 1; got != want {
			t.Fatalf("listed: got %d, want %d", got, want)
		}
		decodeAs[httpapi.ChangeList](t, b.do(http.MethodGet, "/v1/changes", ""), http.StatusOK)
	})
}

// formatHours writes d as the API shows a whole number of hours.
func formatHours(d time.Duration) string {
	return strings.TrimSuffix(d.String(), "0m0s")
}
