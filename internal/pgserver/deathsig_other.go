//go:build unix && !linux

package pgserver

import "syscall"

// setParentDeathSignal does nothing where the system has no parent-death
// signal: a server of a test binary that died keeps running.
func setParentDeathSignal(*syscall.SysProcAttr) {}
