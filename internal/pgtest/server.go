package pgtest

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

// server is a throwaway PostgreSQL: its data directory and unix socket in
// one temporary directory, removed when it stops.
type server struct {
	dir  string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan error // the postgres process's exit
	url  string
}

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
	return account{}, errors.New("pgtest: running as root, and neither user postgres nor nobody exists to run PostgreSQL as (initdb refuses root)")
}

// command is bin/name with args, run as acct.
func (a account) command(bin, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.SysProcAttr = procAttr(a)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	return cmd
}

// startServer initializes a cluster in a new temporary directory and
// starts postgres on a unix socket there (no TCP), tuned for tests: no
// fsync, as a test's data need not survive a power cut, and deadlocks
// detected after 100 ms (not 1 s), as tests provoke them.
func startServer(ctx context.Context) (*server, error) {
	bin, err := findBin(binRoot)
	if err != nil {
		return nil, err
	}
	acct, err := serverAccount()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempRoot(acct), "pacer-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &server{dir: dir, log: &bytes.Buffer{}, done: make(chan error, 1)}
	fail := func(err error) (*server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if acct.asRoot {
		if err := os.Chown(dir, int(acct.uid), int(acct.gid)); err != nil {
			return fail(fmt.Errorf("pgtest: %w", err))
		}
	}
	data := filepath.Join(dir, "data")
	initdb := acct.command(bin, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgtest: initdb: %v: %s", err, lastLines(out, 5)))
	}
	s.cmd = acct.command(bin, "postgres", "-D", data, "-k", dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=32MB", "-c", "log_min_messages=warning",
		"-c", "deadlock_timeout=100ms")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return fail(fmt.Errorf("pgtest: start postgres: %w", err))
	}
	go func() { s.done <- s.cmd.Wait() }()
	s.url = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: url.Values{"host": {dir}, "sslmode": {"disable"}}.Encode()}).String()
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
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
func (s *server) waitReady(ctx context.Context) error {
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
			return fmt.Errorf("pgtest: postgres exited at start (%v): %s", werr, lastLines(s.log.Bytes(), 5))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres did not answer within %s: %v", readyTimeout, err)
		}
	}
}

// stop shuts the server down (fast: connections are ended) and removes
// its directory.
func (s *server) stop() error {
	defer os.RemoveAll(s.dir)
	select {
	case err := <-s.done: // exited already
		return fmt.Errorf("postgres had exited: %v: %s", err, lastLines(s.log.Bytes(), 5))
	default:
	}
	_ = s.cmd.Process.Signal(interrupt) // fast shutdown
	select {
	case <-s.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("postgres did not stop within 30s of SIGINT: killed")
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
