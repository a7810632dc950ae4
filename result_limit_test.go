package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// --result-limit takes bytes or KiB/MiB within 1 KiB..64 MiB (design §12).
func TestParseResultLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"1MiB": 1 << 20, "512KiB": 512 << 10, "4096": 4096, " 2 MiB ": 2 << 20, "64MiB": 64 << 20, "1KiB": 1024} {
		if got, err := parseResultLimit(in); err != nil || got != want {
			t.Errorf("parseResultLimit(%q): got %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "-1MiB", "", "1GiB", "65MiB", "1000", "9223372036854775807", "1e6", "1KiBMiB", "MiB", "0x400"} {
		if got, err := parseResultLimit(in); err == nil {
			t.Errorf("parseResultLimit(%q): got %d, want an error", in, got)
		}
	}
}

// serve refuses a result limit out of bounds, from the flag or from
// PACER_RESULT_LIMIT, with one line and exit code 2, before it touches the
// database.
func TestServeRefusesBadResultLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "pacer.db")
	for _, c := range []struct{ flag, env string }{{flag: "0"}, {flag: "-5"}, {flag: "100GiB"}, {env: "0"}, {env: "999MiB"}} {
		args := []string{"serve", "--db", dbPath, "--listen", "127.0.0.1:0"}
		if c.flag != "" {
			args = append(args, "--result-limit="+c.flag)
		}
		cmd := exec.Command(pacerBin(t), args...)
		cmd.Env = append(os.Environ(), "PACER_RESULT_LIMIT="+c.env)
		if c.env == "" {
			cmd.Env = os.Environ()
		}
		out, err := cmd.CombinedOutput()
		exit, ok := err.(*exec.ExitError)
		if !ok || exit.ExitCode() != 2 {
			t.Fatalf("%+v: got %v, %s, want exit 2", c, err, out)
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "--result-limit") {
			t.Fatalf("%+v: got %q, want one line naming --result-limit", c, out)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused serve left files: %v", entries)
	}
}
