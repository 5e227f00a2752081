package store

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

func encodeRecord(id MsgID, data []byte) []byte {
	var hdr [msgHeader]byte
	binary.BigEndian.PutUint32(hdr[0:], uint32(len(data)))
	binary.BigEndian.PutUint64(hdr[8:], uint64(id))
	binary.BigEndian.PutUint32(hdr[4:], crc32.Update(crc32.Checksum(hdr[8:16], crcTable), crcTable, data))
	return append(hdr[:], data...)
}

// FuzzMessageStoreRecords feeds arbitrary message store files to the
// recovery scanner: it never panics, never reads past the file whatever a
// length says, and never returns a record whose CRC fails.
func FuzzMessageStoreRecords(f *testing.F) {
	var file []byte
	for i := 0; i < 5; i++ {
		file = append(file, encodeRecord(MsgID(i+1), bytes.Repeat([]byte{byte('a' + i)}, 10*i+1))...)
	}
	f.Add(file)
	flipped := bytes.Clone(file)
	flipped[len(encodeRecord(1, []byte("a")))+msgHeader+3] ^= 1 // a body byte of the second record
	f.Add(flipped)
	f.Add(file[:len(file)-5])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var last int64 = -1
		sc := scanMessageFile(bytes.NewReader(data), int64(len(data)), func(id MsgID, off int64, size uint32) {
			if off <= last || off < 0 || off+int64(size) > int64(len(data)) || size < msgHeader {
				t.Fatalf("record at %d of %d bytes: out of order or out of the file (%d bytes)", off, size, len(data))
			}
			last = off
			rec := data[off : off+int64(size)]
			if binary.BigEndian.Uint32(rec[0:])+msgHeader != size || MsgID(binary.BigEndian.Uint64(rec[8:])) != id {
				t.Fatalf("record at %d: header does not match what was returned", off)
			}
			if crc32.Update(crc32.Checksum(rec[8:16], crcTable), crcTable, rec[msgHeader:]) != binary.BigEndian.Uint32(rec[4:]) {
				t.Fatalf("record at %d returned with a failing CRC", off)
			}
		})
		if sc.good < 0 || sc.good > int64(len(data)) {
			t.Fatalf("cut point %d outside a file of %d bytes", sc.good, len(data))
		}
		for _, sp := range sc.skipped {
			if sp.off < 0 || sp.off+sp.size > sc.good {
				t.Fatalf("skipped span %+v is not between good records (good end %d)", sp, sc.good)
			}
		}
	})
}
