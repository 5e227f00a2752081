package config

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cluster configures the node's identity, how it finds its peers and how
// nodes trust each other. A node with no seeds and no DNS name is a cluster
// of one; it still listens, so others can join it.
type Cluster struct {
	// NodeName is the node's stable name: its Raft server id, its name in
	// the HTTP API and in `warren ctl cluster-status`. It must not change
	// while the node's data directory lives, and a wiped node must come
	// back under a new name (or be forgotten first).
	NodeName string `json:"node_name"`
	// Listen is the inter-node gRPC listener.
	Listen string `json:"listen"`
	// Advertise is the host:port peers dial to reach this node; empty
	// means the hostname and Listen's port.
	Advertise string `json:"advertise"`
	// Seeds are peers to join, host:port of their cluster listeners; a
	// node may list itself.
	Seeds []string `json:"seeds"`
	// DNS is a name whose A/AAAA records are the peers (the operator's
	// headless Service), with an optional :port (default Listen's port).
	DNS string `json:"dns"`
	// Secret is the join secret every node of the cluster shares; a peer
	// that does not present it is refused. Prefer SecretFile.
	Secret string `json:"secret"`
	// SecretFile holds the join secret (surrounding whitespace ignored).
	// When neither Secret nor SecretFile is set, the secret is read from
	// $HOME/.warren-cluster-secret, made with 32 random bytes on first use
	// (as RabbitMQ's Erlang cookie): nodes of one user on one machine
	// share it with no setup.
	SecretFile string `json:"secret_file"`
	// MetadataWriteTimeout bounds a metadata change a client asked for (a
	// declare, a user change): without a majority of the members it fails
	// after this long instead of waiting for the partition to heal.
	MetadataWriteTimeout time.Duration `json:"metadata_write_timeout"`
	// TLS, when its files are set, makes the inter-node connections mutual
	// TLS: each node presents CertFile and verifies its peer's certificate
	// against CAFile, in both directions.
	TLS ClusterTLS `json:"tls"`
}

// ClusterTLS holds the inter-node certificate; the three files go together.
type ClusterTLS struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	CAFile   string `json:"ca_file"`
}

// Enabled reports whether inter-node TLS is configured.
func (t ClusterTLS) Enabled() bool { return t != ClusterTLS{} }

// DefaultSecretFile is where the join secret is kept when the
// configuration names none.
func DefaultSecretFile() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("config: cluster.secret_file is not set and there is no home directory: %w", err)
	}
	return filepath.Join(home, ".warren-cluster-secret"), nil
}

// LoadSecret returns the join secret: Secret, else SecretFile's content,
// else the default file's, which is made (mode 0600) when missing.
func (c Cluster) LoadSecret() ([]byte, error) {
	if c.Secret != "" {
		return []byte(c.Secret), nil
	}
	path, create := c.SecretFile, false
	if path == "" {
		p, err := DefaultSecretFile()
		if err != nil {
			return nil, err
		}
		path, create = p, true
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("config: make cluster secret: %w", err)
		}
		data = []byte(hex.EncodeToString(b[:]) + "\n")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) { // another node made it first
			data, err = os.ReadFile(path)
		} else if err == nil {
			_, err = f.Write(data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return nil, fmt.Errorf("config: cluster secret %s: %w", path, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("config: cluster.secret_file: %w", err)
	}
	secret := strings.TrimSpace(string(data))
	if len(secret) < 16 || len(secret) > maxSecret {
		return nil, fmt.Errorf("config: the cluster secret in %s must be 16 to %d characters, not %d", path, maxSecret, len(secret))
	}
	return []byte(secret), nil
}

// maxSecret bounds the join secret (the transport carries it in a
// length-prefixed field of at most 4,096 bytes).
const maxSecret = 4096

// AdvertiseAddr is the host:port peers dial to reach this node.
func (c Cluster) AdvertiseAddr() (string, error) {
	if c.Advertise != "" {
		return c.Advertise, nil
	}
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return "", fmt.Errorf("config: cluster.listen %q: %w", c.Listen, err)
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("config: cluster.advertise is not set and the hostname is unknown: %w", err)
	}
	return net.JoinHostPort(host, port), nil
}

// TLSConfigs returns the inter-node server and client TLS configurations
// (mutual: each side presents the certificate and requires the other's,
// verified against CAFile), or nils when TLS is not configured. serverName
// is the name the client expects in a peer's certificate; empty takes it
// from the address dialled.
func (t ClusterTLS) TLSConfigs() (server, client *tls.Config, err error) {
	if !t.Enabled() {
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("config: cluster.tls: %w", err)
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("config: cluster.tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("config: cluster.tls.ca_file %s holds no PEM certificate", t.CAFile)
	}
	server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	client = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool}
	return server, client, nil
}

// nodeNameOK: letters, digits and @ . _ - (RabbitMQ's name@host style),
// 1 to 255 bytes.
func nodeNameOK(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '@', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

func (c Config) validateCluster() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	cl := c.Cluster
	if !nodeNameOK(cl.NodeName) {
		bad("cluster.node_name", "must be 1 to 255 letters, digits and @ . _ -, got %q", cl.NodeName)
	}
	if _, _, err := net.SplitHostPort(cl.Listen); err != nil {
		bad("cluster.listen", "must be host:port, got %q", cl.Listen)
	}
	if cl.Advertise != "" {
		if _, _, err := net.SplitHostPort(cl.Advertise); err != nil {
			bad("cluster.advertise", "must be host:port, got %q", cl.Advertise)
		}
	}
	for _, s := range cl.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			bad("cluster.seeds", "each seed must be host:port, got %q", s)
		}
	}
	if cl.MetadataWriteTimeout < time.Second || cl.MetadataWriteTimeout > time.Hour {
		bad("cluster.metadata_write_timeout", "must be between 1s and 1h, got %v", cl.MetadataWriteTimeout)
	}
	if cl.Secret != "" && cl.SecretFile != "" {
		bad("cluster.secret", "set cluster.secret or cluster.secret_file, not both")
	}
	if cl.Secret != "" && (len(cl.Secret) < 16 || len(cl.Secret) > maxSecret) {
		bad("cluster.secret", "must be 16 to %d characters", maxSecret)
	}
	t := cl.TLS
	if t.Enabled() && (t.CertFile == "" || t.KeyFile == "" || t.CAFile == "") {
		bad("cluster.tls", "cert_file, key_file and ca_file must be set together")
	} else if t.Enabled() {
		if _, _, err := t.TLSConfigs(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
