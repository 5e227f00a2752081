package wire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// fill sets every field of the method struct m to a non-zero value derived
// from seed, so a round trip catches swapped or dropped fields.
func fill(t *testing.T, m Method, seed int) {
	t.Helper()
	if err := fillMethod(m, seed); err != nil {
		t.Fatal(err)
	}
}

func fillMethod(m Method, seed int) error {
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		n := seed + i + 1
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(n) | 0x80) // high bit of the low octet set
		case reflect.String:
			f.SetString(fmt.Sprintf("%s-%d", v.Type().Field(i).Name, n))
		case reflect.Map:
			f.Set(reflect.ValueOf(Table{"k": int64(n), "nested": Table{"s": "v"}}))
		default:
			return fmt.Errorf("%T.%s: unexpected kind %s", m, v.Type().Field(i).Name, f.Kind())
		}
	}
	return nil
}

func TestMethodRoundTrip(t *testing.T) {
	for _, m := range allMethods() {
		t.Run(m.Name(), func(t *testing.T) {
			fill(t, m, int(m.MethodID()))
			payload := m.Append(nil)
			got, err := DecodeMethod(payload)
			if err != nil {
				t.Fatalf("DecodeMethod: %v", err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, m)
			}
			if got.ClassID() != m.ClassID() || got.MethodID() != m.MethodID() || got.Name() != m.Name() {
				t.Fatalf("identity changed: %s", got.Name())
			}
			// Every proper prefix is truncated input, never a panic.
			for i := 0; i < len(payload); i++ {
				if _, err := DecodeMethod(payload[:i]); err == nil && hasArguments(m) {
					// Methods whose trailing fields are empty may decode from
					// a prefix only if all their bytes are present.
					t.Fatalf("prefix of %d/%d bytes decoded without error", i, len(payload))
				}
			}
		})
	}
}

func hasArguments(m Method) bool {
	return reflect.ValueOf(m).Elem().NumField() > 0
}

func TestMethodZeroRoundTrip(t *testing.T) {
	for _, m := range allMethods() {
		got, err := DecodeMethod(m.Append(nil))
		if err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: got %#v want %#v", m.Name(), got, m)
		}
	}
}

func TestMethodIdentity(t *testing.T) {
	tests := []struct {
		m       Method
		name    string
		class   uint16
		method  uint16
		content bool
	}{
		{&ConnectionStart{}, "connection.start", ClassConnection, 10, false},
		{&ConnectionTuneOk{}, "connection.tune-ok", ClassConnection, 31, false},
		{&ConnectionBlocked{}, "connection.blocked", ClassConnection, 60, false},
		{&ChannelOpen{}, "channel.open", ClassChannel, 10, false},
		{&ExchangeBind{}, "exchange.bind", ClassExchange, 30, false},
		{&ExchangeUnbindOk{}, "exchange.unbind-ok", ClassExchange, 51, false},
		{&QueueUnbind{}, "queue.unbind", ClassQueue, 50, false},
		{&BasicPublish{}, "basic.publish", ClassBasic, 40, true},
		{&BasicReturn{}, "basic.return", ClassBasic, 50, true},
		{&BasicDeliver{}, "basic.deliver", ClassBasic, 60, true},
		{&BasicGetOk{}, "basic.get-ok", ClassBasic, 71, true},
		{&BasicGetEmpty{}, "basic.get-empty", ClassBasic, 72, false},
		{&BasicNack{}, "basic.nack", ClassBasic, 120, false},
		{&ConfirmSelect{}, "confirm.select", ClassConfirm, 10, false},
		{&TxRollbackOk{}, "tx.rollback-ok", ClassTx, 31, false},
	}
	for _, tt := range tests {
		if got := tt.m.Name(); got != tt.name {
			t.Errorf("Name() = %q, want %q", got, tt.name)
		}
		if tt.m.ClassID() != tt.class || tt.m.MethodID() != tt.method || tt.m.HasContent() != tt.content {
			t.Errorf("%s: got class %d method %d content %v", tt.name, tt.m.ClassID(), tt.m.MethodID(), tt.m.HasContent())
		}
	}
	content := 0
	for _, m := range allMethods() {
		if got := MethodName(m.ClassID(), m.MethodID()); got != m.Name() {
			t.Errorf("MethodName(%d, %d) = %q, want %q", m.ClassID(), m.MethodID(), got, m.Name())
		}
		if m.HasContent() {
			content++
		}
	}
	if got := MethodName(ClassBasic, 999); got != "" {
		t.Errorf("MethodName of an unknown method = %q", got)
	}
	if content != 4 {
		t.Errorf("%d content-bearing methods, want 4", content)
	}
}

