//go:build !linux

package transport

import (
	"net"
	"time"
)

// setUserTimeout is Linux's TCP_USER_TIMEOUT; elsewhere nothing.
func setUserTimeout(net.Conn, time.Duration) {}
