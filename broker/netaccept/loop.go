package netaccept

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// retryDelay is the pause after a temporary accept error (e.g. out of file
// descriptors), so the loop does not spin.
const retryDelay = 10 * time.Millisecond

// Serve accepts connections on ln and calls handle for each, on the
// calling goroutine (handle must not block), until ctx is done or ln is
// closed; both end it with a nil error. Any other accept error ends it,
// wrapped with name.
func Serve(ctx context.Context, ln net.Listener, name string, handle func(net.Conn)) error {
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(retryDelay)
				continue
			}
			return fmt.Errorf("%s: accept: %w", name, err)
		}
		handle(nc)
	}
}
