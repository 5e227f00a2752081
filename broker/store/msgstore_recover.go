package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// Recovery of the message store's files. A file is a run of records
// len(4) crc32c(4) msgid(8) data; the CRC covers msgid and data. A record
// whose CRC fails but whose length leads to a good record (or to the exact
// end of the file with good records after it... see scanMessageFile) is
// skipped and the records after it are kept: one flipped byte costs one
// message. Where the framing itself is broken (a length that runs past the
// end, a run of bad records), the file is cut after its last good record,
// as a torn tail. Every repair is logged at warn with the file and what
// was dropped.

// maxBadRun bounds the bad records skipped in a row while looking for a
// good one behind them; past it the framing is taken as lost.
const maxBadRun = 16

// msgSpan is a stretch of a message file.
type msgSpan struct {
	off, size int64
}

// msgScan is what scanMessageFile found.
type msgScan struct {
	// good is the end of the last good record: the file is cut there.
	good int64
	// skipped are bad records between good ones (left in the file).
	skipped []msgSpan
	records int
}

// scanMessageFile walks the records of a file of size bytes, calling fn for
// each whose CRC holds. It reads at most one record's bytes at a time and
// never more than the file holds, whatever a length field says.
func scanMessageFile(r io.ReaderAt, size int64, fn func(id MsgID, off int64, recSize uint32)) msgScan {
	var sc msgScan
	var pending []msgSpan // bad records not yet followed by a good one
	var hdr [msgHeader]byte
	var data []byte
	off := int64(0)
	for off+msgHeader <= size {
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			break
		}
		n := int64(binary.BigEndian.Uint32(hdr[0:]))
		if n > maxMessageSize || off+msgHeader+n > size {
			break // torn, or a length that cannot be
		}
		if int64(cap(data)) < n {
			data = make([]byte, n)
		}
		data = data[:n]
		if _, err := r.ReadAt(data, off+msgHeader); err != nil {
			break
		}
		rec := msgSpan{off: off, size: msgHeader + n}
		off += msgHeader + n
		if crc32.Update(crc32.Checksum(hdr[8:16], crcTable), crcTable, data) != binary.BigEndian.Uint32(hdr[4:]) {
			pending = append(pending, rec)
			if len(pending) > maxBadRun {
				break
			}
			continue
		}
		sc.skipped = append(sc.skipped, pending...)
		pending = pending[:0]
		fn(MsgID(binary.BigEndian.Uint64(hdr[8:])), rec.off, uint32(rec.size))
		sc.records++
		sc.good = off
	}
	return sc
}

// recoverFile indexes every good record of file n, skips bad ones that lie
// between good ones, and cuts a torn or corrupt tail.
func (s *MessageStore) recoverFile(n uint32) error {
	path := s.path(n)
	f, err := os.OpenFile(path, os.O_RDWR, 0o640)
	if err != nil {
		return fmt.Errorf("store: open message file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("store: stat message file: %w", err)
	}
	sc := scanMessageFile(f, st.Size(), func(id MsgID, off int64, size uint32) {
		s.index[id] = &msgLoc{file: n, off: off, size: size}
	})
	var skippedBytes int64
	for _, sp := range sc.skipped {
		skippedBytes += sp.size
	}
	if len(sc.skipped) > 0 {
		s.log.Warn("message store: skipped corrupt records (CRC mismatch); the records after them are kept",
			"file", path, "records", len(sc.skipped), "bytes", skippedBytes, "first_offset", sc.skipped[0].off, "kept_records", sc.records)
	}
	if cut := st.Size() - sc.good; cut > 0 {
		s.log.Warn("message store: cut a torn or corrupt tail; every record before it is kept",
			"file", path, "offset", sc.good, "bytes_dropped", cut, "kept_records", sc.records)
		if err := f.Truncate(sc.good); err != nil {
			f.Close()
			return fmt.Errorf("store: cut torn message file %s: %w", path, err)
		}
	}
	s.files[n] = &msgFile{num: n, f: f, size: sc.good}
	return nil
}
