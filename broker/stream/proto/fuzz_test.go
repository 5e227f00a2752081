package proto

import (
	"reflect"
	"testing"
)

// FuzzDecode: any body decodes or fails without panicking, and what decodes
// re-encodes to something that decodes to the same command.
func FuzzDecode(f *testing.F) {
	for _, c := range samples() {
		f.Add(Encode(nil, c)[4:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Decode(body)
		var p Publish
		perr := DecodePublish(body, &p)
		if err != nil {
			if key, _, _ := Header(body); key == KeyPublish && perr == nil {
				t.Fatalf("DecodePublish accepts what Decode refuses: %v", err)
			}
			return
		}
		again, err := Decode(Encode(nil, c)[4:])
		if err != nil {
			t.Fatalf("%T: re-encoded frame does not decode: %v", c, err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("%T: round trip changed\n%#v\n%#v", c, c, again)
		}
	})
}
