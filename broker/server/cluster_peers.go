package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/meta"
)

// peerBook tells the transport where each member listens. The metadata's
// node table is the source; a copy is kept in a file because after a
// restart the table is only current once the node has applied the log,
// which needs a leader, which needs the peers' addresses: the file breaks
// that circle (seeds and DNS, asked by membership, are the other way).
type peerBook struct {
	path string
	net  *transport.GRPCNetwork
	log  *slog.Logger

	mu    sync.Mutex
	addrs map[string]string
}

func openPeerBook(path string, nw *transport.GRPCNetwork, log *slog.Logger) *peerBook {
	p := &peerBook{path: path, net: nw, log: log, addrs: map[string]string{}}
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cluster: cannot read the peer address cache; peers are found through seeds, DNS and the metadata", "file", path, "error", err)
		}
		return p
	}
	if err := json.Unmarshal(data, &p.addrs); err != nil {
		log.Warn("cluster: ignoring a damaged peer address cache", "file", path, "error", err)
		p.addrs = map[string]string{}
	}
	for name, addr := range p.addrs {
		if err := nw.SetAddress(name, addr); err != nil {
			log.Warn("cluster: bad cached peer address", "node", name, "address", addr, "error", err)
		}
	}
	return p
}

// learn takes the metadata's node table as the truth: it tells the
// transport every address and rewrites the cache when something changed.
//
// An empty table is not taken: a member's table lists at least itself,
// so an empty one is a metadata not applied yet (a restart whose log the
// leader has not confirmed, a node wiped to join another cluster), and
// taking it would drop the cached addresses the node needs to reach its
// peers.
func (p *peerBook) learn(nodes []meta.Node) {
	if len(nodes) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make(map[string]string, len(nodes))
	changed := len(nodes) != len(p.addrs)
	for _, n := range nodes {
		next[n.Name] = n.Address
		if p.addrs[n.Name] != n.Address {
			changed = true
			if err := p.net.SetAddress(n.Name, n.Address); err != nil {
				p.log.Warn("cluster: bad peer address in the metadata", "node", n.Name, "address", n.Address, "error", err)
			}
		}
	}
	for name := range p.addrs {
		if _, ok := next[name]; !ok { // forgotten or left: drop its connection
			changed = true
			_ = p.net.SetAddress(name, "")
		}
	}
	if !changed {
		return
	}
	p.addrs = next
	data, _ := json.Marshal(next)
	if err := writeSyncedRename(p.path, data); err != nil {
		p.log.Warn("cluster: cannot write the peer address cache", "file", p.path, "error", err)
	}
}

// writeSyncedRename replaces path with data atomically and durably.
func writeSyncedRename(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, data); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// nodeIDFile holds the node's incarnation id: made with the data
// directory, so a node whose disk was wiped comes back with another one
// and the cluster does not take it for the old member (see membership).
const nodeIDFile = "node_id"

func nodeIncarnation(dataDir string) (string, error) {
	p := filepath.Join(dataDir, nodeIDFile)
	b, err := os.ReadFile(p)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("server: read node id: %w", err)
	}
	id, err := randomID("")
	if err != nil {
		return "", fmt.Errorf("server: make node id: %w", err)
	}
	if err := writeSyncedRename(p, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("server: write node id: %w", err)
	}
	return id, nil
}
