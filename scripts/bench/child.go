package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"
)

// runInChild re-executes this binary as the named system and returns the
// result it prints.
func runInChild(sys string, n, workers int, provider, tmp string, timeout time.Duration) result {
	return runInChildOn(sys, n, workers, provider, tmp, "", timeout)
}

// runInChildOn is runInChild for a PostgreSQL row on the database db.
func runInChildOn(sys string, n, workers int, provider, tmp, db string, timeout time.Duration) result {
	dir := filepath.Join(tmp, sys)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return result{Err: fmt.Sprintf("make dir: %v", err)}
	}
	return runSelf(sys, childArgs{N: n, Workers: workers, Provider: provider, Dir: dir, DB: db}, timeout)
}

// runSelf re-executes this binary as the subcommand sys with args as its
// JSON argument, bounded by timeout, and returns the result it prints last.
func runSelf(sys string, args any, timeout time.Duration) result {
	argv, err := json.Marshal(args)
	if err != nil {
		return result{Err: fmt.Sprintf("encode %s child args: %v", sys, err)}
	}
	self, err := os.Executable()
	if err != nil {
		return result{Err: fmt.Sprintf("find own executable: %v", err)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, sys, string(argv))
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return result{Err: fmt.Sprintf("run %s child: %v", sys, err)}
	}
	r, err := decodeResult(out.Bytes())
	if err != nil {
		return result{Err: err.Error()}
	}
	return r
}

// runChild is the "loopback", "ceiling" and "river" subcommands: it runs one system and
// prints its result as one JSON line.
func runChild(sys string, argv []string) {
	var a childArgs
	if len(argv) != 1 || json.Unmarshal([]byte(argv[0]), &a) != nil {
		fmt.Fprintln(os.Stderr, "usage: pacerbench", sys, "'{json childArgs}'")
		os.Exit(2)
	}
	if path := os.Getenv("PACERBENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path + "." + sys)
		if err == nil {
			_ = pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
	}
	var r result
	var err error
	switch sys {
	case "ceiling":
		r, err = runCeiling(a)
	case "river":
		r, err = runRiver(a)
	case "loopback":
		r, err = runLoopback(a)
	case "pg-ceiling":
		r, err = runCeilingPG(a)
	case "pg-river":
		r, err = runRiverPG(a)
	}
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

// selfUsage is this process's CPU time so far (user+system, ms) and peak RSS (KiB).
func selfUsage() (cpuMs float64, rssKiB int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return tvMs(ru.Utime) + tvMs(ru.Stime), ru.Maxrss
}

func tvMs(tv syscall.Timeval) float64 {
	return float64(tv.Sec)*1000 + float64(tv.Usec)/1000
}

// meter measures a window of this process's run.
type meter struct {
	start time.Time
	cpu0  float64
}

func startMeter() meter {
	c, _ := selfUsage()
	return meter{start: time.Now(), cpu0: c}
}

// stop fills r's timing, CPU and RSS figures for n operations.
func (m meter) stop(r *result, n int) {
	r.Seconds = time.Since(m.start).Seconds()
	c, rss := selfUsage()
	r.CPUMs = c - m.cpu0
	r.RSSKiB = rss
	r.Ops = n
}
