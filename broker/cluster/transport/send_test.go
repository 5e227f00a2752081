package transport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Requests one goroutine Sends reach an ordered handler in the order they
// were Sent, with their waits under way at once (the first answers only
// once the last has started), also to the node itself and, on the twin,
// with every request delayed at random on its way.
func TestSendStartsInOrder(t *testing.T) {
	const n = 200
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			if hub, ok := hubOf(a); ok {
				hub.SetDelay(func(_, _, _ string) time.Duration { return time.Duration(rand.IntN(2000)) * time.Microsecond })
			}
			for _, target := range []Network{b, a} {
				var mu sync.Mutex
				var started []int
				all := make(chan struct{})
				target.HandleOrdered("seq", Waiting(func(ctx context.Context, _ string, req []byte) (func() ([]byte, error), error) {
					i, err := strconv.Atoi(string(req))
					if err != nil {
						return nil, status.Error(codes.InvalidArgument, err.Error())
					}
					mu.Lock()
					started = append(started, i)
					if len(started) == n {
						close(all)
					}
					mu.Unlock()
					return func() ([]byte, error) {
						select {
						case <-all:
							return req, nil
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}, nil
				}))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				answers := make([]answerCh, n)
				for i := range n {
					answers[i] = make(answerCh, 1)
					if err := a.Send(ctx, target.Node(), "seq", []byte(strconv.Itoa(i)), answers[i].put); err != nil {
						t.Fatalf("send %d to %s: %v", i, target.Node(), err)
					}
				}
				for i, ch := range answers {
					r := <-ch
					if r.err != nil || string(r.resp) != strconv.Itoa(i) {
						t.Fatalf("call %d to %s answered %q, %v (waits not under way at once?)", i, target.Node(), r.resp, r.err)
					}
				}
				cancel()
				want := make([]int, n)
				for i := range want {
					want[i] = i
				}
				if !slices.Equal(started, want) {
					t.Fatalf("to %s: started in the order %v", target.Node(), started)
				}
			}
		})
	}
}

// A Send's errors are Call's: a start's status comes back from wait, a
// method without a handler is Unimplemented, an unknown node Unavailable.
func TestSendErrors(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			b.HandleOrdered("refuse", Waiting(func(context.Context, string, []byte) (func() ([]byte, error), error) {
				return nil, status.Error(codes.FailedPrecondition, "not now")
			}))
			b.Handle("plain", func(_ context.Context, from string, req []byte) ([]byte, error) {
				return fmt.Appendf(nil, "%s from %s", req, from), nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cases := []struct {
				node, method string
				code         codes.Code
				resp         string
			}{
				{b.Node(), "refuse", codes.FailedPrecondition, ""},
				{b.Node(), "plain", codes.OK, "hi from " + a.Node()},
				{b.Node(), "nope", codes.Unimplemented, ""},
			}
			for _, tc := range cases {
				ch := make(answerCh, 1)
				if err := a.Send(ctx, tc.node, tc.method, []byte("hi"), ch.put); err != nil {
					t.Fatalf("%s: send: %v", tc.method, err)
				}
				r := <-ch
				if status.Code(r.err) != tc.code || string(r.resp) != tc.resp {
					t.Errorf("%s: got %q, %v; want %q, code %v", tc.method, r.resp, r.err, tc.resp, tc.code)
				}
			}
			if err := a.Send(ctx, "nobody", "plain", nil, func([]byte, error) { t.Error("done called for a request not sent") }); status.Code(err) != codes.Unavailable {
				t.Errorf("send to an unknown node: %v, want Unavailable", err)
			}
			// A call whose context ends is answered with its end, once.
			b.Handle("block", func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			})
			short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancelShort()
			ch := make(answerCh, 2)
			if err := a.Send(short, b.Node(), "block", nil, ch.put); err != nil {
				t.Fatal(err)
			}
			if r := <-ch; status.Code(r.err) != codes.DeadlineExceeded {
				t.Errorf("a call past its deadline: %v, want DeadlineExceeded", r.err)
			}
			time.Sleep(100 * time.Millisecond)
			if len(ch) != 0 {
				t.Errorf("done called twice")
			}
			// Within's deadline, watched by the link rather than by a
			// timer of the call's, ends it the same way, queued for the
			// stream or Immediate, even when the peer never answers, and
			// the start's context ends too.
			ended := make(chan error, 2)
			b.HandleOrdered("hold", func(ctx context.Context, _ string, _ []byte, _ func([]byte, error)) error {
				go func() {
					<-ctx.Done()
					ended <- ctx.Err()
				}()
				return nil // and never answers
			})
			for _, mark := range []func(context.Context) context.Context{func(c context.Context) context.Context { return c }, Immediate} {
				// A call answered before its deadline leaves the link's
				// timer set for it: the timer then finds the next.
				ok := make(answerCh, 1)
				if err := a.Send(mark(Within(ctx, 20*time.Millisecond)), b.Node(), "plain", []byte("hi"), ok.put); err != nil {
					t.Fatal(err)
				}
				if r := <-ok; r.err != nil {
					t.Fatalf("a call Within 20ms: %v", r.err)
				}
				ch := make(answerCh, 2)
				sent := time.Now()
				if err := a.Send(mark(Within(ctx, 50*time.Millisecond)), b.Node(), "hold", nil, ch.put); err != nil {
					t.Fatal(err)
				}
				select {
				case r := <-ch:
					if status.Code(r.err) != codes.DeadlineExceeded {
						t.Errorf("a call past Within's deadline: %v, want DeadlineExceeded", r.err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("a call Within 50ms not ended after 5s")
				}
				if d := time.Since(sent); d < 50*time.Millisecond {
					t.Errorf("a call Within 50ms failed after %v", d)
				}
				select {
				case err := <-ended:
					if err == nil {
						t.Errorf("the handler's context ended without an error")
					}
				case <-time.After(5 * time.Second):
					t.Errorf("the handler's context did not end with the call")
				}
				time.Sleep(100 * time.Millisecond)
				if len(ch) != 0 {
					t.Errorf("done called twice")
				}
			}
			// The peer gone: the calls under way fail with Unavailable.
			ch = make(answerCh, 1)
			if err := a.Send(ctx, b.Node(), "block", nil, ch.put); err != nil {
				t.Fatal(err)
			}
			_ = b.Close()
			if r := <-ch; status.Code(r.err) != codes.Unavailable {
				t.Errorf("a call under way when its peer closed: %v, want Unavailable", r.err)
			}
		})
	}
}

