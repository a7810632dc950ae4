package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/httpapi"
	"pacer/scheduler"
)

// putTestScope creates scope name on the bundle's server.
func putTestScope(t *testing.T, b *testBundle, name string) {
	t.Helper()
	res := b.do(http.MethodPut, "/v1/scopes/"+name, `{"provider":"generic","baseURL":"https://api.example.com"}`)
	if res.Status != http.StatusCreated {
		t.Fatalf("put scope %s: %d %s", name, res.Status, res.Body)
	}
}

// enqueueTest enqueues a GET operation id of scope on the bundle's server.
func enqueueTest(t *testing.T, b *testBundle, id, scope string) {
	t.Helper()
	res := b.do(http.MethodPost, "/v1/operations", fmt.Sprintf(`{"operationId":%q,"providerScope":%q,"request":{"method":"GET","path":"/x"}}`, id, scope))
	if res.Status != http.StatusCreated {
		t.Fatalf("enqueue %s: %d %s", id, res.Status, res.Body)
	}
}

// changesOf renders a change list as "seq:op:scope:state …|next".
func changesOf(l httpapi.ChangeList) string {
	parts := make([]string, len(l.Changes))
	for i, c := range l.Changes {
		parts[i] = fmt.Sprintf("%d:%s:%s:%s", c.Seq, c.OperationID, c.ProviderScope, c.State)
	}
	return fmt.Sprintf("%s|%d", strings.Join(parts, " "), l.Next)
}

func TestChangesHandler(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	putTestScope(t, b, "a")
	putTestScope(t, b, "b")
	enqueueTest(t, b, "a-1", "a")
	enqueueTest(t, b, "b-1", "b")
	res := b.do(http.MethodPost, "/v1/operations/a-1/cancel", `{"reason":"test"}`)
	if res.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", res.Status, res.Body)
	}

	for _, tc := range []struct {
		name, query, want string
	}{
		{"All", "", "1:a-1:a:scheduled 2:b-1:b:scheduled 3:a-1:a:canceled|3"},
		{"After", "?after=1", "2:b-1:b:scheduled 3:a-1:a:canceled|3"},
		{"Limit", "?after=0&limit=1", "1:a-1:a:scheduled|1"},
		{"Scope", "?providerScope=a", "1:a-1:a:scheduled 3:a-1:a:canceled|3"},
		{"AfterTheEndAtOnce", "?after=3", "|3"},
		{"AtTheEndNoWait", "?after=3&wait=0s", "|3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := decodeAs[httpapi.ChangeList](t, b.do(http.MethodGet, "/v1/changes"+tc.query, ""), http.StatusOK)
			if got := changesOf(l); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}

	t.Run("AtIsTheChangeTime", func(t *testing.T) {
		l := decodeAs[httpapi.ChangeList](t, b.do(http.MethodGet, "/v1/changes?limit=1", ""), http.StatusOK)
		if at := l.Changes[0].At; at == nil || !at.Equal(testNow) {
			t.Fatalf("at %v, want %v", at, testNow)
		}
	})

	t.Run("ErrValidation", func(t *testing.T) {
		p := problemOf(t, b.do(http.MethodGet, "/v1/changes?after=x&limit=1001&wait=-3s&providerScope=no%20spaces", ""), http.StatusUnprocessableEntity)
		for _, f := range []string{"after", "wait"} {
			if !hasField(p, f, "") {
				t.Errorf("no field error on %s: %+v", f, p.Errors)
			}
		}
		p = problemOf(t, b.do(http.MethodGet, "/v1/changes?limit=1001&providerScope=no%20spaces", ""), http.StatusUnprocessableEntity)
		for _, f := range []string{"limit", "providerScope"} {
			if !hasField(p, f, "") {
				t.Errorf("no field error on %s: %+v", f, p.Errors)
			}
		}
	})

	t.Run("ErrAhead", func(t *testing.T) {
		// A cursor past the newest change ever recorded: the database was
		// restored from an older backup. Reading on would skip the changes
		// that reuse those numbers.
		p := problemOf(t, b.do(http.MethodGet, "/v1/changes?after=10&wait=0s", ""), http.StatusConflict)
		if p.Type != httpapi.ProblemTypeFeedAhead || !strings.Contains(p.Detail, "after=10 is ahead") || !strings.Contains(p.Detail, "follow from after=3") {
			t.Fatalf("problem: %+v", p)
		}
	})

	t.Run("ErrTokenMissing", func(t *testing.T) {
		req := b.request(http.MethodGet, "/v1/changes", "")
		req.Header.Del("Authorization")
		problemOf(t, b.send(req), http.StatusUnauthorized)
	})
}

