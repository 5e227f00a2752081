package server

// CutClusterLink closes this node's cluster transport (its listener and
// its links to the peers), so that for the other members it is down as if
// it crashed, while its client connections stay open. Tests only.
func (b *Broker) CutClusterLink() { _ = b.cluster.net.Close() }

// ForwardLookupNow is the forwarding side's non-blocking lookup of a
// queue this node holds (forwardLocal.LocalQueueNow). Tests only.
func (b *Broker) ForwardLookupNow(vhost, name string) (found, ready bool, err error) {
	q, ready, err := forwardLocal{b}.LocalQueueNow(vhost, name)
	return q != nil, ready, err
}

// HoldVhosts holds the broker's vhosts lock for writing, as a vhost's
// start does, until release is called. Tests only.
func (b *Broker) HoldVhosts() (release func()) {
	b.mu.Lock()
	return b.mu.Unlock
}
