package transport

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"testing"
)

const testSecret = "s3cret-join"

// grpcNet starts a gRPC Network named node on a loopback port.
func grpcNet(t testing.TB, node string, mod func(*Config)) *GRPCNetwork {
	t.Helper()
	cfg := Config{Node: node, Addr: "127.0.0.1:0", Secret: testSecret, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	n, err := NewGRPC(cfg)
	must(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// grpcFabric connects nodes gRPC Networks on loopback, each link through a
// proxy the fabric cuts to isolate a node.
func grpcFabric(t *testing.T, nodes int) *fabric {
	return grpcFabricTLS(t, nodes, nil)
}

func grpcFabricTLS(t *testing.T, nodes int, tlsFor func(node string) *tls.Config) *fabric {
	nets := make([]*GRPCNetwork, nodes)
	f := &fabric{}
	for i := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		nets[i] = grpcNet(t, name, func(c *Config) {
			if tlsFor != nil {
				c.TLS = tlsFor(name)
			}
		})
		f.nets = append(f.nets, nets[i])
	}
	type link struct{ from, to string }
	proxies := map[link]*proxy{}
	for _, a := range nets {
		for _, b := range nets {
			if a == b {
				continue
			}
			p := newProxy(t, b.Addr().String())
			proxies[link{a.Node(), b.Node()}] = p
			must(t, a.SetAddress(b.Node(), p.addr()))
		}
	}
	f.isolate = func(node string) {
		for l, p := range proxies {
			if l.from == node || l.to == node {
				p.setCut(true)
			}
		}
	}
	f.heal = func() {
		for _, p := range proxies {
			p.setCut(false)
		}
	}
	return f
}
