package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fleet is the run's pacer serve processes, one per slot, all on the same
// database: one on SQLite, several on PostgreSQL. A slot keeps its number
// across restarts; the stand-in tells kills apart by slot.
type fleet struct {
	procs []*proc
	mu    sync.Mutex // guards next and exits
	next  int        // the slot of the next call (round robin)
	exits []exit     // processes that exited by themselves, restarted
}

// exit is a process that ended without being killed.
type exit struct {
	slot int
	at   time.Time
	logs string // its last log lines
}

func newFleet(binary, db string, env []string, n int) *fleet {
	f := &fleet{}
	for slot := range n {
		f.procs = append(f.procs, &proc{binary: binary, db: db, env: env, slot: slot, addr: freeAddr(),
			client: http.Client{Timeout: 10 * time.Second}})
	}
	return f
}

func (f *fleet) size() int { return len(f.procs) }

// startAll starts every process.
func (f *fleet) startAll(ctx context.Context) error {
	for _, p := range f.procs {
		if err := p.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// pids are the processes' current process IDs by slot (0 for one not
// running).
func (f *fleet) pids() []int {
	out := make([]int, len(f.procs))
	for i, p := range f.procs {
		out[i] = p.pid()
	}
	return out
}

// killAndRestart kills the process of slot with SIGKILL and starts it
// again.
func (f *fleet) killAndRestart(ctx context.Context, slot int) error {
	p := f.procs[slot]
	p.kill()
	if err := p.start(ctx); err != nil {
		return fmt.Errorf("restart of process %d: %w", slot, err)
	}
	return nil
}

// revive restarts every process that exited by itself (a serve that ends
// when it loses its database, say), recording its death with the
// stand-in first, as a kill: it sent nothing since it died.
func (f *fleet) revive(ctx context.Context, sim *standIn) error {
	for _, p := range f.procs {
		if !p.exited() {
			continue
		}
		sim.markKill(p.slot)
		f.mu.Lock()
		f.exits = append(f.exits, exit{slot: p.slot, at: time.Now(), logs: lastLines(p.logs.String(), 3)})
		f.mu.Unlock()
		if err := p.start(ctx); err != nil {
			return fmt.Errorf("restart of process %d after it exited: %w", p.slot, err)
		}
	}
	return nil
}

// stop ends every process (SIGTERM).
func (f *fleet) stop() {
	for _, p := range f.procs {
		p.stop()
	}
}

// logs are every process's logs, for a failure's diagnostics.
func (f *fleet) logs() string {
	var b strings.Builder
	for _, p := range f.procs {
		fmt.Fprintf(&b, "--- process %d\n%s", p.slot, p.logs.String())
	}
	return b.String()
}

// call sends one API request to the next process in turn; when it cannot
// be reached (killed, restarting) it tries the others, for a few rounds.
func (f *fleet) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	f.mu.Lock()
	first := f.next
	f.next = (f.next + 1) % len(f.procs)
	f.mu.Unlock()
	var err error
	for try := range 10 * len(f.procs) {
		var st int
		var out []byte
		st, out, err = f.procs[(first+try)%len(f.procs)].call(ctx, method, path, body)
		if err == nil {
			return st, out, nil
		}
		if ctx.Err() != nil {
			break
		}
		if (try+1)%len(f.procs) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return 0, nil, err
}

// proc is one pacer serve process, restarted on the same database.
type proc struct {
	binary, db, addr string
	env              []string // added to the environment
	slot             int
	client           http.Client
	logs             syncBuffer

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exited
}

func (p *proc) start(ctx context.Context) error {
	cmd := exec.Command(p.binary, "serve", "--db", p.db, "--listen", p.addr, "--workers", "16",
		"--request-timeout", requestTimeout.String(), "--lease", (requestTimeout + 7*time.Second).String(), "--log-level", "warn")
	if len(p.env) > 0 {
		cmd.Env = append(cmd.Environ(), p.env...)
	}
	cmd.Stdout, cmd.Stderr = &p.logs, &p.logs
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	for i := 0; i < 500; i++ {
		if st, _, err := p.call(ctx, "GET", "/healthz", nil); err == nil && st == 200 {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("pacer exited at start:\n%s", p.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("pacer did not start:\n%s", p.logs.String())
}

// pid is the running process's ID, 0 when none runs.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || p.exitedLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited reports whether the process was started and has ended.
func (p *proc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitedLocked()
}

func (p *proc) exitedLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process and waits up to d for it to exit; false
// if it did not.
func (p *proc) signal(sig syscall.Signal, d time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *proc) kill() { p.signal(syscall.SIGKILL, time.Minute) }

func (p *proc) stop() {
	if !p.signal(syscall.SIGTERM, 10*time.Second) {
		p.kill()
	}
}

func (p *proc) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lastLines is the last n lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
