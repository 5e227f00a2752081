package meta

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// A node upgraded from the single-node layout brings its meta.log into the
// new group once, whatever step a crash cuts.
func TestRaftMigratesMetaLogOnceThroughCrashes(t *testing.T) {
	for _, crashAt := range []string{"", crashBeforeApply, crashApplied, crashRenamed} {
		t.Run("crash at "+crashAt, func(t *testing.T) {
			dir := t.TempDir()
			l, err := OpenLocal(ctxT(t), dir)
			must(t, err)
			fill(t, l)
			want := dumpJSON(l)
			must(t, l.Close())

			hub := transport.NewInmemHub()
			stores := logstore.NewInmem()
			open := func(crash string) (*Raft, error) {
				return OpenRaft(ctxT(t), RaftConfig{Dir: dir, Network: hub.Network("n1"), Stores: stores,
					Timing: fastTiming, Bootstrap: true, Logger: testLogger(t), crashAt: crash})
			}
			if crashAt != "" {
				if _, err := open(crashAt); err == nil {
					t.Fatalf("open with a crash at %q succeeded", crashAt)
				}
				must(t, hub.Network("n1").Close())
			}
			for restart := range 2 {
				r, err := open("")
				must(t, err)
				must(t, r.Sync(ctxT(t)))
				if got := dumpJSON(r); got != want {
					t.Fatalf("restart %d: state\n%s\nwant\n%s", restart, got, want)
				}
				if n := r.fsm.commandCount(); n != 1 {
					t.Fatalf("restart %d: the group applied %d commands, want the migration's alone", restart, n)
				}
				if _, err := os.Stat(filepath.Join(dir, logName)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("restart %d: meta.log still there: %v", restart, err)
				}
				if _, err := os.Stat(filepath.Join(dir, logName+migratedSuffix)); err != nil {
					t.Fatalf("restart %d: meta.log.migrated: %v", restart, err)
				}
				must(t, r.Close())
				must(t, hub.Network("n1").Close())
			}
		})
	}
}

// Only the bootstrapping node migrates: a node that joins leaves its
// meta.log alone (the cluster's state is not its to replace).
func TestRaftJoiningNodeLeavesItsMetaLog(t *testing.T) {
	c := newRaftCluster(t, 1, fastTiming)
	must(t, c.nodes[0].r.PutVhost(ctxT(t), Vhost{Name: "cluster"}))
	dir := t.TempDir()
	l, err := OpenLocal(ctxT(t), dir)
	must(t, err)
	must(t, l.PutVhost(ctxT(t), Vhost{Name: "local-only"}))
	must(t, l.Close())
	nd := &raftNode{name: "n2", stores: logstore.NewInmem(), dir: dir}
	c.nodes = append(c.nodes, nd)
	c.start(nd, false)
	must(t, c.nodes[0].r.Group().AddVoter(ctxT(t), "n2"))
	must(t, nd.r.Sync(ctxT(t)))
	if _, ok := nd.r.Vhost("local-only"); ok {
		t.Fatal("a joining node's meta.log reached the cluster")
	}
	if _, ok := nd.r.Vhost("cluster"); !ok {
		t.Fatal("the joining node does not have the cluster's state")
	}
	if _, err := os.Stat(filepath.Join(dir, logName)); err != nil {
		t.Fatalf("the joining node's meta.log: %v", err)
	}
}

// A meta.log that shows up again on a node whose group has state (say a
// single-node store opened by mistake) is neither applied nor renamed over
// the migrated copy.
func TestRaftStrayMetaLogIsLeftAlone(t *testing.T) {
	c := newRaftCluster(t, 1, fastTiming)
	nd := c.nodes[0]
	must(t, nd.r.PutVhost(ctxT(t), Vhost{Name: "cluster"}))
	must(t, os.WriteFile(filepath.Join(nd.dir, logName+migratedSuffix), []byte("the real migration's copy"), 0o640))
	c.stop(nd)
	l, err := OpenLocal(ctxT(t), nd.dir)
	must(t, err)
	must(t, l.PutVhost(ctxT(t), Vhost{Name: "stray"}))
	must(t, l.Close())

	c.start(nd, false)
	must(t, nd.r.Sync(ctxT(t)))
	if _, ok := nd.r.Vhost("stray"); ok {
		t.Fatal("a stray meta.log was applied over the group's state")
	}
	if b, err := os.ReadFile(filepath.Join(nd.dir, logName+migratedSuffix)); err != nil || string(b) != "the real migration's copy" {
		t.Fatalf("meta.log.migrated: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(nd.dir, logName)); err != nil {
		t.Fatalf("the stray meta.log: %v", err)
	}
}
