package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"pacer/httpapi"
)

// scopesCommand groups the client commands on provider scopes.
func scopesCommand() *cli.Command {
	return &cli.Command{
		Name:  "scopes",
		Usage: "list, inspect, configure and resume provider scopes of a running pacer",
		Subcommands: []*cli.Command{
			clientCommand(&cli.Command{
				Name:      "list",
				Usage:     "list every scope",
				ArgsUsage: " ",
				Action:    runScopesList,
			}),
			clientCommand(&cli.Command{
				Name:      "show",
				Usage:     "show one scope",
				ArgsUsage: "SCOPE",
				Action:    runScopesShow,
			}),
			clientCommand(&cli.Command{
				Name:  "set",
				Usage: "create or replace a scope",
				Description: `Replaces the whole scope: give its credentials again, or pass
--no-credentials to remove them. The secret (token, header value or
password) is read from --token-file or from the environment variable
named by --token-env, never from the command line. An oauth2 grant
(--credentials oauth2) takes --token-url, --client-id, --scope and
--auth-style, its client secret and refresh token from
--client-secret-file/-env and --refresh-token-file/-env; a GitHub App
(--credentials githubApp) --app-id, --installation-id and its private
key from --private-key-file/-env. --file takes the
JSON body of PUT /v1/scopes/{providerScope}; flags given with it
override its fields.`,
				ArgsUsage: "SCOPE",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "JSON scope to start from"},
					&cli.StringFlag{Name: "provider", Usage: "provider profile: github, stripe, generic, …"},
					&cli.StringFlag{Name: "base-url", Usage: "absolute URL operation paths are relative to"},
					&cli.StringFlag{Name: "credentials", Usage: "credential type: bearer, header, basic, oauth2 or githubApp (default bearer when a secret is given)"},
					&cli.StringFlag{Name: "token-file", Usage: "file holding the secret: bearer token, header value or basic password"},
					&cli.StringFlag{Name: "token-env", Usage: "name of the environment variable holding the secret"},
					&cli.StringFlag{Name: "header-name", Usage: "header carrying the secret, for --credentials header"},
					&cli.StringFlag{Name: "username", Usage: "user name, for --credentials basic"},
					&cli.BoolFlag{Name: "no-credentials", Usage: "the scope sends no credentials (removes any it had)"},
					&cli.IntFlag{Name: "max-concurrent", Usage: "requests in flight at once (default: the profile's)"},
					&cli.StringFlag{Name: "rate", Usage: "configured budget as REQUESTS/PER, e.g. 5000/1h (default: the profile's)"},
					&cli.StringFlag{Name: "idempotency-header", Usage: "header a generic provider honours idempotency keys in"},
					&cli.StringFlag{Name: "group", Usage: "scopes sharing a provider-wide limit (default: the provider)"},
					&cli.IntFlag{Name: "budget-reserve", Usage: "requests of the provider's budget kept back"},
				}, grantFlags()...),
				Action: runScopesSet,
			}),
			actionCommand("resume", "lift a scope's hold and pause", "SCOPE", runScopesResume,
				reasonFlag()),
			actionCommand("pause", "pause a scope by hand until a time (resume lifts it sooner)", "SCOPE", runScopesPause,
				&cli.StringFlag{Name: "until", Usage: "RFC 3339 time the pause ends (required)"},
				reasonFlag()),
		},
	}
}

// runScopesList prints every scope.
func runScopesList(c *cli.Context) error {
	if err := noOperands(c); err != nil {
		return err
	}
	return request(c, http.MethodGet, "/v1/scopes", nil, func(w io.Writer, list httpapi.ScopeList) error {
		if len(list.Scopes) == 0 {
			_, err := fmt.Fprintln(w, "no scopes: create one with pacer scopes set")
			return err
		}
		return printScopeRows(w, list.Scopes...)
	})
}

// printScopeRows prints scopes as table rows with a header.
func printScopeRows(w io.Writer, scopes ...httpapi.Scope) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SCOPE\tPROVIDER\tSTATUS\tIN FLIGHT\tREMAINING\tRESET\tCREDENTIALS")
	for _, s := range scopes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", s.ProviderScope, s.Provider, scopeStatus(s),
			s.InFlight, s.MaxConcurrent, showInt(s.Remaining), showTime(s.ResetAt), credentialsStatus(s.Credentials))
	}
	return tw.Flush()
}

