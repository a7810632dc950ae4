// Package pgserver runs a throwaway PostgreSQL: Debian's binaries (the
// newest /usr/lib/postgresql/N/bin) initialize a cluster in a new
// temporary directory and serve it on a unix socket there, no TCP, as an
// unprivileged user when the caller is root (initdb refuses root). Tests
// get one through package pgtest; the crash test and the bench start
// their own.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// binRoot holds Debian's PostgreSQL installations, one bin directory per
// major version.
const binRoot = "/usr/lib/postgresql"

// readyTimeout bounds the wait for a started server to answer.
const readyTimeout = 60 * time.Second

// InstallHint is the error Start returns when PostgreSQL is missing.
const InstallHint = "PostgreSQL is not installed: apt-get install -y --no-install-recommends postgresql (scripts/test.sh does), or set PACER_TEST_POSTGRES=postgres://… to use an existing server"

// Options tune a server.
type Options struct {
	// Durable keeps what a commit wrote across an immediate stop of the
	// server (synchronous_commit on); tests leave it off, as their data
	// need not survive a crash of the server.
	Durable bool
	// Settings are more server settings ("name=value", each passed as
	// -c), after the throwaway ones, e.g. autovacuum_naptime=1s.
	Settings []string
}

// Server is a throwaway PostgreSQL: its data directory and unix socket in
// one temporary directory, removed when it stops.
type Server struct {
	dir, bin string
	acct     account
	opts     Options
	cmd      *exec.Cmd
	log      *bytes.Buffer
	done     chan error // the postgres process's exit
	url      string
}

// URL is the server's URL (database postgres, user postgres, no
// password: only the socket's directory admits).
func (s *Server) URL() string { return s.url }

// Dir is the server's directory (data directory and socket).
func (s *Server) Dir() string { return s.dir }

// findBin returns the bin directory of the newest PostgreSQL installed
// (root/N/bin with initdb and postgres), else the directory of an
// initdb on PATH.
func findBin(root string) (string, error) {
	entries, _ := os.ReadDir(root)
	var versions []float64
	byVersion := map[float64]string{}
	for _, e := range entries {
		v, err := strconv.ParseFloat(e.Name(), 64)
		bin := filepath.Join(root, e.Name(), "bin")
		if err != nil || !isFile(filepath.Join(bin, "initdb")) || !isFile(filepath.Join(bin, "postgres")) {
			continue
		}
		versions = append(versions, v)
		byVersion[v] = bin
	}
	if len(versions) > 0 {
		sort.Float64s(versions)
		return byVersion[versions[len(versions)-1]], nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		bin := filepath.Dir(p)
		if isFile(filepath.Join(bin, "postgres")) {
			return bin, nil
		}
	}
	return "", errors.New(InstallHint)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// account is who runs the server: the current user, or, for root (whom
// initdb refuses), postgres if it exists, else nobody.
type account struct {
	uid, gid uint32
	asRoot   bool // the tests run as root: the server runs as uid/gid
}

func serverAccount() (account, error) {
	if os.Geteuid() != 0 {
		return account{}, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return account{uid: uint32(uid), gid: uint32(gid), asRoot: true}, nil
	}
	return account{}, errors.New("pgserver: running as root, and neither user postgres nor nobody exists to run PostgreSQL as (initdb refuses root)")
}

// command is bin/name with args, run as acct.
func (a account) command(bin, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.SysProcAttr = procAttr(a)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	return cmd
}

// Start initializes a cluster in a new temporary directory and starts
// postgres on a unix socket there (no TCP), tuned for throwaway use: no
// fsync and no full-page writes (the data need not survive a power cut),
// and deadlocks detected after 100 ms (not 1 s), as tests provoke them.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := findBin(binRoot)
	if err != nil {
		return nil, err
	}
	acct, err := serverAccount()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempRoot(acct), "pacer-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	s := &Server{dir: dir, bin: bin, acct: acct, opts: opts, log: &bytes.Buffer{}}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if acct.asRoot {
		if err := os.Chown(dir, int(acct.uid), int(acct.gid)); err != nil {
			return fail(fmt.Errorf("pgserver: %w", err))
		}
	}
	initdb := acct.command(bin, "initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgserver: initdb: %v: %s", err, lastLines(out, 5)))
	}
	s.url = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: url.Values{"host": {dir}, "sslmode": {"disable"}}.Encode()}).String()
	if err := s.run(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// data is the server's data directory.
func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// run starts postgres on the cluster and waits until it answers.
func (s *Server) run(ctx context.Context) error {
	sync := "off"
	if s.opts.Durable {
		sync = "on"
	}
	args := []string{"-D", s.data(), "-k", s.dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=" + sync, "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=32MB", "-c", "log_min_messages=warning",
		"-c", "deadlock_timeout=100ms"}
	for _, set := range s.opts.Settings {
		args = append(args, "-c", set)
	}
	s.cmd = s.acct.command(s.bin, "postgres", args...)
	s.log.Reset()
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.done = make(chan error, 1)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.waitReady(ctx); err != nil {
		s.halt(interrupt)
		return err
	}
	return nil
}

// maxTempRoot bounds the length of the directory the server's directory
// is made in: the unix socket's path, under it, must stay within the
// system's limit (107 bytes on Linux).
const maxTempRoot = 60

// tempRoot is where the server's directory is made: the system's
// temporary directory, or /tmp when that is too long a path for a unix
// socket, or when the server runs as another user (TMPDIR may be one only
// the tests' user can enter).
func tempRoot(acct account) string {
	if dir := os.TempDir(); !acct.asRoot && len(dir) <= maxTempRoot {
		return dir
	}
	return "/tmp"
}

// waitReady polls the socket until the server answers, it exits, or
// readyTimeout passes.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		conn, err := pgx.Connect(ctx, s.url)
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			return fmt.Errorf("pgserver: postgres exited at start (%v): %s", werr, lastLines(s.log.Bytes(), 5))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: postgres did not answer within %s: %v", readyTimeout, err)
		}
	}
}

// Stop shuts the server down (fast: connections are ended) and removes
// its directory.
func (s *Server) Stop() error {
	defer os.RemoveAll(s.dir)
	return s.halt(interrupt)
}

// StopImmediate stops the server as a crash would (pg_ctl stop -m
// immediate: SIGQUIT, no checkpoint; the next start recovers from the
// WAL), keeping its directory for Restart.
func (s *Server) StopImmediate() error { return s.halt(immediate) }

// Restart starts the stopped server again on the same directory and URL.
func (s *Server) Restart(ctx context.Context) error { return s.run(ctx) }

// halt sends postgres sig and waits for it to exit (killing it after
// 30 s).
func (s *Server) halt(sig os.Signal) error {
	select {
	case err := <-s.done: // exited already
		s.done <- err
		return fmt.Errorf("postgres had exited: %v: %s", err, lastLines(s.log.Bytes(), 5))
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case err := <-s.done:
		s.done <- err
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		s.done <- <-s.done
		return errors.New("postgres did not stop within 30s: killed")
	}
}

// lastLines is the last n lines of out, joined by " | ".
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
