package proto

// Command is one decoded frame. Key includes ResponseBit for responses.
type Command interface {
	Key() uint16
	appendFields(b []byte) []byte
	decodeFields(r *reader, version uint16)
}

// versioned commands exist in more than one version.
type versioned interface{ version() uint16 }

// Response is every response whose only fields are a correlation id and a
// code: declare/delete publisher, subscribe, unsubscribe, create/delete
// stream and super stream, SASL authenticate (without challenge), close.
type Response struct {
	For           uint16 // the request's key, without ResponseBit
	CorrelationID uint32
	Code          uint16
}

func (c *Response) Key() uint16 { return c.For | ResponseBit }
func (c *Response) appendFields(b []byte) []byte {
	return appendU16(appendU32(b, c.CorrelationID), c.Code)
}
func (c *Response) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code = r.u32(), r.u16()
}

// PeerProperties exchanges client and server properties (both directions;
// the response has a code).
type PeerProperties struct {
	CorrelationID uint32
	Properties    map[string]string
}

func (c *PeerProperties) Key() uint16 { return KeyPeerProperties }
func (c *PeerProperties) appendFields(b []byte) []byte {
	return appendStrMap(appendU32(b, c.CorrelationID), c.Properties)
}
func (c *PeerProperties) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Properties = r.u32(), r.strMap()
}

// PeerPropertiesResponse is the server's properties.
type PeerPropertiesResponse struct {
	CorrelationID uint32
	Code          uint16
	Properties    map[string]string
}

func (c *PeerPropertiesResponse) Key() uint16 { return KeyPeerProperties | ResponseBit }
func (c *PeerPropertiesResponse) appendFields(b []byte) []byte {
	return appendStrMap(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Properties)
}
func (c *PeerPropertiesResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Properties = r.u32(), r.u16(), r.strMap()
}

// SaslHandshake asks for the server's mechanisms.
type SaslHandshake struct{ CorrelationID uint32 }

func (c *SaslHandshake) Key() uint16                      { return KeySaslHandshake }
func (c *SaslHandshake) appendFields(b []byte) []byte     { return appendU32(b, c.CorrelationID) }
func (c *SaslHandshake) decodeFields(r *reader, _ uint16) { c.CorrelationID = r.u32() }

// SaslHandshakeResponse lists the mechanisms.
type SaslHandshakeResponse struct {
	CorrelationID uint32
	Code          uint16
	Mechanisms    []string
}

func (c *SaslHandshakeResponse) Key() uint16 { return KeySaslHandshake | ResponseBit }
func (c *SaslHandshakeResponse) appendFields(b []byte) []byte {
	return appendStrs(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Mechanisms)
}
func (c *SaslHandshakeResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Mechanisms = r.u32(), r.u16(), r.strs()
}

// SaslAuthenticate carries a mechanism and its response bytes.
type SaslAuthenticate struct {
	CorrelationID uint32
	Mechanism     string
	Data          []byte
}

func (c *SaslAuthenticate) Key() uint16 { return KeySaslAuthenticate }
func (c *SaslAuthenticate) appendFields(b []byte) []byte {
	return appendBlob(appendStr(appendU32(b, c.CorrelationID), c.Mechanism), c.Data)
}
func (c *SaslAuthenticate) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Mechanism, c.Data = r.u32(), r.str(), r.blob()
}

// Tune proposes (server) or accepts (client) the frame size and heartbeat
// in seconds. A client's tune usually carries the response bit, but some
// clients send it without (Response false), as RabbitMQ allows.
type Tune struct {
	Response  bool
	FrameMax  uint32
	Heartbeat uint32
}

func (c *Tune) Key() uint16 {
	if c.Response {
		return KeyTune | ResponseBit
	}
	return KeyTune
}
func (c *Tune) appendFields(b []byte) []byte {
	return appendU32(appendU32(b, c.FrameMax), c.Heartbeat)
}
func (c *Tune) decodeFields(r *reader, _ uint16) { c.FrameMax, c.Heartbeat = r.u32(), r.u32() }

