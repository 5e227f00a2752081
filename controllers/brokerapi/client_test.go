package brokerapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
)

// The client against a real in-process broker: the calls the operator
// makes, and the errors a user would read in the Broker's condition.
func TestClientAgainstBroker(t *testing.T) {
	node := brokertest.Start(t)
	ctx := context.Background()
	c := &Client{BaseURL: node.HTTPURL(), Username: "guest", Password: "guest"}

	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if _, err := c.Vhost(ctx, "orders"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing vhost: err %v, want ErrNotFound", err)
	}
	off := false
	want := Vhost{Name: "orders", DefaultQueueType: "quorum", Storage: Storage{QueueVersion: 1, EmbedMessagesBelow: 512, StreamReadAhead: &off, StreamReadAheadLimit: 8192}}
	if err := c.PutVhost(ctx, want); err != nil {
		t.Fatalf("PutVhost: %v", err)
	}
	got, err := c.Vhost(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got.DefaultQueueType != "quorum" || !got.Storage.Equal(want.Storage) {
		t.Errorf("vhost %+v, want %+v", got, want)
	}
	// The default vhost "/" is a path segment of its own.
	if err := c.PutVhost(ctx, Vhost{Name: "/", Storage: Storage{QueueVersion: 2}}); err != nil {
		t.Fatalf("PutVhost /: %v", err)
	}
	if got, err := c.Vhost(ctx, "/"); err != nil || got.Name != "/" || got.Storage.QueueVersion != 2 {
		t.Errorf("vhost /: %+v, %v", got, err)
	}

	errs := []struct {
		name string
		call func() error
		want string
	}{
		{"wrong password", func() error {
			bad := *c
			bad.Password = "nope"
			_, err := bad.Vhost(ctx, "orders")
			return err
		}, "401"},
		{"invalid policy", func() error {
			return c.PutVhost(ctx, Vhost{Name: "orders", Storage: Storage{QueueVersion: 3}})
		}, "400"},
		{"nothing listening", func() error {
			down := &Client{BaseURL: "http://127.0.0.1:1", Username: "guest", Password: "guest"}
			return down.Ready(ctx)
		}, "connection refused"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestStorageEqual(t *testing.T) {
	on, off := true, false
	cases := []struct {
		a, b Storage
		want bool
	}{
		{Storage{}, Storage{}, true},
		{Storage{StreamReadAhead: &on}, Storage{}, false},
		{Storage{StreamReadAhead: &on}, Storage{StreamReadAhead: &off}, false},
		{Storage{StreamReadAhead: &on, QueueVersion: 1}, Storage{StreamReadAhead: &on, QueueVersion: 1}, true},
		{Storage{EmbedMessagesBelow: 1}, Storage{EmbedMessagesBelow: 2}, false},
	}
	for i, tc := range cases {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("case %d: Equal = %v", i, got)
		}
	}
}