// answer is what a Send's done got.
type answer struct {
	resp []byte
	err  error
}

// answerCh collects the answers of Sends.
type answerCh chan answer

func (ch answerCh) put(resp []byte, err error) { ch <- answer{resp, err} }

func hubOf(n Network) (*InmemHub, bool) {
	in, ok := n.(*inmemNetwork)
	if !ok {
		return nil, false
	}
	return in.hub, true
}

// Calls to an inline handler (HandleInline) run in the order Sent and
// are answered with what it returns, its errors as their status, on both
// fabrics and to the node itself; a done may Send again (Immediate), so
// a chain of calls each made from the last one's answer runs to its end.
func TestInlineHandlerRunsInOrder(t *testing.T) {
	const n = 300
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			for _, target := range []Network{b, a} {
				var mu sync.Mutex
				var ran []int
				target.HandleInline("inl", func(_ context.Context, from string, req []byte) ([]byte, error) {
					i, err := strconv.Atoi(string(req))
					if err != nil {
						return nil, status.Error(codes.InvalidArgument, err.Error())
					}
					mu.Lock()
					ran = append(ran, i)
					mu.Unlock()
					if i%7 == 3 {
						return nil, status.Errorf(codes.FailedPrecondition, "refused %d", i)
					}
					return fmt.Appendf(nil, "%d from %s", i, from), nil
				})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				answers := make([]answerCh, n)
				for i := range n {
					answers[i] = make(answerCh, 1)
					if err := a.Send(Immediate(ctx), target.Node(), "inl", []byte(strconv.Itoa(i)), answers[i].put); err != nil {
						t.Fatalf("send %d to %s: %v", i, target.Node(), err)
					}
				}
				for i, ch := range answers {
					r := <-ch
					want := fmt.Sprintf("%d from %s", i, a.Node())
					switch {
					case i%7 == 3 && status.Code(r.err) != codes.FailedPrecondition:
						t.Fatalf("call %d to %s: %v, want FailedPrecondition", i, target.Node(), r.err)
					case i%7 != 3 && (r.err != nil || string(r.resp) != want):
						t.Fatalf("call %d to %s answered %q, %v; want %q", i, target.Node(), r.resp, r.err, want)
					}
				}
				mu.Lock()
				got := slices.Clone(ran)
				ran = nil
				mu.Unlock()
				want := make([]int, n)
				for i := range want {
					want[i] = i
				}
				if !slices.Equal(got, want) {
					t.Fatalf("to %s: ran in the order %v", target.Node(), got)
				}

				// A chain: each call Sent from the previous one's done.
				finished := make(chan error, 1)
				var next func(i int)
				next = func(i int) {
					if i == n {
						finished <- nil
						return
					}
					err := a.Send(Immediate(ctx), target.Node(), "inl", []byte(strconv.Itoa(i)), func(_ []byte, err error) {
						if err != nil && i%7 != 3 {
							finished <- fmt.Errorf("call %d: %w", i, err)
							return
						}
						next(i + 1)
					})
					if err != nil {
						finished <- err
					}
				}
				next(0)
				if err := <-finished; err != nil {
					t.Fatalf("a chain of Sends from done to %s: %v", target.Node(), err)
				}
				// A Call reaches an inline handler too.
				if resp, err := a.Call(ctx, target.Node(), "inl", []byte("8")); err != nil || string(resp) != "8 from "+a.Node() {
					t.Fatalf("call to %s: %q, %v", target.Node(), resp, err)
				}
				cancel()
			}
		})
	}
}
