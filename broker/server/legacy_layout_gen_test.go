//go:build legacydata

package server_test

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// TestGenerateLegacyLayout writes testdata/layout-v1.tar.gz: the fixture of
// legacy_layout_test.go in the data directory layout of the broker it runs
// in. It was run at commit eeaaeef (the last one before names went through
// broker/store/pathname), from a `git worktree add /tmp/old eeaaeef` with
// this file and legacy_layout_test.go copied in:
//
//	go test -tags legacydata -run TestGenerateLegacyLayout ./broker/server/
func TestGenerateLegacyLayout(t *testing.T) {
	dir := t.TempDir()
	n := brokertest.StartConfig(t, brokertest.Config(dir))
	fillLegacy(t, n)
	checkLegacy(t, n, false)
	n.Stop()
	writeTarGz(t, dir, filepath.Join("testdata", "layout-v1.tar.gz"))
}

// writeTarGz archives the files and directories under dir (not the lock).
func writeTarGz(t *testing.T, dir, archive string) {
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || d.Name() == "lock" && filepath.Dir(p) == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = filepath.ToSlash(rel)
		h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = info.ModTime().UTC().Truncate(1e9), 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// fillLegacy declares the fixture on n and publishes its messages with
// confirms, and stores the stream offsets.
func fillLegacy(t *testing.T, n *brokertest.Node) {
	for _, v := range legacyVhosts {
		if v != "/" {
			if code := n.API(t, http.MethodPut, "/api/vhosts/"+url.PathEscape(v), map[string]any{}, nil); code/100 != 2 {
				t.Fatalf("create vhost %q: %d", v, code)
			}
			if code := n.API(t, http.MethodPut, "/api/permissions/"+url.PathEscape(v)+"/guest", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, nil); code/100 != 2 {
				t.Fatalf("grant %q: %d", v, code)
			}
		}
		conn, err := amqp091.Dial(n.URLFor("guest", "guest", v))
		if err != nil {
			t.Fatalf("dial %q: %v", v, err)
		}
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		for _, q := range legacyQueues {
			if _, err := ch.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
				t.Fatalf("declare %q in %q: %v", q.name, v, err)
			}
			for _, b := range legacyBodies(v, q.name) {
				dc, err := ch.PublishWithDeferredConfirm("", q.name, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(b)})
				if err != nil || !dc.Wait() {
					t.Fatalf("publish to %q in %q: %v", q.name, v, err)
				}
			}
		}
		_ = conn.Close()
		storeLegacyOffset(t, n, v, "Events.s")
	}
}

// storeLegacyOffset stores legacyOffset for legacyReader on stream s.
func storeLegacyOffset(t *testing.T, n *brokertest.Node, vhost, s string) {
	e := streamEnv(t, n, vhost)
	c, err := e.NewConsumer(s, func(stream.ConsumerContext, *streamamqp.Message) {},
		stream.NewConsumerOptions().SetConsumerName(legacyReader).SetManualCommit().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StoreCustomOffset(legacyOffset); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 5*time.Second, "stored offset of "+s, func() error {
		off, err := e.QueryOffset(legacyReader, s)
		if err == nil && off != legacyOffset {
			err = fmt.Errorf("offset %d", off)
		}
		return err
	})
	_ = c.Close()
	_ = e.Close()
}
