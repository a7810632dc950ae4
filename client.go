package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"pacer/httpapi"
)

// Exit codes of the client commands (enqueue, ops, scopes, follow).
const (
	// exitError: the server failed or could not be reached, or refused
	// the API token.
	exitError = 1
	// exitUsage: bad flags, arguments or input file, or the server
	// rejected the input (400, 413, 415, 422).
	exitUsage = 2
	// exitNotFoundOrConflict: no such operation or scope, or its state
	// does not allow the action (404, 409). serve uses 3 for "another
	// process holds the database", a conflict too.
	exitNotFoundOrConflict = 3
)

// DefaultServer is where the client commands find pacer unless told.
const defaultServer = "http://127.0.0.1:8080"

// requestTimeout bounds one client request other than a long-poll.
const requestTimeout = 30 * time.Second

// clientFlags are the flags of every client command.
func clientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "server", Value: defaultServer, EnvVars: []string{"PACER_SERVER"}, Usage: "URL of the running pacer"},
		&cli.StringFlag{Name: "api-token", EnvVars: []string{"PACER_API_TOKEN"}, Usage: "the server's API token (prefer the environment variable or --api-token-file: flags show in ps)"},
		&cli.StringFlag{Name: "api-token-file", EnvVars: []string{"PACER_API_TOKEN_FILE"}, Usage: "file holding the server's API token"},
		&cli.BoolFlag{Name: "json", EnvVars: []string{"PACER_JSON"}, Usage: "print JSON (for scripts) instead of a table"},
	}
}

// clientCommand fills in what every client command shares: its flags
// (clientFlags first) and usage errors that exit with exitUsage.
func clientCommand(cmd *cli.Command) *cli.Command {
	cmd.Flags = append(clientFlags(), cmd.Flags...)
	return cmd
}

// actionCommand is a client command that acts on the one operand named
// in argsUsage (an operation ID, a scope); flags list its own flags,
// reasonFlag among them.
func actionCommand(name, usage, argsUsage string, action cli.ActionFunc, flags ...cli.Flag) *cli.Command {
	return clientCommand(&cli.Command{Name: name, Usage: usage, ArgsUsage: argsUsage, Flags: flags, Action: action})
}

// reasonFlag is --reason: why a manual action is taken, for the audit
// trail (see requireReason).
func reasonFlag() cli.Flag {
	return &cli.StringFlag{Name: "reason", Usage: "why, for the audit trail (required)"}
}

// requireReason returns --reason, or a usage error.
func requireReason(c *cli.Context) (string, error) {
	r := strings.TrimSpace(c.String("reason"))
	if r == "" {
		return "", exitf(exitUsage, "--reason is required: say why, for the audit trail")
	}
	return r, nil
}

// operandAndReason returns the single positional argument named what
// and --reason, or the usage error of the first one missing.
func operandAndReason(c *cli.Context, what string) (operand, reason string, err error) {
	if operand, err = oneOperand(c, what); err != nil {
		return "", "", err
	}
	if reason, err = requireReason(c); err != nil {
		return "", "", err
	}
	return operand, reason, nil
}

// exitf returns an error that makes pacer print one line and exit with
// code.
func exitf(code int, format string, args ...any) error {
	return cli.Exit(oneLine(fmt.Sprintf(format, args...)), code)
}

// oneLine folds s onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// apiClient speaks to a running pacer over its /v1 API.
type apiClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

