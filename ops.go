package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"pacer/httpapi"
	"pacer/scheduler"
)

// opsCommand groups the client commands on operations.
func opsCommand() *cli.Command {
	return &cli.Command{
		Name:  "ops",
		Usage: "list, inspect and act on operations of a running pacer",
		Subcommands: []*cli.Command{
			clientCommand(&cli.Command{
				Name:      "list",
				Usage:     "list operations, newest first",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "state", Usage: "only this state: scheduled, waitingForBudget, running, held, succeeded, failed, canceled"},
					&cli.StringFlag{Name: "scope", Usage: "only this provider scope"},
					&cli.StringFlag{Name: "reason", Usage: "only this hold or failure reason (unknownOutcome, authRevoked, permanent, retryBudgetExhausted, …)"},
					&cli.StringFlag{Name: "created-after", Usage: "created at or after this RFC 3339 time"},
					&cli.StringFlag{Name: "created-before", Usage: "created before this RFC 3339 time"},
					&cli.StringFlag{Name: "updated-after", Usage: "updated at or after this RFC 3339 time"},
					&cli.StringFlag{Name: "updated-before", Usage: "updated before this RFC 3339 time"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "operations per page (1-1000)"},
					&cli.StringFlag{Name: "cursor", Usage: "continue after a previous page (its next cursor)"},
					&cli.BoolFlag{Name: "all", Usage: "follow the cursor through every page"},
				},
				Action: runOpsList,
			}),
			clientCommand(&cli.Command{
				Name:      "show",
				Usage:     "show one operation",
				ArgsUsage: "OPERATION_ID",
				Action:    runOpsShow,
			}),
			clientCommand(&cli.Command{
				Name:      "attempts",
				Usage:     "show an operation's attempts: what the provider said and what pacer decided",
				ArgsUsage: "OPERATION_ID",
				Action:    runOpsAttempts,
			}),
			clientCommand(&cli.Command{
				Name:      "audit",
				Usage:     "show who acted on an operation, when and why",
				ArgsUsage: "OPERATION_ID",
				Action:    runOpsAudit,
			}),
			actionCommand("release", "run a held or failed operation again, with a fresh retry budget (--all: every one matching the filters)", "OPERATION_ID | --all", runOpsRelease,
				append([]cli.Flag{reasonFlag(),
					&cli.StringFlag{Name: "at", Usage: "RFC 3339 time to run it (default: now)"}}, bulkFlags()...)...),
			actionCommand("resolve", "say what happened at the provider to a mutation held for unknownOutcome", "OPERATION_ID", runOpsResolve,
				&cli.StringFlag{Name: "outcome", Usage: "succeeded (it applied), release (it did not: send it again, same identity) or failed (it did not: do not send it) (required)"},
				reasonFlag()),
			actionCommand("cancel", "cancel an operation that is not running or finished (--all: every one matching the filters)", "OPERATION_ID | --all", runOpsCancel,
				append([]cli.Flag{reasonFlag()}, bulkFlags()...)...),
			actionCommand("unrelease", "undo a release that has not been sent yet (change one with release --at)", "OPERATION_ID", runOpsUnrelease,
				reasonFlag()),
		},
	}
}

// runOpsList prints one page of operations (every page with --all).
func runOpsList(c *cli.Context) error {
	if err := noOperands(c); err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	q := url.Values{}
	for flag, param := range map[string]string{"state": "state", "scope": "providerScope", "reason": "reason", "cursor": "cursor"} {
		if v := c.String(flag); v != "" {
			q.Set(param, v)
		}
	}
	for flag, param := range map[string]string{"created-after": "createdAfter", "created-before": "createdBefore", "updated-after": "updatedAfter", "updated-before": "updatedBefore"} {
		v, err := parseTimeFlag(c, flag)
		if err != nil {
			return err
		}
		if v != "" {
			q.Set(param, v)
		}
	}
	if n := c.Int("limit"); n < 1 || n > 1000 {
		return exitf(exitUsage, "--limit must be between 1 and 1000")
	}
	q.Set("limit", strconv.Itoa(c.Int("limit")))

	var all httpapi.OperationList
	for {
		var page httpapi.OperationList
		if _, err := cl.call(c.Context, http.MethodGet, "/v1/operations", q, nil, &page); err != nil {
			return err
		}
		all.Operations = append(all.Operations, page.Operations...)
		all.Next = page.Next
		if !c.Bool("all") || page.Next == nil {
			break
		}
		q.Set("cursor", *page.Next)
	}
	if all.Operations == nil {
		all.Operations = []httpapi.Operation{}
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, all)
	}
	if len(all.Operations) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "no operations")
		return err
	}
	tw := newTable(c.App.Writer)
	fmt.Fprintln(tw, "OPERATION\tSCOPE\tSTATE\tATTEMPT\tNEXT ATTEMPT\tUPDATED")
	for _, op := range all.Operations {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", op.OperationID, op.ProviderScope, stateWithReason(op), op.Attempt, showTime(op.NextAttemptAt), showTime(op.UpdatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if all.Next != nil {
		fmt.Fprintf(c.App.ErrWriter, "more: add --cursor %s (or --all)\n", *all.Next)
	}
	return nil
}

