package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/meta"
)

func connectErr(n *brokertest.Node, user, pass, vhost string) error {
	e, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(n.StreamURIFor(user, pass, vhost)).SetRPCTimeout(5 * time.Second))
	if err == nil {
		_ = e.Close()
	}
	return err
}

// TestConnectionRefusals: wrong password, unknown vhost and a vhost the
// user has no permission on get RabbitMQ's codes.
func TestConnectionRefusals(t *testing.T) {
	n := brokertest.Start(t)
	ctx := context.Background()
	hash, err := meta.HashPassword("secret")
	must(t, err)
	must(t, n.Meta().PutUser(ctx, meta.User{Name: "alice", PasswordHash: hash, HashingAlgorithm: "rabbit_password_hashing_sha256"}))
	must(t, n.Meta().PutVhost(ctx, meta.Vhost{Name: "other"}))

	if err := connectErr(n, "guest", "wrong", "/"); !errors.Is(err, stream.AuthenticationFailure) {
		t.Errorf("wrong password: %v", err)
	}
	if err := connectErr(n, "nobody", "x", "/"); !errors.Is(err, stream.AuthenticationFailure) {
		t.Errorf("unknown user: %v", err)
	}
	if err := connectErr(n, "guest", "guest", "missing"); !errors.Is(err, stream.VirtualHostAccessFailure) {
		t.Errorf("unknown vhost: %v", err)
	}
	if err := connectErr(n, "alice", "secret", "other"); !errors.Is(err, stream.VirtualHostAccessFailure) {
		t.Errorf("vhost without permission: %v", err)
	}
	// Read-only on "/": may consume, may not create or publish.
	must(t, n.Meta().PutPermission(ctx, meta.Permission{User: "alice", Vhost: "/", Configure: "^$", Write: "^$", Read: ".*"}))
	guest := env(t, n)
	must(t, guest.DeclareStream("ro", nil))
	alice := envURI(t, n.StreamURIFor("alice", "secret", "/"))
	if err := alice.DeclareStream("mine", nil); !errors.Is(err, stream.CodeAccessRefused) {
		t.Errorf("create without configure: %v", err)
	}
	if _, err := alice.NewProducer("ro", nil); !errors.Is(err, stream.CodeAccessRefused) {
		t.Errorf("publish without write: %v", err)
	}
	c, err := alice.NewConsumer("ro", func(stream.ConsumerContext, *amqp.Message) {}, nil)
	must(t, err)
	must(t, c.Close())
}

// TestMissingStream: producers, consumers and stats of a missing stream
// fail with StreamDoesNotExist.
func TestMissingStream(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	if _, err := e.NewProducer("nope", nil); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Errorf("producer: %v", err)
	}
	if _, err := e.NewConsumer("nope", func(stream.ConsumerContext, *amqp.Message) {}, nil); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Errorf("consumer: %v", err)
	}
	if _, err := e.StreamStats("nope"); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Errorf("stats: %v", err)
	}
	if _, err := e.QueryOffset("c", "nope"); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Errorf("query offset: %v", err)
	}
}

// TestStats: first, last and committed chunk ids follow the log.
func TestStats(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("stats", nil))
	st, err := e.StreamStats("stats")
	must(t, err)
	if _, err := st.FirstOffset(); err == nil {
		t.Fatal("first offset of an empty stream")
	}
	publish(t, e, "stats", "m", 250, nil)
	publish(t, e, "stats", "n", 250, nil) // confirmed after the first: a later chunk
	st, err = e.StreamStats("stats")
	must(t, err)
	first, err := st.FirstOffset()
	must(t, err)
	committed, err := st.CommittedChunkId()
	must(t, err)
	if first != 0 || committed < 250 || committed > 499 {
		t.Fatalf("first %d committed %d", first, committed)
	}
}

// TestStreamDeletedUnderClients: deleting a stream tells its producers and
// consumers (metadata update) and closes them.
func TestStreamDeletedUnderClients(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("doomed", nil))
	p, err := e.NewProducer("doomed", nil)
	must(t, err)
	c, err := e.NewConsumer("doomed", func(stream.ConsumerContext, *amqp.Message) {}, nil)
	must(t, err)
	pc, cc := p.NotifyClose(), c.NotifyClose()
	other := env(t, n)
	must(t, other.DeleteStream("doomed"))
	for _, ch := range []stream.ChannelClose{pc, cc} {
		select {
		case ev := <-ch:
			if ev.StreamName != "doomed" {
				t.Fatalf("close event %+v", ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no close event after the stream was deleted")
		}
	}
}

// TestVhostDeletionClosesConnections: deleting a vhost closes the stream
// connections open on it, and only those.
func TestVhostDeletionClosesConnections(t *testing.T) {
	n := brokertest.Start(t)
	ctx := context.Background()
	must(t, n.Meta().PutVhost(ctx, meta.Vhost{Name: "doomed"}))
	must(t, n.Meta().PutPermission(ctx, meta.Permission{User: "guest", Vhost: "doomed", Configure: ".*", Write: ".*", Read: ".*"}))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := n.Vhost("doomed"); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	doomed := envURI(t, n.StreamURIFor("guest", "guest", "doomed"))
	must(t, doomed.DeclareStream("s", nil))
	p, err := doomed.NewProducer("s", nil)
	must(t, err)
	closed := p.NotifyClose()
	other := env(t, n)
	must(t, n.Meta().DeleteVhost(ctx, "doomed"))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("producer on the deleted vhost still open")
	}
	must(t, other.DeclareStream("still-here", nil))
}
