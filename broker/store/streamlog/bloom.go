package streamlog

import "hash/fnv"

// Bloom filters of filter values (stream protocol publish v2). A chunk
// whose messages carry filter values has a bloom filter of FilterSize
// bytes between its header and its data; a reader with a Filter skips the
// chunks that cannot hold a message it wants. Warren's filter is its own
// (osiris's is never sent to clients): two bit positions per value from a
// 64-bit FNV-1a hash (Kirsch-Mitzenmacher); a chunk that also holds
// messages without a filter value has the empty value set, which is what
// MatchUnfiltered looks for.

// Filter sizes in bytes (the stream-filter-size-bytes argument's range).
const (
	DefaultFilterSize = 16
	MinFilterSize     = 16
	MaxFilterSize     = 255
)

// Filter selects chunks by filter value.
type Filter struct {
	// Values are the filter values wanted.
	Values []string
	// MatchUnfiltered also selects chunks holding messages without a filter
	// value.
	MatchUnfiltered bool
}

func filterHash(v string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(v))
	return h.Sum64()
}

// bloomSet sets the bits of hash in bloom.
func bloomSet(bloom []byte, hash uint64) {
	m := uint64(len(bloom)) * 8
	h1, h2 := hash&0xFFFFFFFF, hash>>32|1
	for i := uint64(0); i < 2; i++ {
		bit := (h1 + i*h2) % m
		bloom[bit/8] |= 1 << (bit % 8)
	}
}

// bloomHas reports whether hash may be in bloom.
func bloomHas(bloom []byte, hash uint64) bool {
	m := uint64(len(bloom)) * 8
	if m == 0 {
		return false
	}
	h1, h2 := hash&0xFFFFFFFF, hash>>32|1
	for i := uint64(0); i < 2; i++ {
		bit := (h1 + i*h2) % m
		if bloom[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// matcher is a Filter with its hashes computed once.
type matcher struct {
	hashes     []uint64
	unfiltered bool
}

var emptyHash = filterHash("")

func newMatcher(f *Filter) *matcher {
	if f == nil {
		return nil
	}
	m := &matcher{unfiltered: f.MatchUnfiltered}
	for _, v := range f.Values {
		m.hashes = append(m.hashes, filterHash(v))
	}
	return m
}

// match reports whether a chunk with this bloom filter may hold wanted
// messages. A chunk without a filter holds only unfiltered messages.
func (m *matcher) match(bloom []byte) bool {
	if len(bloom) == 0 {
		return m.unfiltered
	}
	if m.unfiltered && bloomHas(bloom, emptyHash) {
		return true
	}
	for _, h := range m.hashes {
		if bloomHas(bloom, h) {
			return true
		}
	}
	return false
}
