// Command pause is the local cluster's pod sandbox ("pause") container: it
// holds the pod's namespaces, reaps orphaned children when it is the pod's
// PID 1 (shared process namespace), and exits on SIGINT or SIGTERM.
// hack/local-cluster.sh builds it statically into docker.io/warrenmq/pause:local
// with hack/imagebuild.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (warren local cluster)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
