package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// storedAnswer is what GET /v1/operations/{id} shows of an answer.
type storedAnswer struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       json.RawMessage   `json:"body"`
	BodyBase64 string            `json:"bodyBase64"`
	Truncated  bool              `json:"truncated"`
}

// storedOperation reads an operation's state, result and last answer
// through the API, the bodies as sent.
func storedOperation(t *testing.T, p *pacerProc, id string) (state string, result, last *storedAnswer) {
	t.Helper()
	resp, err := http.Get(p.base + "/v1/operations/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var op struct {
		State       string        `json:"state"`
		Result      *storedAnswer `json:"result"`
		LastOutcome *struct {
			Response *storedAnswer `json:"response"`
		} `json:"lastOutcome"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&op); err != nil {
		t.Fatalf("operation %s: %v", id, err)
	}
	if op.LastOutcome != nil {
		last = op.LastOutcome.Response
	}
	return op.State, op.Result, last
}

// String sums an answer up for a failure message, without its body.
func (a *storedAnswer) String() string {
	if a == nil {
		return "none"
	}
	return fmt.Sprintf("status %d, %d+%d body bytes (JSON+base64), truncated %v", a.Status, len(a.Body), len(a.BodyBase64), a.Truncated)
}

// bodyOf returns an answer's body bytes, JSON or base64.
func bodyOf(t *testing.T, a *storedAnswer) []byte {
	t.Helper()
	if a.BodyBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(a.BodyBase64)
		if err != nil {
			t.Fatalf("bodyBase64: %v", err)
		}
		return b
	}
	return a.Body
}

// TestAnswersKeptEndToEnd runs the real binary (design §12): a 300 KiB
// JSON success body is stored whole under serve's default result limit
// and cut, marked truncated, under --result-limit 64KiB; a 422 with a JSON
// error body ends a mutation failed with that body in
// lastOutcome.response.
func TestAnswersKeptEndToEnd(t *testing.T) {
	t.Parallel()
	items := make([]map[string]any, 0, 4000)
	for i := 0; ; i++ {
		items = append(items, map[string]any{"id": i, "full_name": fmt.Sprintf("octo/repo-%05d", i), "description": strings.Repeat("d", 40)})
		if i%100 == 0 {
			if b, _ := json.Marshal(items); len(b) >= 300<<10 {
				break
			}
		}
	}
	big, _ := json.Marshal(items)
	errBody := []byte(`{"message":"Repository creation failed.","errors":[{"resource":"Repository","code":"custom","field":"name","message":"name already exists on this account"}],"documentation_url":"https://docs.github.com/rest/repos/repos#create-a-repository-for-the-authenticated-user","status":"422"}`)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/user/repos":
			_, _ = w.Write(big)
		case r.Method == http.MethodPost && r.URL.Path == "/user/repos":
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write(errBody)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer provider.Close()

	t.Run("DefaultLimitKeepsWhole", func(t *testing.T) {
		p := startPacer(t, filepath.Join(t.TempDir(), "pacer.db"), freeAddr(t))
		putScope(t, p, "gh", provider.URL, "")
		enqueue(t, p, map[string]any{"operationId": "list", "providerScope": "gh", "request": map[string]any{"method": "GET", "path": "/user/repos"}})
		enqueue(t, p, map[string]any{"operationId": "create", "providerScope": "gh",
			"request": map[string]any{"method": "POST", "path": "/user/repos", "body": map[string]any{"name": "hello"}}})
		p.waitState(t, "list", "succeeded")
		_, res, _ := storedOperation(t, p, "list")
		if res == nil || res.Status != 200 || res.Truncated {
			t.Fatalf("result %v, want 200 whole", res)
		}
		if got := bodyOf(t, res); !bytes.Equal(got, big) {
			t.Fatalf("stored body is %d bytes, want the %d sent, byte for byte", len(got), len(big))
		}

		p.waitState(t, "create", "failed")
		_, _, last := storedOperation(t, p, "create")
		if last == nil || last.Status != 422 || last.Truncated {
			t.Fatalf("lastOutcome.response %v, want the 422 whole", last)
		}
		if got := bodyOf(t, last); !bytes.Equal(got, errBody) {
			t.Fatalf("lastOutcome.response body %s, want %s", got, errBody)
		}
		if ct := last.Headers["Content-Type"]; !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("lastOutcome.response headers %v lack the Content-Type", last.Headers)
		}
	})
	t.Run("ResultLimitCuts", func(t *testing.T) {
		p := startPacer(t, filepath.Join(t.TempDir(), "pacer.db"), freeAddr(t), "--result-limit", "64KiB")
		putScope(t, p, "gh", provider.URL, "")
		enqueue(t, p, map[string]any{"operationId": "list", "providerScope": "gh", "request": map[string]any{"method": "GET", "path": "/user/repos"}})
		p.waitState(t, "list", "succeeded")
		_, res, _ := storedOperation(t, p, "list")
		if res == nil || !res.Truncated {
			t.Fatalf("result %v, want it marked truncated", res)
		}
		got := bodyOf(t, res)
		if len(got) == 0 || len(got) > 64<<10 || !bytes.HasPrefix(big, got) {
			t.Fatalf("stored body is %d bytes, want a prefix of the body of at most 64 KiB", len(got))
		}
	})
}