// longPoll starts GET /v1/changes?query and returns where its response
// will arrive.
func longPoll(b *testBundle, ctx context.Context, query string) <-chan response {
	done := make(chan response, 1)
	req := b.request(http.MethodGet, "/v1/changes"+query, "").WithContext(ctx)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- response{Status: -1, Body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		done <- response{Status: res.StatusCode, Header: res.Header, Body: body}
	}()
	return done
}

// awaitResponse waits for a long-poll's response (bounded: only a bug
// makes it endless).
func awaitResponse(t *testing.T, done <-chan response) response {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("the long-poll never answered")
		return response{}
	}
}

func TestChangesLongPollHTTP(t *testing.T) {
	t.Parallel()

	t.Run("AnswersWhenAChangeCommits", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		putTestScope(t, b, "a")
		enqueueTest(t, b, "a-1", "a")
		done := longPoll(b, context.Background(), "?after=1&wait=60s")
		enqueueTest(t, b, "a-2", "a")
		l := decodeAs[httpapi.ChangeList](t, awaitResponse(t, done), http.StatusOK)
		// The mock clock never moves: only the change can end the wait.
		if got, want := changesOf(l), "2:a-2:a:scheduled|2"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})

	t.Run("WaitsThenAnswersEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		done := longPoll(b, context.Background(), "?wait=30")
		var res response
		for i := 0; ; i++ {
			if i == 100_000 {
				t.Fatal("the long-poll never answered")
			}
			select {
			case res = <-done:
			default:
				b.clock.Add(500 * time.Millisecond)
				continue
			}
			break
		}
		l := decodeAs[httpapi.ChangeList](t, res, http.StatusOK)
		if got, want := changesOf(l), "|0"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
		if waited := b.clock.Now().Sub(testNow); waited < 30*time.Second {
			t.Fatalf("answered after %v of clock time, before the 30s wait", waited)
		}
	})

	t.Run("EndsAtShutdown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		done := longPoll(b, context.Background(), "?wait=60s")
		b.svc.Notifier().Close()
		l := decodeAs[httpapi.ChangeList](t, awaitResponse(t, done), http.StatusOK)
		if got, want := changesOf(l), "|0"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})

	t.Run("EndsWhenTheClientGoesAway", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx, cancel := context.WithCancel(context.Background())
		done := longPoll(b, ctx, "?wait=60s")
		cancel()
		res := awaitResponse(t, done)
		if res.Status != -1 || !strings.Contains(string(res.Body), context.Canceled.Error()) {
			t.Fatalf("got %d %s, want the client's cancellation", res.Status, res.Body)
		}
	})
}

func TestChangesHandler_Pruned(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	putTestScope(t, b, "a")
	enqueueTest(t, b, "a-1", "a")
	enqueueTest(t, b, "a-2", "a")
	for _, id := range []string{"a-1", "a-2"} {
		if res := b.do(http.MethodPost, "/v1/operations/"+id+"/cancel", `{"reason":"test"}`); res.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", res.Status, res.Body)
		}
	}
	b.clock.Add(time.Minute)
	enqueueTest(t, b, "a-3", "a") // 5: recorded after the cut-off
	// Retention removes the changes 1-4, recorded before the cut-off.
	if _, err := b.store.PruneFinished(context.Background(), scheduler.PruneParams{Before: testNow.Add(time.Second), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []string{"1", "3"} {
		p := problemOf(t, b.do(http.MethodGet, "/v1/changes?wait=0s&after="+after, ""), http.StatusGone)
		if p.Type != httpapi.ProblemTypeFeedPruned || !strings.Contains(p.Detail, "changes after "+after+" were pruned") || !strings.Contains(p.Detail, "follow from after=4") {
			t.Fatalf("after=%s: problem %+v", after, p)
		}
	}
	// A reader that had seen 4, and a new reader, go on.
	for _, q := range []string{"?after=4", ""} {
		l := decodeAs[httpapi.ChangeList](t, b.do(http.MethodGet, "/v1/changes"+q, ""), http.StatusOK)
		if got, want := changesOf(l), "5:a-3:a:scheduled|5"; got != want {
			t.Fatalf("%s: got %s, want %s", q, got, want)
		}
	}
}
