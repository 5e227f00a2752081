package server

// CutClusterLink closes this node's cluster transport (its listener and
// its links to the peers), so that for the other members it is down as if
// it crashed, while its client connections stay open. Tests only.
func (b *Broker) CutClusterLink() { _ = b.cluster.net.Close() }
