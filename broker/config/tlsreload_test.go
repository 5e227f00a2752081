package config

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/tlstest"
)

// selfSigned returns a PEM certificate and key for cn (from a CA of its own).
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	return tlstest.NewCA(t, cn+" CA").Issue(t, cn, x509.ExtKeyUsageServerAuth)
}

// servedName completes a handshake against cfg and returns the common
// name of the certificate the server presented.
func servedName(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	go func() { _ = tls.Server(sc, cfg).Handshake() }()
	c := tls.Client(cc, &tls.Config{InsecureSkipVerify: true})
	if err := c.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestTLSCertificateReload: new handshakes get a certificate whose files
// were replaced (as the kubelet replaces a Secret volume's), and a
// replacement that does not load leaves the last good one serving.
func TestTLSCertificateReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	install := func(cert, key []byte) {
		t.Helper()
		// Write aside and rename, as an atomic update would.
		for _, f := range []struct {
			path string
			data []byte
		}{{certFile, cert}, {keyFile, key}} {
			if err := os.WriteFile(f.path+".new", f.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.path+".new", f.path); err != nil {
				t.Fatal(err)
			}
		}
	}
	certA, keyA := selfSigned(t, "first.example")
	install(certA, keyA)

	clock := time.Now()
	var reports []error
	r, err := newCertReloader(TLS{CertFile: certFile, KeyFile: keyFile}, time.Second, func() time.Time { return clock }, func(err error) { reports = append(reports, err) })
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.config(), nil }}
	if got := servedName(t, cfg); got != "first.example" {
		t.Fatalf("served %q, want first.example", got)
	}

	certB, keyB := selfSigned(t, "second.example")
	install(certB, keyB)
	if got := servedName(t, cfg); got != "first.example" {
		t.Fatalf("files looked at again within a second: served %q", got)
	}
	clock = clock.Add(2 * time.Second)
	if got := servedName(t, cfg); got != "second.example" {
		t.Fatalf("after the files changed: served %q, want second.example", got)
	}
	if len(reports) != 1 || reports[0] != nil {
		t.Fatalf("reports %v, want one successful reload", reports)
	}

	// A key that does not match the certificate: the last good pair stays.
	_, keyC := selfSigned(t, "third.example")
	certC, _ := selfSigned(t, "third.example")
	install(certC, keyC)
	clock = clock.Add(2 * time.Second)
	if got := servedName(t, cfg); got != "second.example" {
		t.Fatalf("after a broken update: served %q, want second.example", got)
	}
	if len(reports) != 2 || reports[1] == nil {
		t.Fatalf("reports %v, want the broken update reported", reports)
	}
	clock = clock.Add(2 * time.Second)
	if servedName(t, cfg); len(reports) != 2 {
		t.Fatalf("the same broken files reported again: %v", reports)
	}
}

// TestTLSServerConfigRefusesBadFiles: a configuration that does not load
// is an error at start, not a listener that fails every handshake.
func TestTLSServerConfigRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (TLS{CertFile: bad, KeyFile: bad}).ServerConfig(nil); err == nil {
		t.Fatal("accepted files that are not PEM")
	}
}
