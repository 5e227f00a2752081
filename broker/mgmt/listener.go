package mgmt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/warrenmq/warren/broker/netaccept"
)

// ListenerLimits bound what an HTTP listener gives its clients, so that
// slow, idle or many clients cannot hold the node's file descriptors (which
// the AMQP and stream listeners share): the time to send a request's headers
// and the whole request (its body included), to take the response, and to
// send the next request on a kept-alive connection; and how many
// connections are open at once.
type ListenerLimits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration // 0: none (pprof's profiles take as long as asked)
	IdleTimeout       time.Duration
	MaxConnections    int
}

// tooManyConnections is the answer to a connection over the limit.
const tooManyConnections = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\nConnection: close\r\nContent-Length: 71\r\n\r\n" +
	`{"error":"service_unavailable","reason":"too many connections, retry"}` + "\n"

// Serve serves h on ln within lim until ctx is done, then shuts down
// gracefully (5 s at most).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, lim ListenerLimits) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	ln = netaccept.Limit(ln, lim.MaxConnections, func(c net.Conn) {
		// A fresh socket's send buffer is empty: this does not wait.
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write([]byte(tooManyConnections))
	})
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	// Shutdown closes the listener itself: not a failure.
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !(ctx.Err() != nil && errors.Is(err, net.ErrClosed)) {
		return fmt.Errorf("mgmt: serve %s: %w", ln.Addr(), err)
	}
	return nil
}
