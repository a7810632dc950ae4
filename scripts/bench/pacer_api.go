package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// createBenchScopes creates pacerScopes generic scopes "bench-0"… pointing
// at provider, as the throughput run does. With keyHeader the scopes'
// provider honours idempotency keys in that header, so their mutations'
// claims need no sync to disk before they leave (design §11 "Durable
// before it leaves"); without, every claim batch of mutations is synced.
func createBenchScopes(ctx context.Context, hc *http.Client, base, provider, keyHeader string) error {
	for i := range pacerScopes {
		body := fmt.Sprintf(`{"provider":"generic","baseURL":%q,"maxConcurrent":64,"idempotencyHeader":%q}`, provider, keyHeader)
		if keyHeader == "" {
			body = fmt.Sprintf(`{"provider":"generic","baseURL":%q,"maxConcurrent":64}`, provider)
		}
		if _, err := call(ctx, hc, http.MethodPut, fmt.Sprintf("%s/v1/scopes/bench-%d", base, i), body, http.StatusOK, http.StatusCreated); err != nil {
			return fmt.Errorf("create scope: %w", err)
		}
	}
	return nil
}

// enqueueBatch posts one {"operations":[…]} body to the batch API and checks
// that every item was created.
func enqueueBatch(ctx context.Context, hc *http.Client, base, body string) error {
	out, err := call(ctx, hc, http.MethodPost, base+"/v1/operations/batch", body, http.StatusOK, http.StatusCreated, http.StatusMultiStatus)
	if err != nil {
		return fmt.Errorf("enqueue batch: %w", err)
	}
	var br struct {
		Results []struct {
			Status int `json:"status"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &br); err != nil {
		return fmt.Errorf("decode batch response: %w", err)
	}
	for _, x := range br.Results {
		if x.Status != http.StatusCreated {
			return fmt.Errorf("enqueue batch: item status %d", x.Status)
		}
	}
	return nil
}

// waitPacerDone polls until no operation is pending (as the throughput run
// checks), then checks that none failed or was canceled.
func waitPacerDone(ctx context.Context, hc *http.Client, base string) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for pacer: %w", err)
		}
		empty, err := statesEmpty(ctx, hc, base, "", pacerPending)
		if err != nil {
			return err
		}
		if empty {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if empty, err := statesEmpty(ctx, hc, base, "", []string{"failed", "canceled"}); err != nil || !empty {
		return fmt.Errorf("check pacer: some operations failed or were canceled (err %v)", err)
	}
	return nil
}

// enqueueAll enqueues operations 0…n-1 through the batch API, 1,000 per
// call; item(j) is operation j's JSON object.
func enqueueAll(ctx context.Context, hc *http.Client, base string, n int, item func(j int) string) error {
	var b strings.Builder
	for i := 0; i < n; i += 1000 {
		b.Reset()
		b.WriteString(`{"operations":[`)
		for j := i; j < min(i+1000, n); j++ {
			if j > i {
				b.WriteByte(',')
			}
			b.WriteString(item(j))
		}
		b.WriteString(`]}`)
		if err := enqueueBatch(ctx, hc, base, b.String()); err != nil {
			return err
		}
	}
	return nil
}
