package proto

// CreateSuperStream creates a super stream: its partitions (streams), bound
// to the super stream's exchange with the binding keys, in order.
type CreateSuperStream struct {
	CorrelationID uint32
	Name          string
	Partitions    []string
	BindingKeys   []string
	Arguments     map[string]string
}

func (c *CreateSuperStream) Key() uint16 { return KeyCreateSuperStream }
func (c *CreateSuperStream) appendFields(b []byte) []byte {
	b = appendStr(appendU32(b, c.CorrelationID), c.Name)
	return appendStrMap(appendStrs(appendStrs(b, c.Partitions), c.BindingKeys), c.Arguments)
}
func (c *CreateSuperStream) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Name = r.u32(), r.str()
	c.Partitions, c.BindingKeys, c.Arguments = r.strs(), r.strs(), r.strMap()
}

// DeleteSuperStream deletes a super stream and its partitions.
type DeleteSuperStream struct {
	CorrelationID uint32
	Name          string
}

func (c *DeleteSuperStream) Key() uint16 { return KeyDeleteSuperStream }
func (c *DeleteSuperStream) appendFields(b []byte) []byte {
	return appendStr(appendU32(b, c.CorrelationID), c.Name)
}
func (c *DeleteSuperStream) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Name = r.u32(), r.str()
}

// Route asks which partitions of a super stream a routing key goes to.
type Route struct {
	CorrelationID uint32
	RoutingKey    string
	SuperStream   string
}

func (c *Route) Key() uint16 { return KeyRoute }
func (c *Route) appendFields(b []byte) []byte {
	return appendStr(appendStr(appendU32(b, c.CorrelationID), c.RoutingKey), c.SuperStream)
}
func (c *Route) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.RoutingKey, c.SuperStream = r.u32(), r.str(), r.str()
}

// Partitions asks for a super stream's partitions.
type Partitions struct {
	CorrelationID uint32
	SuperStream   string
}

func (c *Partitions) Key() uint16 { return KeyPartitions }
func (c *Partitions) appendFields(b []byte) []byte {
	return appendStr(appendU32(b, c.CorrelationID), c.SuperStream)
}
func (c *Partitions) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.SuperStream = r.u32(), r.str()
}

// StreamsResponse answers Route and Partitions with a list of streams.
type StreamsResponse struct {
	For           uint16 // KeyRoute or KeyPartitions
	CorrelationID uint32
	Code          uint16
	Streams       []string
}

func (c *StreamsResponse) Key() uint16 { return c.For | ResponseBit }
func (c *StreamsResponse) appendFields(b []byte) []byte {
	return appendStrs(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Streams)
}
func (c *StreamsResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Streams = r.u32(), r.u16(), r.strs()
}

// StreamStats asks for a stream's statistics.
type StreamStats struct {
	CorrelationID uint32
	Stream        string
}

func (c *StreamStats) Key() uint16 { return KeyStreamStats }
func (c *StreamStats) appendFields(b []byte) []byte {
	return appendStr(appendU32(b, c.CorrelationID), c.Stream)
}
func (c *StreamStats) decodeFields(r *reader, _ uint16) { c.CorrelationID, c.Stream = r.u32(), r.str() }

// StreamStatsResponse carries first_chunk_id, last_chunk_id,
// committed_chunk_id (-1 when the stream is empty).
type StreamStatsResponse struct {
	CorrelationID uint32
	Code          uint16
	Stats         map[string]int64
}

func (c *StreamStatsResponse) Key() uint16 { return KeyStreamStats | ResponseBit }
func (c *StreamStatsResponse) appendFields(b []byte) []byte {
	b = appendU32(appendU16(appendU32(b, c.CorrelationID), c.Code), uint32(len(c.Stats)))
	for _, k := range sortedKeys(c.Stats) {
		b = appendU64(appendStr(b, k), uint64(c.Stats[k]))
	}
	return b
}
func (c *StreamStatsResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code = r.u32(), r.u16()
	n := r.count(10)
	if n > 0 {
		c.Stats = make(map[string]int64, n)
	}
	for range n {
		k := r.str()
		c.Stats[k] = int64(r.u64())
	}
}

// ExchangeVersions tells the peer which command versions one supports
// (request and response share this shape; the response has a code).
type ExchangeVersions struct {
	CorrelationID uint32
	Commands      []CommandVersion
}

func (c *ExchangeVersions) Key() uint16 { return KeyExchangeVersions }
func (c *ExchangeVersions) appendFields(b []byte) []byte {
	return appendVersions(appendU32(b, c.CorrelationID), c.Commands)
}
func (c *ExchangeVersions) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Commands = r.u32(), r.versions()
}

// ExchangeVersionsResponse is the server's command versions.
type ExchangeVersionsResponse struct {
	CorrelationID uint32
	Code          uint16
	Commands      []CommandVersion
}

func (c *ExchangeVersionsResponse) Key() uint16 { return KeyExchangeVersions | ResponseBit }
func (c *ExchangeVersionsResponse) appendFields(b []byte) []byte {
	return appendVersions(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Commands)
}
func (c *ExchangeVersionsResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Commands = r.u32(), r.u16(), r.versions()
}

func appendVersions(b []byte, vs []CommandVersion) []byte {
	b = appendU32(b, uint32(len(vs)))
	for _, v := range vs {
		b = appendU16(appendU16(appendU16(b, v.Key), v.Min), v.Max)
	}
	return b
}

func (r *reader) versions() []CommandVersion {
	n := r.count(6)
	var out []CommandVersion
	for range n {
		out = append(out, CommandVersion{Key: r.u16(), Min: r.u16(), Max: r.u16()})
	}
	return out
}