// scopeStatus shows a status with its reason: "held (authRevoked)",
// "paused until …".
func scopeStatus(s httpapi.Scope) string {
	switch {
	case s.Status == "held" && s.HoldReason != nil:
		return "held (" + *s.HoldReason + ")"
	case s.Status == "paused" && s.PausedUntil != nil:
		return "paused until " + showTime(s.PausedUntil)
	}
	return s.Status
}

// credentialsStatus shows whether credentials are configured.
func credentialsStatus(c httpapi.CredentialsStatus) string {
	if !c.Configured {
		return "none"
	}
	return c.Type
}

// runScopesShow prints one scope.
func runScopesShow(c *cli.Context) error {
	name, err := oneOperand(c, "scope")
	if err != nil {
		return err
	}
	return request(c, http.MethodGet, "/v1/scopes/"+escapeID(name), nil, printScope)
}

// printScope prints a scope as "field value" lines.
func printScope(w io.Writer, s httpapi.Scope) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("scope", s.ProviderScope)
	row("provider", s.Provider)
	row("base URL", s.BaseURL)
	row("credentials", credentialsStatus(s.Credentials))
	if s.Credentials.Type == "oauth2" || s.Credentials.Type == "githubApp" {
		row("token", grantStatus(s.Credentials))
	}
	row("status", scopeStatus(s))
	if s.PauseReason != nil {
		row("pause reason", showString(s.PauseReason))
	}
	row("in flight", fmt.Sprintf("%d of %d", s.InFlight, s.MaxConcurrent))
	if rl := s.RateLimit; rl != nil {
		row("rate limit", fmt.Sprintf("%d per %s", rl.Requests, rl.Per))
	}
	row("idempotency header", showString(s.IdempotencyHeader))
	row("budget", fmt.Sprintf("%s of %s remaining, reset %s", showInt(s.Remaining), showInt(s.Limit), showTime(s.ResetAt)))
	for _, r := range s.Resources {
		line := fmt.Sprintf("%s of %s remaining, reset %s, %s", showInt(r.Remaining), showInt(r.Limit), showTime(r.ResetAt), r.Status)
		if r.PauseReason != nil {
			line += fmt.Sprintf(" until %s: %s", showTime(r.PausedUntil), showString(r.PauseReason))
		}
		row("budget "+r.Resource, line)
	}
	row("created", showTime(s.CreatedAt))
	row("updated", showTime(s.UpdatedAt))
	return tw.Flush()
}

// runScopesSet creates or replaces a scope.
func runScopesSet(c *cli.Context) error {
	name, err := oneOperand(c, "scope")
	if err != nil {
		return err
	}
	req, err := scopeRequest(c)
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	if req.Credentials == nil && !c.Bool("no-credentials") {
		// PUT replaces the whole scope, and credentials are write-only:
		// refuse to drop them by accident.
		var old httpapi.Scope
		status, err := cl.call(c.Context, http.MethodGet, "/v1/scopes/"+escapeID(name), nil, nil, &old)
		if err != nil && status != http.StatusNotFound {
			return err
		}
		if err == nil && old.Credentials.Configured {
			return exitf(exitUsage, "scope %s has %s credentials and set replaces the whole scope: give them again (--token-file or --token-env), or pass --no-credentials to remove them", name, old.Credentials.Type)
		}
	}
	var s httpapi.Scope
	status, err := cl.call(c.Context, http.MethodPut, "/v1/scopes/"+escapeID(name), nil, req, &s)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, s)
	}
	verb := "replaced"
	if status == http.StatusCreated {
		verb = "created"
	}
	fmt.Fprintf(c.App.Writer, "%s scope %s\n", verb, s.ProviderScope)
	return printScopeRows(c.App.Writer, s)
}

// scopeRequest builds the PUT body from --file and the flags.
func scopeRequest(c *cli.Context) (httpapi.PutScopeRequest, error) {
	var req httpapi.PutScopeRequest
	if file := c.String("file"); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return req, exitf(exitUsage, "read --file: %v", err)
		}
		if err := strictDecode(data, &req); err != nil {
			return req, exitf(exitUsage, "%s: %v", file, err)
		}
	}
	for flag, dst := range map[string]*string{"provider": &req.Provider, "base-url": &req.BaseURL, "idempotency-header": &req.IdempotencyHeader, "group": &req.Group} {
		if c.IsSet(flag) {
			*dst = c.String(flag)
		}
	}
	for flag, dst := range map[string]*int{"max-concurrent": &req.MaxConcurrent, "budget-reserve": &req.BudgetReserve} {
		if c.IsSet(flag) {
			*dst = c.Int(flag)
		}
	}
	if c.IsSet("rate") {
		rl, err := parseRate(c.String("rate"))
		if err != nil {
			return req, err
		}
		req.RateLimit = rl
	}
	if req.Provider == "" || req.BaseURL == "" {
		return req, exitf(exitUsage, "--provider and --base-url are required (or give them in --file)")
	}
	creds, err := credentialsFromFlags(c)
	if err != nil {
		return req, err
	}
	switch {
	case c.Bool("no-credentials"):
		if creds != nil {
			return req, exitf(exitUsage, "--no-credentials excludes --credentials, --token-file and --token-env")
		}
		req.Credentials = nil
	case creds != nil:
		req.Credentials = creds
	}
	return req, nil
}

