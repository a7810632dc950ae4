//go:build !unix

package scheduler

import "testing"

// reportCPU reports nothing where the process's CPU time is not at hand.
func reportCPU(*testing.B) {}
