package main

import "runtime/debug"

// The garbage collector's defaults for pacer, where the environment sets
// none (GOGC, GOMEMLIMIT win when set). pacer's live heap is small (tens
// of MiB at a million stored operations) and allocation-heavy on the hot
// path, so collecting at 4× the live heap instead of 2× saves about a
// tenth of its CPU per operation (docs/performance.md); the memory limit
// bounds what that costs when the live heap grows.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 256 << 20
)

// tuneGC applies the defaults above unless getenv names GOGC or
// GOMEMLIMIT.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