// Open selects the virtual host.
type Open struct {
	CorrelationID uint32
	Vhost         string
}

func (c *Open) Key() uint16 { return KeyOpen }
func (c *Open) appendFields(b []byte) []byte {
	return appendStr(appendU32(b, c.CorrelationID), c.Vhost)
}
func (c *Open) decodeFields(r *reader, _ uint16) { c.CorrelationID, c.Vhost = r.u32(), r.str() }

// OpenResponse carries connection properties (advertised_host/_port).
type OpenResponse struct {
	CorrelationID uint32
	Code          uint16
	Properties    map[string]string
}

func (c *OpenResponse) Key() uint16 { return KeyOpen | ResponseBit }
func (c *OpenResponse) appendFields(b []byte) []byte {
	// The map is sent whatever the code: the Go client always reads it.
	return appendStrMap(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Properties)
}
func (c *OpenResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code = r.u32(), r.u16()
	if len(r.b) > 0 {
		c.Properties = r.strMap()
	}
}

// Close asks the peer to close (both directions); the answer is a Response.
type Close struct {
	CorrelationID uint32
	Code          uint16
	Reason        string
}

func (c *Close) Key() uint16 { return KeyClose }
func (c *Close) appendFields(b []byte) []byte {
	return appendStr(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Reason)
}
func (c *Close) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Reason = r.u32(), r.u16(), r.str()
}

// Heartbeat has no fields.
type Heartbeat struct{}

func (c *Heartbeat) Key() uint16                      { return KeyHeartbeat }
func (c *Heartbeat) appendFields(b []byte) []byte     { return b }
func (c *Heartbeat) decodeFields(r *reader, _ uint16) {}

// CreateStream creates a stream with arguments such as max-length-bytes,
// max-age and stream-max-segment-size-bytes.
type CreateStream struct {
	CorrelationID uint32
	Stream        string
	Arguments     map[string]string
}

func (c *CreateStream) Key() uint16 { return KeyCreateStream }
func (c *CreateStream) appendFields(b []byte) []byte {
	return appendStrMap(appendStr(appendU32(b, c.CorrelationID), c.Stream), c.Arguments)
}
func (c *CreateStream) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Stream, c.Arguments = r.u32(), r.str(), r.strMap()
}

// DeleteStream deletes a stream.
type DeleteStream struct {
	CorrelationID uint32
	Stream        string
}

func (c *DeleteStream) Key() uint16 { return KeyDeleteStream }
func (c *DeleteStream) appendFields(b []byte) []byte {
	return appendStr(appendU32(b, c.CorrelationID), c.Stream)
}
func (c *DeleteStream) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Stream = r.u32(), r.str()
}

// Metadata asks where streams live.
type Metadata struct {
	CorrelationID uint32
	Streams       []string
}

func (c *Metadata) Key() uint16 { return KeyMetadata }
func (c *Metadata) appendFields(b []byte) []byte {
	return appendStrs(appendU32(b, c.CorrelationID), c.Streams)
}
func (c *Metadata) decodeFields(r *reader, _ uint16) { c.CorrelationID, c.Streams = r.u32(), r.strs() }

// Broker is a node in a metadata response.
type Broker struct {
	Reference uint16
	Host      string
	Port      uint32
}

// StreamMetadata is one stream in a metadata response.
type StreamMetadata struct {
	Stream   string
	Code     uint16
	Leader   uint16
	Replicas []uint16
}

// MetadataResponse lists brokers and, per stream, its leader and replicas.
type MetadataResponse struct {
	CorrelationID uint32
	Brokers       []Broker
	Streams       []StreamMetadata
}

