package netaccept

import (
	"net"
	"sync"
	"sync/atomic"
)

// Limit returns a listener that holds at most max of its connections open
// at once. A connection accepted while max are open is given to refuse,
// which tells the client (it must not block for long) and closes it; it
// never reaches the server, and Accept goes on to the next one. A
// connection counts until its first Close. max < 1 means no limit.
func Limit(ln net.Listener, max int, refuse func(net.Conn)) net.Listener {
	if max < 1 {
		return ln
	}
	return &limitListener{Listener: ln, max: int64(max), refuse: refuse}
}

type limitListener struct {
	net.Listener
	max    int64
	open   atomic.Int64
	refuse func(net.Conn)
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			if l.refuse != nil {
				l.refuse(c)
			}
			_ = c.Close()
			continue
		}
		return &limitConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