// TestMethodGolden checks encodings written out by hand from the spec's
// rules: big-endian integers, length-prefixed strings, and consecutive bit
// fields packed into one octet, least significant bit first.
func TestMethodGolden(t *testing.T) {
	tests := []struct {
		name string
		m    Method
		want []byte
	}{
		{"queue.declare all bits", &QueueDeclare{Queue: "q", Passive: true, Durable: true, Exclusive: true, AutoDelete: true, NoWait: true},
			[]byte{0, 50, 0, 10, 0, 0, 1, 'q', 0x1f, 0, 0, 0, 0}},
		{"queue.declare durable only", &QueueDeclare{Queue: "q", Durable: true},
			[]byte{0, 50, 0, 10, 0, 0, 1, 'q', 0x02, 0, 0, 0, 0}},
		{"queue.declare auto-delete+no-wait", &QueueDeclare{AutoDelete: true, NoWait: true},
			[]byte{0, 50, 0, 10, 0, 0, 0, 0x18, 0, 0, 0, 0}},
		{"basic.publish mandatory", &BasicPublish{Exchange: "x", RoutingKey: "rk", Mandatory: true},
			[]byte{0, 60, 0, 40, 0, 0, 1, 'x', 2, 'r', 'k', 0x01}},
		{"basic.publish immediate", &BasicPublish{Immediate: true},
			[]byte{0, 60, 0, 40, 0, 0, 0, 0, 0x02}},
		{"basic.nack multiple requeue", &BasicNack{DeliveryTag: 0x0102030405060708, Multiple: true, Requeue: true},
			[]byte{0, 60, 0, 120, 1, 2, 3, 4, 5, 6, 7, 8, 0x03}},
		{"basic.nack requeue", &BasicNack{DeliveryTag: 1, Requeue: true},
			[]byte{0, 60, 0, 120, 0, 0, 0, 0, 0, 0, 0, 1, 0x02}},
		{"exchange.declare", &ExchangeDeclare{Exchange: "e", Type: "topic", Durable: true, Internal: true},
			append([]byte{0, 40, 0, 10, 0, 0, 1, 'e', 5}, append([]byte("topic"), 0x0a, 0, 0, 0, 0)...)},
		{"basic.qos", &BasicQos{PrefetchSize: 0, PrefetchCount: 300, Global: true},
			[]byte{0, 60, 0, 10, 0, 0, 0, 0, 0x01, 0x2c, 0x01}},
		{"connection.close", &ConnectionClose{ReplyCode: NotFound, ReplyText: "no", ClassId: 50, MethodId: 10},
			[]byte{0, 10, 0, 50, 0x01, 0x94, 2, 'n', 'o', 0, 50, 0, 10}},
		{"channel.open-ok longstr", &ChannelOpenOk{Reserved1: "ab"},
			[]byte{0, 20, 0, 11, 0, 0, 0, 2, 'a', 'b'}},
		{"confirm.select nowait", &ConfirmSelect{Nowait: true}, []byte{0, 85, 0, 10, 1}},
		{"tx.select", &TxSelect{}, []byte{0, 90, 0, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.m.Append(nil)
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("Append:\n got % x\nwant % x", got, tt.want)
			}
			m, err := DecodeMethod(tt.want)
			if err != nil {
				t.Fatalf("DecodeMethod: %v", err)
			}
			if !reflect.DeepEqual(m, tt.m) {
				t.Fatalf("DecodeMethod = %#v, want %#v", m, tt.m)
			}
		})
	}
}

func TestDecodeMethodErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    error
	}{
		{"empty", nil, ErrMalformed},
		{"short header", []byte{0, 60, 0}, ErrMalformed},
		{"unknown class", []byte{0, 99, 0, 10}, ErrUnknownMethod},
		{"unknown method", []byte{0, 60, 0, 41}, ErrUnknownMethod},
		{"truncated shortstr", []byte{0, 60, 0, 40, 0, 0, 5, 'a'}, ErrMalformed},
		{"truncated table", []byte{0, 50, 0, 10, 0, 0, 0, 0, 0, 0, 0, 9}, ErrMalformed},
		{"huge longstr", []byte{0, 10, 0, 21, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"missing bits", []byte{0, 60, 0, 40, 0, 0, 0, 0}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeMethod(tt.payload)
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeMethod = %v, %v; want error wrapping %v", m, err, tt.want)
			}
		})
	}
}

func TestDecodeMethodCopiesStrings(t *testing.T) {
	payload := (&BasicPublish{Exchange: "amq.topic", RoutingKey: "a.b.c"}).Append(nil)
	m, err := DecodeMethod(payload)
	if err != nil {
		t.Fatal(err)
	}
	for i := range payload {
		payload[i] = 'X'
	}
	p := m.(*BasicPublish)
	if p.Exchange != "amq.topic" || p.RoutingKey != "a.b.c" {
		t.Fatalf("decoded strings alias the payload: %q %q", p.Exchange, p.RoutingKey)
	}
}

func TestShortstrTruncated(t *testing.T) {
	long := strings.Repeat("k", 300)
	m, err := DecodeMethod((&BasicPublish{RoutingKey: long}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*BasicPublish).RoutingKey; got != long[:255] {
		t.Fatalf("routing key of %d bytes, want 255", len(got))
	}
}
