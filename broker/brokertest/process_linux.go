package brokertest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has cmd killed with the test binary, should it die
// without its cleanups.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
