package transport

import (
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections to a target and can cut them: while cut,
// it resets the connections it carries and closes new ones at once (a
// peer's connection refused or reset, as a partition looks to gRPC). While
// frozen it holds every byte but keeps the connections (a hung peer, a
// black-holed link).
type proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string // where new connections go (setTarget)
	cut    bool
	frozen chan struct{} // non-nil while frozen; closed on thaw
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.run()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) run() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		d, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			_ = d.Close()
			continue
		}
		p.conns[c], p.conns[d] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, d)
		go p.pipe(d, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen := p.frozen
			p.mu.Unlock()
			if frozen != nil {
				<-frozen
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// freeze holds the bytes of every connection (true) or lets them go (false).
func (p *proxy) freeze(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.frozen == nil:
		p.frozen = make(chan struct{})
	case !on && p.frozen != nil:
		close(p.frozen)
		p.frozen = nil
	}
}

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut && p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

// setTarget makes new connections go to target.
func (p *proxy) setTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}
