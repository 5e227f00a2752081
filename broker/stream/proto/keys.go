package proto

import "sort"

// Command keys. A response carries its request's key | ResponseBit.
const (
	KeyDeclarePublisher       uint16 = 1
	KeyPublish                uint16 = 2
	KeyPublishConfirm         uint16 = 3
	KeyPublishError           uint16 = 4
	KeyQueryPublisherSequence uint16 = 5
	KeyDeletePublisher        uint16 = 6
	KeySubscribe              uint16 = 7
	KeyDeliver                uint16 = 8
	KeyCredit                 uint16 = 9
	KeyStoreOffset            uint16 = 10
	KeyQueryOffset            uint16 = 11
	KeyUnsubscribe            uint16 = 12
	KeyCreateStream           uint16 = 13
	KeyDeleteStream           uint16 = 14
	KeyMetadata               uint16 = 15
	KeyMetadataUpdate         uint16 = 16
	KeyPeerProperties         uint16 = 17
	KeySaslHandshake          uint16 = 18
	KeySaslAuthenticate       uint16 = 19
	KeyTune                   uint16 = 20
	KeyOpen                   uint16 = 21
	KeyClose                  uint16 = 22
	KeyHeartbeat              uint16 = 23
	KeyRoute                  uint16 = 24
	KeyPartitions             uint16 = 25
	KeyConsumerUpdate         uint16 = 26
	KeyExchangeVersions       uint16 = 27
	KeyStreamStats            uint16 = 28
	KeyCreateSuperStream      uint16 = 29
	KeyDeleteSuperStream      uint16 = 30

	ResponseBit uint16 = 0x8000
)

// Response codes.
const (
	CodeOK                          uint16 = 1
	CodeStreamDoesNotExist          uint16 = 2
	CodeSubscriptionIDAlreadyExists uint16 = 3
	CodeSubscriptionIDDoesNotExist  uint16 = 4
	CodeStreamAlreadyExists         uint16 = 5
	CodeStreamNotAvailable          uint16 = 6
	CodeSaslMechanismNotSupported   uint16 = 7
	CodeAuthenticationFailure       uint16 = 8
	CodeSaslError                   uint16 = 9
	CodeSaslChallenge               uint16 = 10
	CodeSaslAuthFailureLoopback     uint16 = 11
	CodeVirtualHostAccessFailure    uint16 = 12
	CodeUnknownFrame                uint16 = 13
	CodeFrameTooLarge               uint16 = 14
	CodeInternalError               uint16 = 15
	CodeAccessRefused               uint16 = 16
	CodePreconditionFailed          uint16 = 17
	CodePublisherDoesNotExist       uint16 = 18
	CodeNoOffset                    uint16 = 19
)

// Offset specification types of Subscribe and ConsumerUpdate.
const (
	// OffsetNone is "no offset": a consumer update response of a consumer
	// that is not taking over.
	OffsetNone      uint16 = 0
	OffsetFirst     uint16 = 1
	OffsetLast      uint16 = 2
	OffsetNext      uint16 = 3
	OffsetOffset    uint16 = 4
	OffsetTimestamp uint16 = 5
)

// OffsetSpec is a subscription's starting point. Value is the offset for
// OffsetOffset and milliseconds since the epoch for OffsetTimestamp.
type OffsetSpec struct {
	Type  uint16
	Value int64
}

func (o OffsetSpec) hasValue() bool { return o.Type == OffsetOffset || o.Type == OffsetTimestamp }

func (r *reader) offsetSpec() OffsetSpec {
	o := OffsetSpec{Type: r.u16()}
	if o.hasValue() {
		o.Value = int64(r.u64())
	} else if r.err == nil && o.Type > OffsetTimestamp {
		r.fail("offset specification (unknown type)")
	}
	return o
}

func appendOffsetSpec(b []byte, o OffsetSpec) []byte {
	b = appendU16(b, o.Type)
	if o.hasValue() {
		b = appendU64(b, uint64(o.Value))
	}
	return b
}

// CodeText names a response code (for logs and close reasons).
func CodeText(code uint16) string {
	switch code {
	case CodeOK:
		return "ok"
	case CodeStreamDoesNotExist:
		return "stream does not exist"
	case CodeSubscriptionIDAlreadyExists:
		return "subscription id already exists"
	case CodeSubscriptionIDDoesNotExist:
		return "subscription id does not exist"
	case CodeStreamAlreadyExists:
		return "stream already exists"
	case CodeStreamNotAvailable:
		return "stream not available"
	case CodeSaslMechanismNotSupported:
		return "sasl mechanism not supported"
	case CodeAuthenticationFailure:
		return "authentication failure"
	case CodeSaslError:
		return "sasl error"
	case CodeSaslChallenge:
		return "sasl challenge"
	case CodeSaslAuthFailureLoopback:
		return "sasl authentication failure loopback"
	case CodeVirtualHostAccessFailure:
		return "virtual host access failure"
	case CodeUnknownFrame:
		return "unknown frame"
	case CodeFrameTooLarge:
		return "frame too large"
	case CodeInternalError:
		return "internal error"
	case CodeAccessRefused:
		return "access refused"
	case CodePreconditionFailed:
		return "precondition failed"
	case CodePublisherDoesNotExist:
		return "publisher does not exist"
	case CodeNoOffset:
		return "no offset"
	}
	return "unknown response code"
}

// CommandVersion is one entry of ExchangeVersions: a key and the versions
// the peer supports.
type CommandVersion struct {
	Key, Min, Max uint16
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
