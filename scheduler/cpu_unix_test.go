//go:build unix

package scheduler

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time this process has used so far, user and
// system; 0 when the system does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU has b report the process's CPU time per op (cpu-ns/op) from
// now to the end of b: on a shared machine it moves much less than ns/op,
// which counts the time other processes take the cores.
func reportCPU(b *testing.B) {
	b.Helper()
	start := processCPU()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	})
}
