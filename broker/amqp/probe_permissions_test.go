package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// addUser creates a user with tags and its permissions on vhost "/" through
// the HTTP API, as an operator would.
func addUser(t *testing.T, n *brokertest.Node, name, tags, configure, write, read string) {
	t.Helper()
	if code := n.API(t, http.MethodPut, "/api/users/"+url.PathEscape(name), map[string]any{"password": name, "tags": tags}, nil); code/100 != 2 {
		t.Fatalf("PUT user %s: status %d", name, code)
	}
	perm := map[string]any{"configure": configure, "write": write, "read": read}
	if code := n.API(t, http.MethodPut, "/api/permissions/%2F/"+url.PathEscape(name), perm, nil); code/100 != 2 {
		t.Fatalf("PUT permissions of %s: status %d", name, code)
	}
}

// dialAs opens a connection as a user made by addUser.
func dialAs(t *testing.T, n *brokertest.Node, user string) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.Dial(n.URLFor(user, user, "/"))
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// publishSettled publishes in confirm mode and returns nil once the
// message is confirmed, or the channel's error if the broker closes it.
func publishSettled(ch *amqp091.Channel, exchange, key string, p amqp091.Publishing) error {
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	if err := ch.Confirm(false); err != nil {
		return err
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false, p)
	if err != nil {
		return err
	}
	select {
	case e := <-closed:
		if e == nil {
			return errors.New("channel closed without an error")
		}
		return e
	case <-dc.Done():
		if !dc.Acked() {
			return errors.New("publish nacked")
		}
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("publish neither confirmed nor refused")
	}
}

