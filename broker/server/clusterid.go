package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// clusterIDFile holds the node's permanent cluster id (as RabbitMQ's
// persistent cluster id, the rabbitmq_cluster_permanent_id label).
const clusterIDFile = "cluster_id"

// clusterID reads the data directory's cluster id, making one (random,
// written to a temporary file, fsynced and renamed) on the first start.
func clusterID(dataDir string) (string, error) {
	p := filepath.Join(dataDir, clusterIDFile)
	b, err := os.ReadFile(p)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("server: read cluster id: %w", err)
	}
	id, err := randomID("rabbitmq-cluster-id-")
	if err != nil {
		return "", fmt.Errorf("server: make cluster id: %w", err)
	}
	tmp := p + ".tmp"
	if err := writeSynced(tmp, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("server: write cluster id: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("server: write cluster id: %w", err)
	}
	return id, nil
}

// randomID is prefix and 16 random bytes in hex.
func randomID(prefix string) (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(raw[:]), nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
