package forward

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// span is the address range of a byte slice's contents.
type span struct{ lo, hi uintptr }

func spanOf(b []byte) span {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return span{p, p + uintptr(len(b))}
}

func (s span) overlaps(o span) bool { return s.lo < o.hi && o.lo < s.hi }

// A message the owner keeps pins its own group's bytes only: of a request
// of several groups, a decoded message's bytes lie neither in the request
// (up to MaxBatchBytes, every queue's messages) nor in another group's
// buffer, and writing over the request after the decode leaves every
// message as it was sent. (A request of one group is that group's bytes:
// its messages alias it, TestOneGroupRequestIsItsMessages.)
func TestDecodedPublishesDoNotAliasTheRequest(t *testing.T) {
	qa := &Queue{info: queue.Info{Vhost: "/", Name: "a"}}
	qb := &Queue{info: queue.Info{Vhost: "/", Name: "b"}}
	var items []item
	for i, q := range []*Queue{qa, qa, qb, qb, qb} {
		m := &message.Message{Exchange: "x", RoutingKey: q.info.Name, Body: []byte(fmt.Sprintf("body-%d", i)), Props: []byte{byte(i), 1, 2}}
		items = append(items, item{q: q, p: queue.Publish{Msg: m}})
	}
	req := appendPublishes(nil, items)
	p, err := decodePublishes(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.groups) != 2 || len(p.groups[0].msgs) != 2 || len(p.groups[1].msgs) != 3 {
		t.Fatalf("groups: %d", len(p.groups))
	}
	reqSpan := spanOf(req)
	var groupSpans [2][]span
	for gi, g := range p.groups {
		for _, m := range g.msgs {
			for _, b := range [][]byte{m.Body, m.Props} {
				s := spanOf(b)
				if s.overlaps(reqSpan) {
					t.Fatalf("group %d: a message's bytes lie in the request buffer", gi)
				}
				groupSpans[gi] = append(groupSpans[gi], s)
			}
		}
	}
	for _, a := range groupSpans[0] {
		for _, b := range groupSpans[1] {
			if a.overlaps(b) {
				t.Fatal("the two groups' messages share a buffer")
			}
		}
	}
	for i := range req {
		req[i] = 0xff
	}
	k := 0
	for _, g := range p.groups {
		for _, m := range g.msgs {
			want := items[k].p.Msg
			if string(m.Body) != string(want.Body) || string(m.Props) != string(want.Props) || m.RoutingKey != want.RoutingKey || m.Exchange != want.Exchange {
				t.Fatalf("message %d changed when the request was overwritten: body %q props %v", k, m.Body, m.Props)
			}
			k++
		}
	}
}

// A request of one group (one queue: the usual call) is its messages'
// bytes: they are decoded in place, not copied, and read as sent.
func TestOneGroupRequestIsItsMessages(t *testing.T) {
	q := &Queue{info: queue.Info{Vhost: "/", Name: "a"}}
	var items []item
	for i := range 3 {
		m := &message.Message{Exchange: "x", RoutingKey: "a", Body: []byte(fmt.Sprintf("body-%d", i)), Props: []byte{byte(i)}}
		items = append(items, item{q: q, p: queue.Publish{Msg: m}})
	}
	req := appendPublishes(nil, items)
	p, err := decodePublishes(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.groups) != 1 || len(p.groups[0].msgs) != 3 || p.total != 3 {
		t.Fatalf("groups %d, total %d", len(p.groups), p.total)
	}
	reqSpan := spanOf(req)
	for k, m := range p.groups[0].msgs {
		want := items[k].p.Msg
		if string(m.Body) != string(want.Body) || string(m.Props) != string(want.Props) {
			t.Fatalf("message %d: body %q props %v, want %q %v", k, m.Body, m.Props, want.Body, want.Props)
		}
		if s := spanOf(m.Body); s.lo < reqSpan.lo || s.hi > reqSpan.hi {
			t.Fatalf("message %d: its body was copied out of the request", k)
		}
	}
}
