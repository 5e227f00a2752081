package transport

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// bufPool is the buffer pool gRPC reads the peers' messages into
// (experimental.BufferPool / WithBufferPool): powers of
// two from 256 bytes to 4 MiB, one sync.Pool a size, a buffer handed out
// as it was put back (not zeroed).
//
// gRPC's default pool clears a buffer's whole capacity at every Get, and
// its largest tier is 1 MiB, so a frame of a little over 1 MiB (the size
// the stream writer fills frames to, plus framing) was a fresh allocation
// the runtime cleared each time: together some 8% of a node's CPU while
// it forwarded a client's traffic. gRPC writes every byte of a buffer it
// asks for before it reads one (a message is read in full before it is
// decoded), as its own transport does with the dirty pools it uses for
// its reads, so stale bytes are never seen.
type bufPool struct {
	pools [bufPoolTiers]sync.Pool
}

const (
	bufPoolMinShift = 8  // 256 bytes
	bufPoolMaxShift = 22 // 4 MiB
	bufPoolTiers    = bufPoolMaxShift - bufPoolMinShift + 1
)

var _ mem.BufferPool = (*bufPool)(nil)

// tier is the index of the smallest size of at least n bytes; -1 when n
// is larger than every tier.
func bufTier(n int) int {
	if n <= 1<<bufPoolMinShift {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	if shift > bufPoolMaxShift {
		return -1
	}
	return shift - bufPoolMinShift
}

// Get implements mem.BufferPool.
func (p *bufPool) Get(length int) *[]byte {
	t := bufTier(length)
	if t < 0 {
		b := make([]byte, length)
		return &b
	}
	if bp, ok := p.pools[t].Get().(*[]byte); ok {
		*bp = (*bp)[:length]
		return bp
	}
	b := make([]byte, length, 1<<(t+bufPoolMinShift))
	return &b
}

// Put implements mem.BufferPool: a buffer goes back to the tier of its
// capacity (one of another capacity, not from Get, is dropped).
func (p *bufPool) Put(bp *[]byte) {
	c := cap(*bp)
	t := bufTier(c)
	if t < 0 || c != 1<<(t+bufPoolMinShift) {
		return
	}
	p.pools[t].Put(bp)
}