func (c *MetadataResponse) Key() uint16 { return KeyMetadata | ResponseBit }
func (c *MetadataResponse) appendFields(b []byte) []byte {
	b = appendU32(appendU32(b, c.CorrelationID), uint32(len(c.Brokers)))
	for _, br := range c.Brokers {
		b = appendU32(appendStr(appendU16(b, br.Reference), br.Host), br.Port)
	}
	b = appendU32(b, uint32(len(c.Streams)))
	for _, s := range c.Streams {
		b = appendU16(appendU16(appendStr(b, s.Stream), s.Code), s.Leader)
		b = appendU32(b, uint32(len(s.Replicas)))
		for _, rp := range s.Replicas {
			b = appendU16(b, rp)
		}
	}
	return b
}
func (c *MetadataResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID = r.u32()
	n := r.count(8)
	for range n {
		c.Brokers = append(c.Brokers, Broker{Reference: r.u16(), Host: r.str(), Port: r.u32()})
	}
	n = r.count(10)
	for range n {
		s := StreamMetadata{Stream: r.str(), Code: r.u16(), Leader: r.u16()}
		m := r.count(2)
		for range m {
			s.Replicas = append(s.Replicas, r.u16())
		}
		c.Streams = append(c.Streams, s)
	}
}

// MetadataUpdate tells the client a stream is gone or moved.
type MetadataUpdate struct {
	Code   uint16
	Stream string
}

func (c *MetadataUpdate) Key() uint16 { return KeyMetadataUpdate }
func (c *MetadataUpdate) appendFields(b []byte) []byte {
	return appendStr(appendU16(b, c.Code), c.Stream)
}
func (c *MetadataUpdate) decodeFields(r *reader, _ uint16) { c.Code, c.Stream = r.u16(), r.str() }

// DeclarePublisher registers a publisher id (and an optional reference for
// de-duplication) on a stream.
type DeclarePublisher struct {
	CorrelationID uint32
	PublisherID   uint8
	Reference     string
	Stream        string
}

func (c *DeclarePublisher) Key() uint16 { return KeyDeclarePublisher }
func (c *DeclarePublisher) appendFields(b []byte) []byte {
	b = append(appendU32(b, c.CorrelationID), c.PublisherID)
	return appendStr(appendStr(b, c.Reference), c.Stream)
}
func (c *DeclarePublisher) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.PublisherID, c.Reference, c.Stream = r.u32(), r.u8(), r.str(), r.str()
}

// DeletePublisher forgets a publisher id.
type DeletePublisher struct {
	CorrelationID uint32
	PublisherID   uint8
}

func (c *DeletePublisher) Key() uint16 { return KeyDeletePublisher }
func (c *DeletePublisher) appendFields(b []byte) []byte {
	return append(appendU32(b, c.CorrelationID), c.PublisherID)
}
func (c *DeletePublisher) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.PublisherID = r.u32(), r.u8()
}

// QueryPublisherSequence asks for the last publishing id stored for a
// publisher reference on a stream.
type QueryPublisherSequence struct {
	CorrelationID uint32
	Reference     string
	Stream        string
}

func (c *QueryPublisherSequence) Key() uint16 { return KeyQueryPublisherSequence }
func (c *QueryPublisherSequence) appendFields(b []byte) []byte {
	return appendStr(appendStr(appendU32(b, c.CorrelationID), c.Reference), c.Stream)
}
func (c *QueryPublisherSequence) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Reference, c.Stream = r.u32(), r.str(), r.str()
}

// QueryPublisherSequenceResponse carries the sequence (0 when none).
type QueryPublisherSequenceResponse struct {
	CorrelationID uint32
	Code          uint16
	Sequence      uint64
}

func (c *QueryPublisherSequenceResponse) Key() uint16 { return KeyQueryPublisherSequence | ResponseBit }
func (c *QueryPublisherSequenceResponse) appendFields(b []byte) []byte {
	return appendU64(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Sequence)
}
func (c *QueryPublisherSequenceResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Sequence = r.u32(), r.u16(), r.u64()
}