// credentialsFromFlags builds credentials from --credentials and the
// secret in --token-file or --token-env; nil when none are given.
func credentialsFromFlags(c *cli.Context) (*httpapi.CredentialsRequest, error) {
	typ := c.String("credentials")
	if typ == "oauth2" || typ == "githubApp" {
		return grantFromFlags(c, typ)
	}
	for _, f := range grantFlagNames {
		if c.IsSet(f) {
			return nil, exitf(exitUsage, "--%s needs --credentials oauth2 or githubApp", f)
		}
	}
	file, env := c.String("token-file"), c.String("token-env")
	if typ == "" && file == "" && env == "" {
		if c.IsSet("header-name") || c.IsSet("username") {
			return nil, exitf(exitUsage, "--header-name and --username need a secret: --token-file or --token-env")
		}
		return nil, nil
	}
	var secret string
	switch {
	case file != "" && env != "":
		return nil, exitf(exitUsage, "give the secret once: --token-file or --token-env")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, exitf(exitUsage, "read --token-file: %v", err)
		}
		secret = strings.TrimRight(string(b), "\r\n")
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return nil, exitf(exitUsage, "--token-env: the environment variable %s is not set", env)
		}
		secret = v
	}
	if typ == "" {
		typ = "bearer"
	}
	cr := &httpapi.CredentialsRequest{Type: typ}
	switch typ {
	case "bearer":
		cr.Token = secret
	case "header":
		cr.Name, cr.Value = c.String("header-name"), secret
		if cr.Name == "" {
			return nil, exitf(exitUsage, "--credentials header needs --header-name")
		}
	case "basic":
		cr.Username, cr.Password = c.String("username"), secret
		if cr.Username == "" {
			return nil, exitf(exitUsage, "--credentials basic needs --username")
		}
	default:
		return nil, exitf(exitUsage, "--credentials must be bearer, header, basic, oauth2 or githubApp")
	}
	if secret == "" && typ != "basic" {
		return nil, exitf(exitUsage, "--credentials %s needs a secret: --token-file or --token-env", typ)
	}
	return cr, nil
}

// parseRate reads REQUESTS/PER ("5000/1h").
func parseRate(v string) (*httpapi.RateLimit, error) {
	n, per, ok := strings.Cut(v, "/")
	requests, err := strconv.Atoi(n)
	if !ok || err != nil || requests < 1 || per == "" {
		return nil, exitf(exitUsage, "--rate %q is not REQUESTS/PER such as 5000/1h", v)
	}
	return &httpapi.RateLimit{Requests: requests, Per: per}, nil
}

// runScopesPause pauses a scope by hand until --until.
func runScopesPause(c *cli.Context) error {
	name, err := oneOperand(c, "scope")
	if err != nil {
		return err
	}
	until, err := parseTimeFlag(c, "until")
	if err != nil {
		return err
	}
	if until == "" {
		return exitf(exitUsage, "--until is required: the RFC 3339 time the pause ends")
	}
	reason, err := requireReason(c)
	if err != nil {
		return err
	}
	return request(c, http.MethodPost, "/v1/scopes/"+escapeID(name)+"/pause", httpapi.PauseScopeRequest{Until: until, Reason: reason}, printScope)
}

// runScopesResume lifts a scope's hold and pause.
func runScopesResume(c *cli.Context) error {
	name, reason, err := operandAndReason(c, "scope")
	if err != nil {
		return err
	}
	return request(c, http.MethodPost, "/v1/scopes/"+escapeID(name)+"/resume", httpapi.ResumeScopeRequest{Reason: reason}, func(w io.Writer, s httpapi.Scope) error {
		return printScopeRows(w, s)
	})
}