// stateWithReason shows a state with its hold or failure reason, or what
// blocks it: "held (unknownOutcome)", "scheduled (blocked: scopeHeld)".
func stateWithReason(op httpapi.Operation) string {
	switch {
	case op.HoldReason != nil:
		return op.State + " (" + *op.HoldReason + ")"
	case op.FailureReason != nil:
		return op.State + " (" + *op.FailureReason + ")"
	case op.BlockedBy != nil:
		return op.State + " (blocked: " + *op.BlockedBy + ")"
	}
	return op.State
}

// runOpsShow prints one operation.
func runOpsShow(c *cli.Context) error {
	id, err := oneOperand(c, "operation ID")
	if err != nil {
		return err
	}
	return request(c, http.MethodGet, "/v1/operations/"+escapeID(id), nil, printOperation)
}

// printOperation prints an operation as "field value" lines.
func printOperation(w io.Writer, op httpapi.Operation) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("operation", op.OperationID)
	row("scope", op.ProviderScope+" ("+op.Provider+")")
	row("kind", op.Kind)
	row("state", stateWithReason(op))
	row("attempt", strconv.Itoa(op.Attempt))
	row("next attempt", showTime(op.NextAttemptAt))
	row("request", op.Request.Method+" "+op.Request.Path)
	row("request identity", op.RequestIdentity)
	row("retry", fmt.Sprintf("%d attempts within %s (rate limits do not count)", op.Retry.MaxAttempts, op.Retry.MaxElapsed))
	row("created", showTime(op.CreatedAt))
	row("updated", showTime(op.UpdatedAt))
	row("deadline", showTime(op.Deadline))
	if op.MaybeApplied {
		row("may have applied", "yes: an attempt got no definite answer, so it is held rather than failed")
	}
	if lo := op.LastOutcome; lo != nil {
		row("last outcome", outcomeSummary(lo.Class, lo.Status, lo.Hint, lo.Detail))
	}
	if res := op.Result; res != nil {
		row("result", fmt.Sprintf("HTTP %d", res.Status))
	}
	return tw.Flush()
}

// outcomeSummary is one line on what an attempt's answer meant.
func outcomeSummary(class string, status *int, hint *httpapi.Hint, detail *string) string {
	parts := []string{class}
	if status != nil {
		parts = append(parts, fmt.Sprintf("HTTP %d", *status))
	}
	if hint != nil {
		parts = append(parts, fmt.Sprintf("hint %s=%s", hint.Source, hint.Raw))
	}
	if detail != nil && *detail != "" {
		parts = append(parts, "— "+oneLine(*detail))
	}
	return strings.Join(parts, " ")
}

// runOpsAttempts prints an operation's attempts, oldest first.
func runOpsAttempts(c *cli.Context) error {
	id, err := oneOperand(c, "operation ID")
	if err != nil {
		return err
	}
	return request(c, http.MethodGet, "/v1/operations/"+escapeID(id)+"/attempts", nil, func(w io.Writer, list httpapi.AttemptList) error {
		return printAttempts(w, id, list)
	})
}

func runOpsAudit(c *cli.Context) error {
	id, err := oneOperand(c, "operation ID")
	if err != nil {
		return err
	}
	return request(c, http.MethodGet, "/v1/operations/"+escapeID(id)+"/audit", nil, func(w io.Writer, list httpapi.AuditList) error {
		if len(list.Audit) == 0 {
			_, err := fmt.Fprintf(w, "no one has acted on %s yet\n", id)
			return err
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "WHEN\tWHO\tACTION\tREASON\tCHANGE")
		for _, e := range list.Audit {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", showTime(e.At), e.Actor, e.Action, oneLine(e.Reason), oneLine(e.Detail))
		}
		return tw.Flush()
	})
}

// maxDetailColumn bounds the detail an attempts table shows per row; ops
// attempts --json has it whole.
const maxDetailColumn = 160

