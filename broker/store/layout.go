package store

import (
	"path/filepath"

	"github.com/warrenmq/warren/broker/store/pathname"
)

// The data directory's layout (LayoutVersion 2). Every name a client chose
// is one component made by pathname.Escape, so no name reaches outside its
// parent or meets another name:
//
//	<data_dir>/format                             LayoutVersion, written by MigrateLayout
//	<data_dir>/vhosts/<vhost>/msg_store/          the vhost's message store
//	<data_dir>/vhosts/<vhost>/queues/<queue>/     a classic queue's index
//	<data_dir>/vhosts/<vhost>/streams/<stream>/   a stream's log
const (
	vhostsDir  = "vhosts"
	queuesDir  = "queues"
	streamsDir = "streams"
	msgStore   = "msg_store"
)

// VhostDir is the storage directory of vhost under a node's data directory.
func VhostDir(dataDir, vhost string) string {
	return filepath.Join(dataDir, vhostsDir, pathname.Escape(vhost))
}

// StreamDir is the directory of stream's log in a vhost's storage directory.
func StreamDir(vhostDir, stream string) string {
	return filepath.Join(vhostDir, streamsDir, pathname.Escape(stream))
}

// queueDir is the directory of a classic queue's index.
func queueDir(vhostDir, queue string) string {
	return filepath.Join(vhostDir, queuesDir, pathname.Escape(queue))
}