// TestProbePermissionGaps: a user may not reach, through a queue's
// dead-letter exchange or an exchange's alternate exchange, an exchange it
// may not write to; may not publish with another user's user_id; and may
// not declare a server-named queue outside its configure pattern. Each
// refusal carries RabbitMQ's reply code, and the legitimate cases work.
func TestProbePermissionGaps(t *testing.T) {
	n := brokertest.Start(t)
	addUser(t, n, "alice", "", "^a-.*", "^a-.*", "^a-.*")
	addUser(t, n, "writer", "", ".*", ".*", "") // may read nothing
	addUser(t, n, "gen", "", `^amq\.gen-.*`, "", "")
	addUser(t, n, "imp", "impersonator", ".*", ".*", ".*")
	guest := n.Channel(t)
	// The victim: a queue alice may not write to, behind amq.fanout.
	declare(t, guest, "victim", false, nil)
	if err := guest.QueueBind("victim", "", "amq.fanout", false, nil); err != nil {
		t.Fatal(err)
	}
	// Redeclaring what exists is not re-checked (as RabbitMQ).
	declare(t, guest, "a-existing", false, amqp091.Table{"x-dead-letter-exchange": "amq.fanout"})
	if code := n.API(t, http.MethodPut, "/api/policies/%2F/a-pol", map[string]any{"pattern": "^a-pol", "apply-to": "queues", "definition": map[string]any{"dead-letter-exchange": "amq.fanout"}}, nil); code/100 != 2 {
		t.Fatalf("PUT policy: status %d", code)
	}

	// expire sends one message through exchange x (declared and bound to
	// q by the caller's user) that expires at once in q.
	expire := func(ch *amqp091.Channel, x, q string) error {
		if err := ch.ExchangeDeclare(x, "fanout", false, true, false, false, nil); err != nil {
			return err
		}
		if err := ch.QueueBind(q, "", x, false, nil); err != nil {
			return err
		}
		return publishSettled(ch, x, "", amqp091.Publishing{Body: []byte("to the victim?"), Expiration: "0"})
	}
	tests := []struct {
		name string
		user string
		run  func(ch *amqp091.Channel) error
		code int // 0: allowed
	}{
		{"dead-letter exchange the user may not write", "alice", func(ch *amqp091.Channel) error {
			if _, err := ch.QueueDeclare("a-dlq", false, true, false, false, amqp091.Table{"x-dead-letter-exchange": "amq.fanout"}); err != nil {
				return err
			}
			return expire(ch, "a-dlq-x", "a-dlq")
		}, 403},
		{"dead-letter exchange on a queue the user may not read", "writer", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("w-dlq", false, true, false, false, amqp091.Table{"x-dead-letter-exchange": "amq.fanout"})
			return err
		}, 403},
		{"dead-letter exchange the user may write", "alice", func(ch *amqp091.Channel) error {
			if err := ch.ExchangeDeclare("a-dlx", "fanout", false, true, false, false, nil); err != nil {
				return err
			}
			_, err := ch.QueueDeclare("a-q", false, true, false, false, amqp091.Table{"x-dead-letter-exchange": "a-dlx"})
			return err
		}, 0},
		{"dead-letter exchange of an existing queue", "alice", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("a-existing", false, false, false, false, amqp091.Table{"x-dead-letter-exchange": "amq.fanout"})
			return err
		}, 0},
		{"dead-letter exchange from a policy", "alice", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("a-pol", false, true, false, false, nil)
			return err
		}, 0},
		{"alternate exchange the user may not write", "alice", func(ch *amqp091.Channel) error {
			if err := ch.ExchangeDeclare("a-ae", "direct", false, true, false, false, amqp091.Table{"alternate-exchange": "amq.fanout"}); err != nil {
				return err
			}
			return publishSettled(ch, "a-ae", "nowhere", amqp091.Publishing{Body: []byte("to the victim?")})
		}, 403},
		{"alternate exchange on an exchange the user may not read", "writer", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("w-ae", "direct", false, true, false, false, amqp091.Table{"alternate-exchange": "amq.fanout"})
		}, 403},
		{"alternate exchange the user may write", "alice", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("a-ae-ok", "direct", false, true, false, false, amqp091.Table{"alternate-exchange": "a-alt"})
		}, 0},
		{"alternate exchange of the wrong type", "alice", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("a-ae-int", "direct", false, true, false, false, amqp091.Table{"alternate-exchange": int32(7)})
		}, 406},
		{"user_id of another user", "alice", func(ch *amqp091.Channel) error {
			if err := ch.ExchangeDeclare("a-uid", "fanout", false, true, false, false, nil); err != nil {
				return err
			}
			return publishSettled(ch, "a-uid", "", amqp091.Publishing{UserId: "guest", Body: []byte("forged")})
		}, 406},
		{"user_id of the user", "alice", func(ch *amqp091.Channel) error {
			if err := ch.ExchangeDeclare("a-uid-ok", "fanout", false, true, false, false, nil); err != nil {
				return err
			}
			return publishSettled(ch, "a-uid-ok", "", amqp091.Publishing{UserId: "alice", Body: []byte("mine")})
		}, 0},
		{"user_id of another user by an impersonator", "imp", func(ch *amqp091.Channel) error {
			return publishSettled(ch, "", "victim", amqp091.Publishing{UserId: "guest", Body: []byte("on behalf")})
		}, 0},
		{"server-named queue outside the configure pattern", "alice", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("", false, true, true, false, nil)
			return err
		}, 403},
		{"server-named queue inside the configure pattern", "gen", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("", false, true, true, false, nil)
			return err
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := dialAs(t, n, tt.user)
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			err = tt.run(ch)
			if tt.code == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ae *amqp091.Error
			if !errors.As(err, &ae) || ae.Code != tt.code {
				t.Fatalf("got %v, want reply code %d", err, tt.code)
			}
			// A channel error: the connection stays usable.
			if _, err := conn.Channel(); err != nil {
				t.Fatalf("connection unusable after the refusal: %v", err)
			}
		})
	}
	// Only the message the impersonator published to it reached the
	// victim: nothing came through a dead-letter or alternate exchange.
	eventually.Holds(t, 300*time.Millisecond, "victim queue", func() error {
		q, err := guest.QueueDeclarePassive("victim", false, false, false, false, nil)
		if err != nil {
			return err
		}
		if q.Messages != 1 {
			return fmt.Errorf("victim holds %d messages, want the impersonator's 1", q.Messages)
		}
		return nil
	})
}
