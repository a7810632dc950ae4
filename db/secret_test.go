package db_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pacer/db"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

func TestParseKey(t *testing.T) {
	key := bytes.Repeat([]byte{0xfb, 0xff, 0x01}, 11)[:32]
	for name, in := range map[string]string{
		"Std":        base64.StdEncoding.EncodeToString(key),
		"RawURL":     base64.RawURLEncoding.EncodeToString(key),
		"StdNewline": base64.StdEncoding.EncodeToString(key) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := db.ParseKey(in)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !bytes.Equal(got, key) {
				t.Fatalf("key = %x, want %x", got, key)
			}
		})
	}
	for name, in := range map[string]string{
		"ErrShort":     base64.StdEncoding.EncodeToString(key[:16]),
		"ErrNotBase64": "this is not base64 at all!!",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := db.ParseKey(in)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), in) {
				t.Fatalf("error %q echoes the key", err)
			}
		})
	}
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.key")
	key, created, err := db.LoadOrCreateKeyFile(path)
	if err != nil || !created || len(key) != db.KeySize {
		t.Fatalf("create = %d bytes, %v, %v; want 32 bytes, created", len(key), created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("mode = %04o, want 0600", got)
	}

	again, created, err := db.LoadOrCreateKeyFile(path)
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatalf("reload = %v, %v; want the same key, not created", created, err)
	}

	t.Run("ErrGroupReadable", func(t *testing.T) {
		if err := os.Chmod(path, 0o640); err != nil {
			t.Fatal(err)
		}
		_, _, err := db.LoadOrCreateKeyFile(path)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("load group-readable key = %v, want refusal", err)
		}
	})
}

func TestCredentialsEncryptedAtRest(t *testing.T) {
	const token = "ghp_SUPERSECRETTOKEN0123456789"
	d, path := newTestDB(t)
	ctx := context.Background()
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: token}})

	raw := rawDB(t, path)
	var blob []byte
	if err := raw.QueryRow(`SELECT credentials FROM scopes WHERE name = 'a'`).Scan(&blob); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte(token)) || bytes.Contains(blob, []byte("bearer")) {
		t.Fatal("credentials blob holds the plain text")
	}

	storetest.Enqueue(t, d, t0, storetest.NewOp("op-a", "a", t0))
	if cs := storetest.Claim(t, d, t0, 1); len(cs) != 1 || cs[0].Scope.Credentials.Token != token {
		t.Fatal("credentials did not round-trip to the claim")
	}

	t.Run("BoundToScopeName", func(t *testing.T) {
		storetest.PutScope(t, d, "b", storetest.ScopeOpts{})
		if _, err := raw.Exec(`UPDATE scopes SET credentials = ? WHERE name = 'b'`, blob); err != nil {
			t.Fatal(err)
		}
		// Only a claim opens the credentials (issue 13): reading the
		// scope shows its type, and the claim refuses the copied blob
		// without naming the token.
		if s, err := d.GetScope(ctx, "b"); err != nil || s.Credentials.Token != "" {
			t.Fatalf("get scope b = %#v, %v; want its type alone, unopened", s.Credentials, err)
		}
		storetest.Enqueue(t, d, storetest.T0, storetest.NewOp("op-b", "b", storetest.T0))
		_, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: storetest.T0, Limit: 10, LeaseFor: time.Minute})
		var credErr *db.CredentialsError
		if !errors.As(err, &credErr) || strings.Contains(err.Error(), token) {
			t.Fatalf("claim with a copied blob = %v, want a CredentialsError without the token", err)
		}
	})

	t.Run("NotInDatabaseFiles", func(t *testing.T) {
		raw.Close()
		d.Close()
		files, _ := filepath.Glob(path + "*")
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(token)) {
				t.Fatalf("%s holds the token in plain text", f)
			}
		}
	})
}

// TestOnlyClaimsCarryCredentials checks that the credentials' values leave
// the store only with claims, whose requests they authenticate: ClaimDue's
// and ListRunning's (which recovery sends again). Every other scope the
// store returns shows their type alone.
func TestOnlyClaimsCarryCredentials(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	creds := map[string]scheduler.Credentials{
		"bearer": {Type: scheduler.CredentialBearer, Token: "tok-SECRET"},
		"header": {Type: scheduler.CredentialHeader, Name: "X-Api-Key", Value: "val-SECRET"},
		"basic":  {Type: scheduler.CredentialBasic, Username: "user", Password: "pass-SECRET"},
	}
	typeOnly := func(what string, s scheduler.Scope) {
		t.Helper()
		if want := (scheduler.Credentials{Type: creds[s.Name].Type}); s.Credentials != want {
			t.Errorf("%s of scope %s: credentials %#v (values shown: %v), want the type only", what, s.Name, s.Credentials,
				s.Credentials.Token != "" || s.Credentials.Name != "" || s.Credentials.Value != "" || s.Credentials.Username != "" || s.Credentials.Password != "")
		}
	}
	for name, c := range creds {
		typeOnly("PutScope", storetest.PutScope(t, d, name, storetest.ScopeOpts{Credentials: c}))
		storetest.Enqueue(t, d, t0, storetest.NewOp("op-"+name, name, t0))
	}

	claims := storetest.Claim(t, d, t0, 10)
	running, err := d.ListRunning(ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != len(creds) || len(running) != len(creds) {
		t.Fatalf("%d claims, %d running, want %d of each", len(claims), len(running), len(creds))
	}
	for what, cs := range map[string][]scheduler.Claim{"ClaimDue": claims, "ListRunning": running} {
		for _, c := range cs {
			if c.Scope.Credentials != creds[c.Scope.Name] {
				t.Errorf("%s: scope %s carries %#v, not its credentials' values", what, c.Scope.Name, c.Scope.Credentials)
			}
		}
	}

	for name := range creds {
		s, err := d.GetScope(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		typeOnly("GetScope", s)
		s, err = d.ResumeScope(ctx, name, scheduler.Action{Actor: "test", At: t0, Reason: "check"})
		if err != nil {
			t.Fatal(err)
		}
		typeOnly("ResumeScope", s)
	}
	all, err := d.ListScopes(ctx)
	if err != nil || len(all) != len(creds) {
		t.Fatalf("list scopes: %d, %v", len(all), err)
	}
	for _, s := range all {
		typeOnly("ListScopes", s)
	}
}
