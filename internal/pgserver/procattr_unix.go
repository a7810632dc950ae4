//go:build unix

package pgserver

import (
	"os"
	"syscall"
)

// interrupt asks postgres for a fast shutdown, immediate for an
// immediate one (as a crash: recovery at the next start).
var (
	interrupt os.Signal = syscall.SIGINT
	immediate os.Signal = syscall.SIGQUIT
)

// procAttr runs a server's command as a (as the unprivileged account when
// the tests run as root), and, where the system can, ends the server when
// the test binary dies without stopping it.
func procAttr(a account) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{}
	if a.asRoot {
		attr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, NoSetGroups: true}
	}
	setParentDeathSignal(attr)
	return attr
}
