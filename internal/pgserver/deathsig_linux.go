package pgserver

import "syscall"

// setParentDeathSignal makes the kernel send the server SIGQUIT (an
// immediate shutdown) when the test binary exits without stopping it.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGQUIT }
