package meta

import (
	"testing"

	"github.com/warrenmq/warren/broker/cluster/raftgroup"
)

// TestDeleteQueueIf: a conditional delete removes the queue only while
// its record is the one the caller read; a queue declared again under the
// same name (elsewhere, or by another connection) stays. Both stores.
func TestDeleteQueueIf(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"local": func(t *testing.T) Store { return openT(t, t.TempDir()) },
		"raft": func(t *testing.T) Store {
			c := newRaftCluster(t, 3, raftgroup.Timing{})
			return c.follower().r // writes go to the leader
		},
	}
	read := Queue{Vhost: "/", Name: "q", Type: "classic", Node: "n2", Exclusive: true, Owner: &QueueOwner{Node: "n2", Conn: 7}}
	for _, tc := range []struct {
		name    string
		now     *Queue // the record when the delete applies; nil: none
		deleted bool
	}{
		{"unchanged", &read, true},
		{"gone", nil, false},
		{"declared again on another node", &Queue{Vhost: "/", Name: "q", Type: "classic", Node: "n3", Exclusive: true, Owner: &QueueOwner{Node: "n3", Conn: 1}}, false},
		{"declared again by another connection", &Queue{Vhost: "/", Name: "q", Type: "classic", Node: "n2", Exclusive: true, Owner: &QueueOwner{Node: "n2", Conn: 8}}, false},
		{"declared again durable", &Queue{Vhost: "/", Name: "q", Type: "classic", Node: "n2", Durable: true}, false},
		{"declared again as a stream", &Queue{Vhost: "/", Name: "q", Type: "stream", Node: "n2", Exclusive: true, Owner: &QueueOwner{Node: "n2", Conn: 7}}, false},
	} {
		for kind, open := range stores {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				s := open(t)
				ctx := ctxT(t)
				must(t, s.PutVhost(ctx, Vhost{Name: "/"}))
				if tc.now != nil {
					must(t, s.PutQueue(ctx, *tc.now))
				}
				deleted, err := s.DeleteQueueIf(ctx, read)
				must(t, err)
				if deleted != tc.deleted {
					t.Fatalf("deleted %v, want %v", deleted, tc.deleted)
				}
				left := s.Queues("/")
				if want := tc.now != nil && !tc.deleted; (len(left) == 1) != want {
					t.Fatalf("queues left %+v; want the record kept: %v", left, want)
				}
			})
		}
	}
}
