package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/urfave/cli/v2"

	"pacer/httpapi"
)

// followRetryMax bounds the pause between attempts to reach a server that
// went away while following.
const followRetryMax = 30 * time.Second

// followCommand prints the change feed as it happens.
func followCommand() *cli.Command {
	return clientCommand(&cli.Command{
		Name:  "follow",
		Usage: "print operation state changes as they happen (until interrupted)",
		Description: `Long-polls GET /v1/changes. Each line starts with the change's sequence
number: to resume later without missing anything, pass the last one seen
as --after. While pacer restarts, follow keeps trying (the server must
have answered once). With --json each change is one JSON object per line.`,
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.Int64Flag{Name: "after", Usage: "print the changes after this sequence number (0: from the oldest kept)"},
			&cli.StringFlag{Name: "scope", Usage: "only the changes of this provider scope"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "changes per request (1-1000)"},
			&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long one request waits for a change (at most 60s)"},
		},
		Action: runFollow,
	})
}

// runFollow long-polls the change feed until the context ends (SIGINT).
func runFollow(c *cli.Context) error {
	return follow(c, clock.New())
}

// follow is runFollow on clk, which paces the retries.
func follow(c *cli.Context, clk clock.Clock) error {
	if err := noOperands(c); err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	after := c.Int64("after")
	limit, wait := c.Int("limit"), c.Duration("wait")
	switch {
	case after < 0:
		return exitf(exitUsage, "--after must be 0 or a sequence number seen before")
	case limit < 1 || limit > 1000:
		return exitf(exitUsage, "--limit must be between 1 and 1000")
	case wait < 0 || wait > time.Minute:
		return exitf(exitUsage, "--wait must be between 0s and 60s")
	}
	ctx := c.Context
	answered := false
	failures := 0
	for ctx.Err() == nil {
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}, "wait": {wait.String()}}
		scope := c.String("scope")
		if scope != "" {
			q.Set("providerScope", scope)
			if !answered {
				q.Set("wait", "0s") // answers at once, so a scope that does not exist is said at once
			}
		}
		reqCtx, cancel := context.WithTimeout(ctx, wait+requestTimeout)
		var page httpapi.ChangeList
		status, err := cl.call(reqCtx, http.MethodGet, "/v1/changes", q, nil, &page)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			// Keep following through a restart of the server; stop on
			// anything else, and when it never answered (a wrong URL).
			if !answered || !(status == 0 || status >= 500) {
				return err
			}
			failures++
			pause := min(time.Duration(1<<min(failures-1, 5))*time.Second, followRetryMax)
			fmt.Fprintf(c.App.ErrWriter, "pacer: %v; retrying in %s\n", err, pause)
			select {
			case <-ctx.Done():
			case <-clk.After(pause):
			}
			continue
		}
		if !answered && scope != "" && len(page.Changes) == 0 {
			// A scope that does not exist has no changes to wait for: say
			// so rather than wait forever (issue 14).
			var sc httpapi.Scope
			if _, err := cl.call(ctx, http.MethodGet, "/v1/scopes/"+escapeID(scope), nil, nil, &sc); err != nil {
				return err
			}
		}
		answered, failures = true, 0
		for _, ch := range page.Changes {
			if err := printChange(c, ch); err != nil {
				return err
			}
		}
		after = page.Next
	}
	return nil // interrupted: a normal end
}

// printChange prints one change as a line of text or of JSON.
func printChange(c *cli.Context, ch httpapi.Change) error {
	if c.Bool("json") {
		b, err := json.Marshal(ch)
		if err != nil {
			return fmt.Errorf("encode change: %w", err)
		}
		_, err = fmt.Fprintf(c.App.Writer, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(c.App.Writer, "%-8d %s  %-16s %-24s %s\n", ch.Seq, showTime(ch.At), ch.State, ch.ProviderScope, ch.OperationID)
	return err
}