// printAttempts prints operation id's attempts as table rows.
func printAttempts(w io.Writer, id string, list httpapi.AttemptList) error {
	if len(list.Attempts) == 0 {
		_, err := fmt.Fprintf(w, "no attempts yet for %s\n", id)
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "#\tSTARTED\tCLASS\tSTATUS\tHINT\tDURATION\tDECISION\tDETAIL")
	for _, a := range list.Attempts {
		hint := "-"
		if a.Hint != nil {
			hint = a.Hint.Source + "=" + a.Hint.Raw
		}
		duration := "-"
		if a.DurationMs != nil {
			duration = fmt.Sprintf("%dms", *a.DurationMs)
		}
		decision := "-"
		if d := a.Decision; d != nil {
			decision = d.State
			if d.At != nil {
				decision += " at " + showTime(d.At)
			}
			if d.Reason != "" {
				decision += ": " + oneLine(d.Reason)
			}
		}
		if a.Stale {
			decision += " (stale: discarded)"
		}
		detail := "-"
		if a.Detail != nil && *a.Detail != "" {
			detail = oneLine(*a.Detail)
			if r := []rune(detail); len(r) > maxDetailColumn {
				detail = string(r[:maxDetailColumn]) + "…"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Number, showTime(a.StartedAt), showString(a.Class), showInt(a.Status), hint, duration, decision, detail)
	}
	return tw.Flush()
}

// runOpsRelease releases a held or failed operation.
func runOpsRelease(c *cli.Context) error {
	if c.Bool("all") {
		if c.String("at") != "" {
			return exitf(exitUsage, "--at does not go with --all: an action on many releases now")
		}
		return opsBulk(c, "release")
	}
	id, reason, err := operandAndReason(c, "operation ID")
	if err != nil {
		return err
	}
	at, err := parseTimeFlag(c, "at")
	if err != nil {
		return err
	}
	return opsAction(c, id, "release", httpapi.ReleaseRequest{At: at, Reason: reason})
}

// runOpsResolve resolves an operation held for unknownOutcome.
func runOpsResolve(c *cli.Context) error {
	id, err := oneOperand(c, "operation ID")
	if err != nil {
		return err
	}
	outcome := c.String("outcome")
	if scheduler.Resolution(outcome).Words() == "" {
		return exitf(exitUsage, "--outcome %s: what you found at the provider", scheduler.ResolutionChoices())
	}
	reason, err := requireReason(c)
	if err != nil {
		return err
	}
	return opsAction(c, id, "resolve", httpapi.ResolveRequest{Outcome: outcome, Reason: reason})
}

// bulkFlags select the operations of release --all and cancel --all.
func bulkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "all", Usage: "act on every operation matching --state, --scope and --filter-reason (at least one)"},
		&cli.StringFlag{Name: "state", Usage: "with --all: only operations in this state"},
		&cli.StringFlag{Name: "scope", Usage: "with --all: only operations of this provider scope"},
		&cli.StringFlag{Name: "filter-reason", Usage: "with --all: only operations held or failed for this reason"},
	}
}

// opsBulk releases (now) or cancels every operation matching the filter
// flags (design §14) and says how many.
func opsBulk(c *cli.Context, action string) error {
	if err := noOperands(c); err != nil {
		return err
	}
	reason, err := requireReason(c)
	if err != nil {
		return err
	}
	body := httpapi.BulkRequest{Action: action, Reason: reason,
		Filter: httpapi.BulkFilter{State: c.String("state"), ProviderScope: c.String("scope"), Reason: c.String("filter-reason")}}
	return request(c, http.MethodPost, "/v1/operations/bulk", body, func(w io.Writer, res httpapi.BulkResponse) error {
		done := scheduler.ManualAction(action).Done()
		_, err := fmt.Fprintf(w, "%s %d operations; %d matched but could not be %s\n", done, res.Changed, res.Skipped, done)
		if err == nil && res.More {
			_, err = fmt.Fprintln(w, "more may match: run it again")
		}
		return err
	})
}

// runOpsCancel cancels an operation.
func runOpsCancel(c *cli.Context) error {
	if c.Bool("all") {
		return opsBulk(c, "cancel")
	}
	id, reason, err := operandAndReason(c, "operation ID")
	if err != nil {
		return err
	}
	return opsAction(c, id, "cancel", httpapi.CancelRequest{Reason: reason})
}

// runOpsUnrelease undoes a release not sent yet: the operation goes back
// to what it was released from.
func runOpsUnrelease(c *cli.Context) error {
	id, reason, err := operandAndReason(c, "operation ID")
	if err != nil {
		return err
	}
	return opsAction(c, id, "unrelease", httpapi.UnreleaseRequest{Reason: reason})
}

// opsAction posts a manual action and prints the operation it left.
func opsAction(c *cli.Context, id, action string, body any) error {
	return request(c, http.MethodPost, "/v1/operations/"+escapeID(id)+"/"+action, body, printOperationLine)
}

// printOperationLine prints an operation as one table row with a header.
func printOperationLine(w io.Writer, op httpapi.Operation) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "OPERATION\tSCOPE\tSTATE\tNEXT ATTEMPT")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", op.OperationID, op.ProviderScope, stateWithReason(op), showTime(op.NextAttemptAt))
	return tw.Flush()
}
