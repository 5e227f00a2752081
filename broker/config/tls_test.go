package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLSValidation: every TLS misconfiguration is reported with its key
// and what is wrong, before the node starts.
func TestTLSValidation(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable.pem")
	if err := os.Mkdir(unreadable, 0o700); err != nil { // reading a directory fails, even as root
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name string
		set  func(*Config)
		want []string
	}{
		{"amqp listener without cert", func(c *Config) { c.AMQP.TLSListen = ":5671" }, []string{"amqp.tls_listen", "tls.cert_file"}},
		{"stream listener without cert", func(c *Config) { c.Stream.TLSListen = ":5551" }, []string{"stream.tls_listen", "tls.cert_file"}},
		{"cert without key", func(c *Config) { c.AMQP.TLSListen, c.TLS.CertFile = ":5671", garbage }, []string{"tls.key_file"}},
		{"missing cert file", func(c *Config) {
			c.AMQP.TLSListen, c.TLS.CertFile, c.TLS.KeyFile = ":5671", missing, garbage
		}, []string{"tls.cert_file", missing, "no such file"}},
		{"unreadable key file", func(c *Config) {
			c.AMQP.TLSListen, c.TLS.CertFile, c.TLS.KeyFile = ":5671", garbage, unreadable
		}, []string{"tls.key_file", "cannot read"}},
		{"not PEM", func(c *Config) {
			c.AMQP.TLSListen, c.TLS.CertFile, c.TLS.KeyFile = ":5671", garbage, garbage
		}, []string{"tls.cert_file", "PEM"}},
		{"verify_peer without CA", func(c *Config) { c.TLS.VerifyPeer = true }, []string{"tls.verify_peer", "tls.ca_file"}},
		{"missing CA file", func(c *Config) { c.TLS.CAFile = missing }, []string{"tls.ca_file", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("default config (TLS off) rejected: %v", err)
	}
}

// TestTLSFromEnvAndSet: the TLS keys are reachable as WARREN_* variables
// and --set keys like every other setting.
func TestTLSFromEnvAndSet(t *testing.T) {
	c := Default()
	if err := ApplyEnv(&c, []string{"WARREN_TLS_CERT_FILE=/c.pem", "WARREN_AMQP_TLS_LISTEN=:5671", "WARREN_TLS_VERIFY_PEER=true"}); err != nil {
		t.Fatal(err)
	}
	if err := Set(&c, "stream.tls_listen", ":5551"); err != nil {
		t.Fatal(err)
	}
	if c.TLS.CertFile != "/c.pem" || c.AMQP.TLSListen != ":5671" || !c.TLS.VerifyPeer || c.Stream.TLSListen != ":5551" {
		t.Fatalf("got %+v %q %q", c.TLS, c.AMQP.TLSListen, c.Stream.TLSListen)
	}
}
