package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pacer/db"
)

// unprivileged is the user the test runs pacer as when it runs as root:
// root ignores file modes, so a read-only file would not be read-only.
const unprivileged = 65534

// asUnprivileged makes cmd run without root's power over file modes, and
// makes dir and everything in it that user's.
func asUnprivileged(t *testing.T, cmd *exec.Cmd, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return // file modes already bind this user
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivileged, Gid: unprivileged}}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, unprivileged, unprivileged)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestServeRefusesUnwritableDatabase: serve on a database file it cannot
// write refuses to start with one clear line, where it would otherwise
// start and fail every write. The same file made writable starts.
func TestServeRefusesUnwritableDatabase(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "pacer-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the unprivileged user reaches its files
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pacer")
	copyFile(t, pacerBin(t), bin, 0o755)
	path := filepath.Join(dir, "pacer.db")
	store, err := db.Open(path, db.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	serve := func(addr string) (*exec.Cmd, *bytes.Buffer) {
		out := &bytes.Buffer{}
		cmd := exec.Command(bin, "serve", "--db", path, "--listen", addr)
		cmd.Env = envWithoutPacer()
		cmd.Stdout, cmd.Stderr = out, out
		asUnprivileged(t, cmd, dir)
		return cmd, out
	}

	// Writable: it starts (so what follows fails for the file's mode, not
	// for the user or the binary).
	addr := freeAddr(t)
	cmd, out := serve(addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	healthy := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !healthy; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			healthy = resp.StatusCode == 200
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if !healthy {
		t.Fatalf("pacer did not become ready on a writable database:\n%s", out)
	}

	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	cmd, out = serve(freeAddr(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("serve on a read-only database file kept running:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err == nil || len(lines) != 1 || !strings.Contains(lines[0], "does not accept writes") || !strings.Contains(lines[0], path) {
		t.Fatalf("serve on a read-only database file: %v, output:\n%s\nwant a non-zero exit with one line saying the database does not accept writes", err, out)
	}
}

// copyFile copies from to to with mode.
func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}
