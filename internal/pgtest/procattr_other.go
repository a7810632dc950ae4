//go:build !unix

package pgtest

import (
	"os"
	"syscall"
)

// interrupt asks postgres to shut down.
var interrupt os.Signal = os.Interrupt

// procAttr runs a server's command as the current user.
func procAttr(account) *syscall.SysProcAttr { return nil }
