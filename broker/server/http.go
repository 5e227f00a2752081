package server

import "net/http"

// httpServers lists the HTTP listeners (management API and metrics).
func (b *Broker) httpServers() []httpServer {
	return nil
}

var _ = http.StatusOK