// newClient returns the client the command's flags describe.
func newClient(c *cli.Context) (*apiClient, error) {
	server := c.String("server")
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, exitf(exitUsage, "--server %q is not an http or https URL such as %s", server, defaultServer)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	token := c.String("api-token")
	if file := c.String("api-token-file"); file != "" {
		if token != "" {
			return nil, exitf(exitUsage, "give the API token once: --api-token (PACER_API_TOKEN) or --api-token-file, not both")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, exitf(exitUsage, "read --api-token-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return &apiClient{
		base:  u,
		token: token,
		http:  &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}, nil
}

// call sends method path?query with the JSON of in (none when nil) and
// decodes a 2xx answer into out (ignored when nil). It returns the status.
// Failures are one-line exit errors: the problem's detail for an error
// answer, "cannot reach pacer at URL: …" when there is no answer. A
// request is bounded by requestTimeout unless ctx has an earlier deadline.
func (cl *apiClient) call(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	// path is already escaped (see escapeID): keep it as written.
	target := cl.base.String() + path
	if q := query.Encode(); q != "" {
		target += "?" + q
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return 0, exitf(exitUsage, "build request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return 0, err
		}
		return 0, exitf(exitError, "cannot reach pacer at %s: %v", cl.base.Redacted(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, exitf(exitError, "read the answer of pacer at %s: %v", cl.base.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, problemError(resp, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, exitf(exitError, "pacer at %s answered %s %s with something that is not the expected JSON: %v", cl.base.Redacted(), method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// request makes one call to the running pacer with the JSON of body
// (none when nil) and prints the answer: as JSON with --json, otherwise
// with print.
func request[T any](c *cli.Context, method, path string, body any, print func(io.Writer, T) error) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	var out T
	if _, err := cl.call(c.Context, method, path, nil, body, &out); err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, out)
	}
	return print(c.App.Writer, out)
}

// unwrapURLError drops the "Get \"URL\":" prefix *url.Error adds, since
// the message names the server already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// problemError turns an error answer into a one-line exit error with the
// exit code its status calls for.
func problemError(resp *http.Response, data []byte) error {
	code := exitCodeFor(resp.StatusCode)
	var p httpapi.Problem
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if (mt == "application/problem+json" || mt == "application/json") && json.Unmarshal(data, &p) == nil && p.Detail != "" {
		msg := p.Detail
		if resp.StatusCode == http.StatusUnauthorized {
			msg += " (set the token with PACER_API_TOKEN, --api-token-file or --api-token)"
		}
		return exitf(code, "%s", msg)
	}
	return exitf(code, "pacer answered %s", resp.Status)
}

// exitCodeFor maps an HTTP error status to the exit code.
func exitCodeFor(status int) int {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return exitUsage
	case http.StatusNotFound, http.StatusConflict:
		return exitNotFoundOrConflict
	}
	return exitError
}

// escapeID escapes an operation ID or scope name as one path segment (an
// operation ID may contain '/').
func escapeID(id string) string { return url.PathEscape(id) }

// operands returns the command's positional arguments. The flag parser
// stops at the first operand, but people write flags after it ("pacer ops
// release ID --reason …"): those are applied here.
func operands(c *cli.Context) ([]string, error) {
	var out []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := findFlag(c.Command, name)
		if f == nil {
			return nil, exitf(exitUsage, "flag provided but not defined: -%s (see pacer %s --help)", name, commandPath(c))
		}
		if _, isBool := f.(*cli.BoolFlag); isBool {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(args) {
				return nil, exitf(exitUsage, "flag needs an argument: -%s", name)
			}
			i++
			value = args[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, exitf(exitUsage, "invalid value %q for flag -%s: %v", value, name, err)
		}
	}
	return out, nil
}

// findFlag returns the command's flag called name, or nil.
func findFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// oneOperand returns the single positional argument named what.
func oneOperand(c *cli.Context, what string) (string, error) {
	args, err := operands(c)
	if err != nil {
		return "", err
	}
	if len(args) != 1 || args[0] == "" {
		return "", exitf(exitUsage, "give one %s: pacer %s [flags] %s", what, commandPath(c), strings.ToUpper(strings.ReplaceAll(what, " ", "_")))
	}
	return args[0], nil
}

// noOperands fails when the command was given positional arguments.
func noOperands(c *cli.Context) error {
	args, err := operands(c)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return exitf(exitUsage, "unexpected argument %q (see pacer %s --help)", args[0], commandPath(c))
	}
	return nil
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a tabwriter for aligned columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// showTime formats an optional time for a table ("-" when absent).
func showTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// showString formats an optional string for a table ("-" when absent).
func showString(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return oneLine(*s)
}

// showInt formats an optional number for a table ("-" when absent).
func showInt[T int | int64](n *T) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// parseTimeFlag reads an RFC 3339 flag value; empty gives "".
func parseTimeFlag(c *cli.Context, name string) (string, error) {
	v := c.String(name)
	if v == "" {
		return "", nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return "", exitf(exitUsage, "--%s %q is not an RFC 3339 time such as 2026-09-11T02:00:00Z", name, v)
	}
	return t.UTC().Format(time.RFC3339Nano), nil
}

// commandPath is the words that name c's command after "pacer": "ops
// show", "users add".
func commandPath(c *cli.Context) string {
	var words []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" && l.Command.Name != c.App.Name { // the app's own root command
			words = append([]string{l.Command.Name}, words...)
		}
	}
	return strings.Join(words, " ")
}
