package config

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// tlsReloadEvery bounds how often a handshake looks at the files.
const tlsReloadEvery = time.Second

// ServerConfig returns the listeners' crypto/tls configuration: loaded now
// (an error if the files do not load), and loaded again for the next
// handshake when the certificate, key or CA file has changed, looked at no
// more than once a second. A renewed certificate (a Kubernetes Secret volume
// is updated in place) thus reaches new connections without a restart;
// connections already open keep theirs. A change that does not load (a
// half-written file, a key that does not match) leaves the last good
// configuration serving; report gets that error, or nil after a reload,
// once per change. report may be nil.
func (t TLS) ServerConfig(report func(error)) (*tls.Config, error) {
	r, err := newCertReloader(t, tlsReloadEvery, time.Now, report)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.config(), nil
		},
	}, nil
}

// certReloader holds the configuration built from a TLS setting's files
// and the files' stamps when it was built. Safe for concurrent use.
type certReloader struct {
	t      TLS
	every  time.Duration
	now    func() time.Time
	report func(error)

	mu      sync.Mutex
	cfg     *tls.Config
	stamps  [3]fileStamp // cert, key, CA
	checked time.Time
}

// fileStamp identifies a version of a file: a rewrite or a swapped
// symlink (how the kubelet updates a Secret volume) changes it.
type fileStamp struct {
	mod  time.Time
	size int64
	err  bool
}

func newCertReloader(t TLS, every time.Duration, now func() time.Time, report func(error)) (*certReloader, error) {
	r := &certReloader{t: t, every: every, now: now, report: report}
	r.stamps = r.stat()
	cfg, err := t.Load()
	if err != nil {
		return nil, err
	}
	r.cfg, r.checked = cfg, now()
	return r, nil
}

func (r *certReloader) stat() [3]fileStamp {
	var st [3]fileStamp
	for i, p := range []string{r.t.CertFile, r.t.KeyFile, r.t.CAFile} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			st[i].err = true
			continue
		}
		st[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return st
}

// config returns the configuration for a handshake, rebuilt first if the
// files changed since it was built.
func (r *certReloader) config() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.checked) < r.every {
		return r.cfg
	}
	r.checked = now
	st := r.stat()
	if st == r.stamps {
		return r.cfg
	}
	r.stamps = st
	cfg, err := r.t.Load()
	if err != nil {
		r.reportf(fmt.Errorf("tls: reload (the previous certificate stays in use): %w", err))
		return r.cfg
	}
	r.cfg = cfg
	r.reportf(nil)
	return cfg
}

func (r *certReloader) reportf(err error) {
	if r.report != nil {
		r.report(err)
	}
}
