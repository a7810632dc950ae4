package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// settleAnswer claims every due operation and ends each with dec, keeping
// last as the operation's last answer and attempt as the attempt's copy.
func (b *uiBundle) settleAnswer(out providers.Outcome, dec scheduler.Decision, last, attempt *scheduler.Result) {
	b.t.Helper()
	ctx := context.Background()
	claims, err := b.store.ClaimDue(ctx, scheduler.ClaimParams{Now: b.svc.Now(), Limit: 100, LeaseFor: time.Minute})
	if err != nil {
		b.t.Fatalf("claim: %v", err)
	}
	cs := make([]scheduler.Completion, len(claims))
	for i, c := range claims {
		cs[i] = scheduler.Completion{
			OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt,
			FinishedAt: b.svc.Now(), Outcome: out, Decision: dec, Response: last, AttemptResponse: attempt,
		}
	}
	if _, err := b.store.Complete(ctx, cs); err != nil {
		b.t.Fatalf("complete: %v", err)
	}
}

// TestUI_OperationAnswer: the operation page shows the provider's last
// answer to an operation that did not succeed (status, headers, body as
// pretty JSON, text or a size; bounded) and each attempt's kept answer in
// a collapsed <details>, everything escaped and no secret-bearing header
// value shown.
func TestUI_OperationAnswer(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"alice"}})
	const cookie = "sess-cookie-value-7e2c"
	b.secrets = append(b.secrets, cookie, "api-key-in-answer-0b4d")
	b.scope("acct")
	failed := scheduler.Decision{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent, Reason: "provider rejected the request"}
	rejected := providers.Outcome{Class: providers.ClassPermanent, Status: 422, Detail: "validation failed"}
	headers := map[string]string{
		"Content-Type": "application/json; charset=utf-8", "X-Github-Request-Id": "C0DE:1234",
		"Set-Cookie": "session=" + cookie, "X-Api-Key": "api-key-in-answer-0b4d",
	}

	b.enqueue("acct", "json-1")
	body := `{"message":"Validation Failed","errors":[{"resource":"Repository","code":"already_exists","field":"name","note":"<script>alert(1)</script>"}]}`
	b.settleAnswer(rejected, failed,
		&scheduler.Result{Status: 422, Headers: headers, Body: []byte(body)},
		&scheduler.Result{Status: 422, Headers: headers, Body: []byte(`{"message":"attempt copy <script>x</script>"}`)})

	b.enqueue("acct", "text-1")
	b.settleAnswer(rejected, failed, &scheduler.Result{Status: 400, Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte("plain words <b>bold</b>\nline two")}, nil)

	b.enqueue("acct", "binary-1")
	b.settleAnswer(rejected, failed, &scheduler.Result{Status: 415, Headers: map[string]string{"Content-Type": "application/octet-stream"}, Body: []byte{0x00, 0xff, 0x10, 0x80, 0x01}}, nil)

	b.enqueue("acct", "big-1")
	var big strings.Builder
	big.WriteString(`{"items":[`)
	for i := 0; big.Len() < 40<<10; i++ {
		fmt.Fprintf(&big, `{"n":%d},`, i)
	}
	big.WriteString(`{"last":"tail-marker-9f"}]}`)
	b.settleAnswer(rejected, failed, &scheduler.Result{Status: 422, Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(big.String()), Truncated: true}, nil)
	b.signIn("alice")

	t.Run("JSON", func(t *testing.T) {
		p := b.get("/ui/operations/json-1")
		wantIn(t, p, http.StatusOK, "Last answer", "422 Unprocessable Entity",
			"X-Github-Request-Id: C0DE:1234", "Set-Cookie: <span class=\"muted\">value not shown", "X-Api-Key: <span class=\"muted\">value not shown",
			"  &#34;message&#34;: &#34;Validation Failed&#34;,\n", "&#34;code&#34;: &#34;already_exists&#34;",
			"&lt;script&gt;alert(1)&lt;/script&gt;",
			`<details class="answer-more">`, "attempt copy &lt;script&gt;x&lt;/script&gt;")
		if strings.Contains(p.Body, "<script>alert") || strings.Contains(p.Body, "<script>x") {
			t.Fatalf("the answer's <script> reached the page unescaped: %s", excerpt(p.Body))
		}
	})
	t.Run("Text", func(t *testing.T) {
		p := b.get("/ui/operations/text-1")
		wantIn(t, p, http.StatusOK, "400 Bad Request", "plain words &lt;b&gt;bold&lt;/b&gt;\nline two", "text/plain")
	})
	t.Run("Binary", func(t *testing.T) {
		p := b.get("/ui/operations/binary-1")
		wantIn(t, p, http.StatusOK, "5 bytes of application/octet-stream")
		if strings.Contains(p.Body, `class="answer-body`) {
			t.Fatalf("binary body printed: %s", excerpt(p.Body))
		}
	})
	t.Run("Bounded", func(t *testing.T) {
		p := b.get("/ui/operations/big-1")
		wantIn(t, p, http.StatusOK, "(cut when stored)", "Only the first 16,384 bytes are shown here.")
		if strings.Contains(p.Body, "tail-marker-9f") {
			t.Fatal("the page shows the whole 40 KiB body")
		}
	})
	t.Run("NoneWithoutAnswer", func(t *testing.T) {
		b.enqueue("acct", "plain-1")
		b.settle(rejected, failed)
		p := b.get("/ui/operations/plain-1")
		wantIn(t, p, http.StatusOK, "Attempt 1")
		if strings.Contains(p.Body, "Last answer") || strings.Contains(p.Body, "answer-more") {
			t.Fatal("an operation without a kept answer shows one")
		}
	})
}
