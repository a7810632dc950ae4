package scheduler_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"pacer/scheduler"
)

// TestCredentialsRedactedInLogs logs every type that carries credentials,
// directly and nested, through both handlers pacer uses: no secret value
// may reach the output, while the type and the scope's name do.
func TestCredentialsRedactedInLogs(t *testing.T) {
	secrets := []string{"tok-SECRET-1", "val-SECRET-2", "pw-SECRET-3"}
	creds := []scheduler.Credentials{
		{Type: scheduler.CredentialBearer, Token: secrets[0]},
		{Type: scheduler.CredentialHeader, Name: "X-Key", Value: secrets[1]},
		{Type: scheduler.CredentialBasic, Username: "user", Password: secrets[2]},
	}
	for _, handler := range []string{"json", "text"} {
		var buf bytes.Buffer
		var h slog.Handler = slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
		if handler == "text" {
			h = slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
		}
		log := slog.New(h)
		for _, c := range creds {
			cfg := scheduler.ScopeConfig{Name: "acct-a", Provider: "generic", BaseURL: "https://example.test", Credentials: c}
			scope := scheduler.Scope{ScopeConfig: cfg}
			log.Info("credentials", "credentials", c)
			log.Info("config", "scope", cfg)
			log.Info("scope", "scope", scope)
			log.Info("claim", "claim", scheduler.Claim{Operation: scheduler.Operation{ID: "op-1"}, Scope: scope})
			log.Info("input", "in", scheduler.ScopeInput{Name: "acct-a", Credentials: c})
			log.With("scope", scope).Debug("with")
			log.Info("group", slog.Group("g", "scope", scope))
		}
		out := buf.String()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s handler: secret %q in the log:\n%s", handler, s, out)
			}
		}
		for _, want := range []string{"acct-a", "bearer", "basic", "configured"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s handler: %q missing from the log:\n%s", handler, want, out)
			}
		}
	}
}
