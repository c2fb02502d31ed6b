package kubetest

import (
	"os/exec"
	"syscall"
)

// setParentDeath has the kernel kill the child when the test process dies
// without running its cleanups (a panic, a timeout, SIGKILL).
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
