package membership

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// joinMarker is what Join records on disk before it wipes the node: the
// cluster it is joining. A node that restarts with its group empty and
// this marker present was killed mid-join (its answer may have been lost
// after the cluster's leader added it): it never forms a cluster of its
// own then, it keeps asking that cluster to add it (Start).
type joinMarker struct {
	// Address is the cluster address warren ctl join named.
	Address string `json:"address"`
	// Via is the name of the node that answered there.
	Via string `json:"via"`
}

// writeMarker records mk durably (the file, then its directory). No-op
// without Config.JoinMarker.
func (m *Membership) writeMarker(mk joinMarker) error {
	path := m.cfg.JoinMarker
	if path == "" {
		return nil
	}
	data, _ := json.Marshal(mk)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("membership: record the join: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("membership: record the join: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("membership: record the join: %w", err)
	}
	return nil
}

// readMarker returns the recorded join, ok false when there is none. An
// unreadable marker is an error: the node must not guess.
func (m *Membership) readMarker() (joinMarker, bool, error) {
	if m.cfg.JoinMarker == "" {
		return joinMarker{}, false, nil
	}
	data, err := os.ReadFile(m.cfg.JoinMarker)
	if errors.Is(err, fs.ErrNotExist) {
		return joinMarker{}, false, nil
	}
	if err != nil {
		return joinMarker{}, false, fmt.Errorf("membership: read %s: %w", m.cfg.JoinMarker, err)
	}
	var mk joinMarker
	if err := json.Unmarshal(data, &mk); err != nil || mk.Address == "" {
		return joinMarker{}, false, fmt.Errorf("membership: %s does not name the cluster this node was joining (remove it to let the node form or join a cluster as configured): %v", m.cfg.JoinMarker, err)
	}
	return mk, true, nil
}

// removeMarker forgets the recorded join (done, or refused before the
// cluster added this node).
func (m *Membership) removeMarker() {
	if m.cfg.JoinMarker == "" {
		return
	}
	if err := os.Remove(m.cfg.JoinMarker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("cluster: could not remove the join marker", "path", m.cfg.JoinMarker, "error", err)
		return
	}
	_ = syncDir(filepath.Dir(m.cfg.JoinMarker))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
