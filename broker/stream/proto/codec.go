package proto

import "fmt"

// Encode appends c as a whole frame (size prefix included).
func Encode(b []byte, c Command) []byte {
	ver := uint16(1)
	if v, ok := c.(versioned); ok {
		ver = v.version()
	}
	b, start := beginFrame(b, c.Key(), ver)
	b = c.appendFields(b)
	return finishFrame(b, start)
}

// Header returns a frame body's key and version.
func Header(body []byte) (key, version uint16, err error) {
	r := reader{b: body}
	key, version = r.u16(), r.u16()
	return key, version, r.err
}

// maxVersion is the highest version Decode accepts per key (1 if absent).
var maxVersion = map[uint16]uint16{KeyPublish: 2, KeyDeliver: 2}

// ServerVersions are the command versions Warren's server supports, as
// returned by ExchangeVersions.
func ServerVersions() []CommandVersion {
	out := make([]CommandVersion, 0, KeyDeleteSuperStream)
	for k := KeyDeclarePublisher; k <= KeyDeleteSuperStream; k++ {
		mx := uint16(1)
		if v, ok := maxVersion[k]; ok {
			mx = v
		}
		out = append(out, CommandVersion{Key: k, Min: 1, Max: mx})
	}
	return out
}

// Decode decodes a frame body (as returned by ReadFrame) of either
// direction. Byte slices in the result alias body.
func Decode(body []byte) (Command, error) {
	r := reader{b: body}
	key, ver := r.u16(), r.u16()
	if r.err != nil {
		return nil, r.err
	}
	mx := uint16(1)
	if v, ok := maxVersion[key&^ResponseBit]; ok {
		mx = v
	}
	if ver < 1 || ver > mx {
		return nil, fmt.Errorf("%w: key %#04x version %d", ErrUnknownCommand, key, ver)
	}
	c := newCommand(key)
	if c == nil {
		return nil, fmt.Errorf("%w: key %#04x", ErrUnknownCommand, key)
	}
	c.decodeFields(&r, ver)
	if err := r.end(); err != nil {
		return nil, fmt.Errorf("key %#04x: %w", key, err)
	}
	return c, nil
}

func newCommand(key uint16) Command {
	switch key {
	case KeyDeclarePublisher:
		return &DeclarePublisher{}
	case KeyPublish:
		return &Publish{}
	case KeyPublishConfirm:
		return &PublishConfirm{}
	case KeyPublishError:
		return &PublishError{}
	case KeyQueryPublisherSequence:
		return &QueryPublisherSequence{}
	case KeyDeletePublisher:
		return &DeletePublisher{}
	case KeySubscribe:
		return &Subscribe{}
	case KeyDeliver:
		return &Deliver{}
	case KeyCredit:
		return &Credit{}
	case KeyStoreOffset:
		return &StoreOffset{}
	case KeyQueryOffset:
		return &QueryOffset{}
	case KeyUnsubscribe:
		return &Unsubscribe{}
	case KeyCreateStream:
		return &CreateStream{}
	case KeyDeleteStream:
		return &DeleteStream{}
	case KeyMetadata:
		return &Metadata{}
	case KeyMetadataUpdate:
		return &MetadataUpdate{}
	case KeyPeerProperties:
		return &PeerProperties{}
	case KeySaslHandshake:
		return &SaslHandshake{}
	case KeySaslAuthenticate:
		return &SaslAuthenticate{}
	case KeyTune:
		return &Tune{}
	case KeyOpen:
		return &Open{}
	case KeyClose:
		return &Close{}
	case KeyHeartbeat:
		return &Heartbeat{}
	case KeyRoute:
		return &Route{}
	case KeyPartitions:
		return &Partitions{}
	case KeyConsumerUpdate:
		return &ConsumerUpdate{}
	case KeyExchangeVersions:
		return &ExchangeVersions{}
	case KeyStreamStats:
		return &StreamStats{}
	case KeyCreateSuperStream:
		return &CreateSuperStream{}
	case KeyDeleteSuperStream:
		return &DeleteSuperStream{}

	case KeyDeclarePublisher | ResponseBit, KeyDeletePublisher | ResponseBit,
		KeySubscribe | ResponseBit, KeyUnsubscribe | ResponseBit,
		KeyCreateStream | ResponseBit, KeyDeleteStream | ResponseBit,
		KeySaslAuthenticate | ResponseBit, KeyClose | ResponseBit,
		KeyCreateSuperStream | ResponseBit, KeyDeleteSuperStream | ResponseBit:
		return &Response{For: key &^ ResponseBit}
	case KeyPeerProperties | ResponseBit:
		return &PeerPropertiesResponse{}
	case KeySaslHandshake | ResponseBit:
		return &SaslHandshakeResponse{}
	case KeyTune | ResponseBit:
		return &Tune{Response: true}
	case KeyOpen | ResponseBit:
		return &OpenResponse{}
	case KeyMetadata | ResponseBit:
		return &MetadataResponse{}
	case KeyQueryPublisherSequence | ResponseBit:
		return &QueryPublisherSequenceResponse{}
	case KeyCredit | ResponseBit:
		return &CreditResponse{}
	case KeyQueryOffset | ResponseBit:
		return &QueryOffsetResponse{}
	case KeyConsumerUpdate | ResponseBit:
		return &ConsumerUpdateResponse{}
	case KeyRoute | ResponseBit, KeyPartitions | ResponseBit:
		return &StreamsResponse{For: key &^ ResponseBit}
	case KeyStreamStats | ResponseBit:
		return &StreamStatsResponse{}
	case KeyExchangeVersions | ResponseBit:
		return &ExchangeVersionsResponse{}
	}
	return nil
}

// CorrelationID returns a request's correlation id when it has one, so a
// server can answer an undecodable request (ok is false otherwise).
func CorrelationID(body []byte) (id uint32, ok bool) {
	key, _, err := Header(body)
	if err != nil || len(body) < 8 || key&ResponseBit != 0 {
		return 0, false
	}
	switch key {
	case KeyPublish, KeyCredit, KeyStoreOffset, KeyHeartbeat, KeyTune,
		KeyPublishConfirm, KeyPublishError, KeyDeliver, KeyMetadataUpdate:
		return 0, false
	}
	r := reader{b: body[4:]}
	return r.u32(), true
}
