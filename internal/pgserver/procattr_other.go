//go:build !unix

package pgserver

import (
	"os"
	"syscall"
)

// interrupt asks postgres to shut down; immediate too, where the system
// has no other signal for it.
var (
	interrupt os.Signal = os.Interrupt
	immediate os.Signal = os.Interrupt
)

// procAttr runs a server's command as the current user.
func procAttr(account) *syscall.SysProcAttr { return nil }
