package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS holds the certificate the TLS listeners (amqp.tls_listen,
// stream.tls_listen) present, and how they treat client certificates. Files
// are PEM, read at start and again when they change (see ServerConfig).
type TLS struct {
	// CertFile is the server certificate chain (leaf first).
	CertFile string `json:"cert_file"`
	// KeyFile is the certificate's private key.
	KeyFile string `json:"key_file"`
	// CAFile holds the CA certificates that client certificates are
	// verified against. When set, a client certificate that is presented
	// is verified; without VerifyPeer, clients may present none.
	CAFile string `json:"ca_file"`
	// VerifyPeer requires every client to present a certificate signed by
	// a CA of CAFile (RabbitMQ's verify_peer with fail_if_no_peer_cert).
	VerifyPeer bool `json:"verify_peer"`
}

// TLSEnabled reports whether any TLS listener is configured.
func (c Config) TLSEnabled() bool {
	return c.AMQP.TLSListen != "" || c.Stream.TLSListen != ""
}

func (c Config) validateTLS() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	t := c.TLS
	if !c.TLSEnabled() && t == (TLS{}) {
		return nil
	}
	if c.TLSEnabled() {
		for _, l := range []struct{ key, addr string }{{"amqp.tls_listen", c.AMQP.TLSListen}, {"stream.tls_listen", c.Stream.TLSListen}} {
			if l.addr != "" && (t.CertFile == "" || t.KeyFile == "") {
				bad(l.key, "is set but tls.cert_file and tls.key_file are not")
			}
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("tls", "tls.cert_file and tls.key_file must be set together")
	}
	if t.VerifyPeer && t.CAFile == "" {
		bad("tls.verify_peer", "needs tls.ca_file (the CAs client certificates are verified against)")
	}
	for _, f := range []struct{ key, path string }{{"tls.cert_file", t.CertFile}, {"tls.key_file", t.KeyFile}, {"tls.ca_file", t.CAFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.ReadFile(f.path); err != nil {
			bad(f.key, "cannot read %s: %v", f.path, unwrapPathError(err))
		}
	}
	if len(errs) == 0 && t.CertFile != "" {
		if _, err := c.TLS.Load(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Load reads the certificate, key and CAs into a crypto/tls server
// configuration (TLS 1.2 or later), once.
func (t TLS) Load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("config: tls.cert_file %s and tls.key_file %s: %w", t.CertFile, t.KeyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: tls.ca_file %s: no PEM certificate found", t.CAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if t.VerifyPeer {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}
