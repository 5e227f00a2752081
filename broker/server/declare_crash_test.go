package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// TestKill9KeepsDeclaredQueues: connections declare durable queues as fast
// as they can, each publishing one persistent message with a confirm to
// the queue it was just told exists; the broker is killed with SIGKILL in
// the middle, while queues are still being recorded and opened (a queue's
// files are created off the metadata's apply goroutine). After a restart
// every queue that got declare-ok exists, and holds its confirmed message;
// a queue recorded without an answer, if there, works.
func TestKill9KeepsDeclaredQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the warren binary")
	}
	bin := brokertest.BuildWarren(t)
	dir := t.TempDir()
	p := startProcess(t, bin, dir)
	declared, confirmed := declareUntilKilled(t, p.url(), p.Kill)
	p2 := startProcess(t, bin, dir)
	checkDeclared(t, p2.url(), declared, confirmed)
	_ = os.Remove(bin)
}

// TestKill9OfAFollowerKeepsDeclaredQueues is TestKill9KeepsDeclaredQueues
// on a three-node cluster: the declares go to a node that does not lead
// the metadata (it holds the queues: their records go through the leader,
// their files are made here), which is killed with SIGKILL and restarted.
func TestKill9OfAFollowerKeepsDeclaredQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three warren processes")
	}
	bin := brokertest.BuildWarren(t)
	type node struct {
		name, dir string
		cluster   int // fixed, for the seeds
		p         *brokertest.Process
	}
	nodes := make([]*node, 3)
	var seeds []string
	for i := range nodes {
		nodes[i] = &node{name: fmt.Sprintf("crash-%d@localhost", i+1), dir: t.TempDir(), cluster: brokertest.FreePort(t)}
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", nodes[i].cluster))
	}
	launch := func(n *node) {
		n.p = brokertest.LaunchProcess(t, bin, n.dir, "cluster.node_name="+n.name, fmt.Sprintf("cluster.listen=127.0.0.1:%d", n.cluster),
			"cluster.seeds="+strings.Join(seeds, ","), "amqp.listen=127.0.0.1:0", "http.listen=127.0.0.1:0",
			"prometheus.listen=127.0.0.1:0", "stream.listen=127.0.0.1:0")
	}
	for _, n := range nodes {
		launch(n)
	}
	for _, n := range nodes {
		n.p.WaitStarted(t)
	}
	var leader string
	eventually.Succeeds(t, 60*time.Second, "a cluster of three", func() error {
		req, _ := http.NewRequest("GET", "http://"+nodes[0].p.Addr("http")+"/api/cluster/status", nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var st struct {
			Leader string `json:"metadata_leader"`
			Nodes  []struct {
				Running, Voter bool
			} `json:"nodes"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return err
		}
		up := 0
		for _, m := range st.Nodes {
			if m.Running && m.Voter {
				up++
			}
		}
		if up != 3 || st.Leader == "" {
			return fmt.Errorf("%d voters running, leader %q", up, st.Leader)
		}
		leader = st.Leader
		return nil
	})
	f := nodes[0]
	if f.name == leader {
		f = nodes[1]
	}
	url := "amqp://guest:guest@" + f.p.Addr("amqp") + "/"
	serves := func() error {
		c, err := amqp091.Dial(url)
		if err == nil {
			c.Close()
		}
		return err
	}
	eventually.Succeeds(t, 60*time.Second, "the follower serves AMQP", serves)
	declared, confirmed := declareUntilKilled(t, url, f.p.Kill)
	launch(f)
	f.p.WaitStarted(t)
	url = "amqp://guest:guest@" + f.p.Addr("amqp") + "/"
	eventually.Succeeds(t, 60*time.Second, "the restarted node serves AMQP", serves)
	checkDeclared(t, url, declared, confirmed)
	_ = os.Remove(bin)
}

const crashWorkers = 8

// declareUntilKilled declares queues named dq-<worker>-<i> from several
// connections to url, publishing one persistent message with a confirm to
// each once declared, until 200 are declared; then kill runs. It returns
// the queues that got declare-ok and those whose message was confirmed.
func declareUntilKilled(t *testing.T, url string, kill func()) (declared, confirmed map[string]bool) {
	t.Helper()
	var mu sync.Mutex
	declared, confirmed = map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := amqp091.Dial(url)
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				return
			}
			if err := ch.Confirm(false); err != nil {
				return
			}
			acks := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
			for i := 0; ; i++ {
				name := fmt.Sprintf("dq-%d-%d", w, i)
				if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
					return // the broker died
				}
				mu.Lock()
				declared[name] = true
				mu.Unlock()
				if err := ch.Publish("", name, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(name)}); err != nil {
					return
				}
				c, ok := <-acks
				if !ok {
					return
				}
				if c.Ack {
					mu.Lock()
					confirmed[name] = true
					mu.Unlock()
				}
			}
		}()
	}
	eventually.True(t, 60*time.Second, "200 queues declared", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(declared) >= 200
	})
	kill()
	wg.Wait()
	return declared, confirmed
}

// checkDeclared checks, on the restarted node at url, that every declared
// queue exists and holds its confirmed message, and that the queue each
// connection was declaring at the kill, when it was recorded without an
// answer, works.
func checkDeclared(t *testing.T, url string, declared, confirmed map[string]bool) {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatalf("dial after restart: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for name := range declared {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("queue %s got declare-ok before kill -9 and is gone after it: %v", name, err)
		}
		if confirmed[name] && q.Messages != 1 {
			t.Fatalf("queue %s holds %d messages after kill -9, want its confirmed one", name, q.Messages)
		}
	}
	inFlight := 0
	for w := range crashWorkers {
		next := 0
		for declared[fmt.Sprintf("dq-%d-%d", w, next)] {
			next++
		}
		name := fmt.Sprintf("dq-%d-%d", w, next)
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclarePassive(name, true, false, false, false, nil); err != nil {
			continue // not recorded: the channel is closed with NOT_FOUND
		}
		inFlight++
		if err := ch.Publish("", name, false, false, amqp091.Publishing{Body: []byte("after")}); err != nil {
			t.Fatalf("publish to %s, recorded as the broker died: %v", name, err)
		}
		eventually.Succeeds(t, 5*time.Second, "a message through "+name, func() error {
			_, ok, err := ch.Get(name, true)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("queue %s recorded as the broker died does not deliver", name)
			}
			return nil
		})
		_ = ch.Close()
	}
	t.Logf("%d queues declared before kill -9 (%d with a confirmed message), all there; %d more recorded without an answer, working", len(declared), len(confirmed), inFlight)
}
