package main

import (
	"runtime/debug"
	"testing"
)

// pacer collects at its own defaults unless the environment says
// otherwise, and then leaves the runtime's settings alone.
func TestTuneGC(t *testing.T) {
	before, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(before); debug.SetMemoryLimit(limit) })

	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GC percent %d without GOGC, want %d", got, defaultGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("memory limit %d without GOMEMLIMIT, want %d", got, defaultMemoryLimit)
	}

	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	tuneGC(func(k string) string { return map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[k] })
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GC percent %d with GOGC=150 set, want it left at 150", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit %d with GOMEMLIMIT set, want it left", got)
	}
}
