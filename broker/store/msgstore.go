package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// MsgID identifies a message on a node.
type MsgID uint64

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors.
var (
	ErrNotFound = errors.New("store: not found")
	ErrCorrupt  = errors.New("store: corrupt record")
	ErrClosed   = errors.New("store: closed")
)

const (
	msgHeader      = 16 // len, crc, id
	msgFileMax     = 16 << 20
	compactRatio   = 0.5
	maxMessageSize = 1 << 30
)

// MessageStore keeps large messages for every queue of a vhost.
//
// Writes go to the OS when they are made (one pwrite per batch: see
// writeBatch), not through a buffer, so a write that fails — a full disk —
// fails for the batch that made it and for nothing else: the file is cut
// back, the batch's index entries and references undone, and the next
// batch writes where it would have.
type MessageStore struct {
	dir  string
	disk *DiskWatch // may be nil
	log  *slog.Logger

	mu        sync.Mutex
	index     map[MsgID]*msgLoc
	files     map[uint32]*msgFile
	cur       *msgFile
	dirty     map[uint32]*msgFile // written since the last sync
	wbuf      []byte              // writeBatch's encoding buffer, reused
	undo      []msgUndo           // writeBatch's changes, to undo a failed write
	recovered bool
	closed    bool
}

type msgLoc struct {
	file uint32
	off  int64
	size uint32 // record size including header
	refs int32
}

type msgFile struct {
	num  uint32
	f    *os.File
	size int64 // bytes written
	live int64
}

// msgUndo is one change writeBatch made to the index: a new record, or one
// more reference to a stored one.
type msgUndo struct {
	id    MsgID
	added bool
}

func openMessageStore(dir string, disk *DiskWatch, log *slog.Logger) (*MessageStore, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	if log == nil {
		log = slog.Default()
	}
	s := &MessageStore{dir: dir, disk: disk, log: log, index: map[MsgID]*msgLoc{}, files: map[uint32]*msgFile{}, dirty: map[uint32]*msgFile{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", dir, err)
	}
	var nums []uint32
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".rdq") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(name, ".rdq"), 10, 32)
		if err != nil {
			continue
		}
		nums = append(nums, uint32(n))
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	for _, n := range nums {
		if err := s.recoverFile(n); err != nil {
			s.closeFiles()
			return nil, err
		}
	}
	next := uint32(0)
	if len(nums) > 0 {
		next = nums[len(nums)-1]
	}
	if f, ok := s.files[next]; ok && f.size < msgFileMax {
		s.cur = f
	} else if err := s.rotate(next + 1); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func (s *MessageStore) path(n uint32) string {
	return filepath.Join(s.dir, fmt.Sprintf("%d.rdq", n))
}

func (s *MessageStore) rotate(n uint32) error {
	f, err := os.OpenFile(s.path(n), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("store: create message file: %w", err)
	}
	mf := &msgFile{num: n, f: f}
	s.files[n] = mf
	s.cur = mf
	s.dirty[n] = mf
	syncDir(s.dir)
	return nil
}

// addRef records one more reference to id, found at recovery in a queue index.
func (s *MessageStore) addRef(id MsgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	loc, ok := s.index[id]
	if !ok {
		return false
	}
	loc.refs++
	s.files[loc.file].live += int64(loc.size)
	return true
}

func (s *MessageStore) has(id MsgID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.index[id]
	return ok
}

// recoveryDone drops every message no queue references.
func (s *MessageStore) recoveryDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, loc := range s.index {
		if loc.refs <= 0 {
			delete(s.index, id)
		}
	}
	s.recovered = true
}

// writeBatch stores the data of entries with data of at least embedBelow
// bytes (the others are embedded in a queue index), in order, or adds a
// reference to each that is already stored. It is all or nothing: on error
// nothing of the batch is stored or referenced.
func (s *MessageStore) writeBatch(entries []Entry, embedBelow int) error {
	var n int64
	for i := range entries {
		if len(entries[i].Data) >= embedBelow {
			n += int64(msgHeader + len(entries[i].Data))
		}
	}
	if n == 0 {
		return nil
	}
	s.disk.Reserve(n)
	err := s.writeBatchLocked(entries, embedBelow)
	if err != nil {
		s.disk.NoSpace(err)
	}
	return err
}

func (s *MessageStore) writeBatchLocked(entries []Entry, embedBelow int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.cur.size >= msgFileMax {
		if err := s.rotate(s.cur.num + 1); err != nil {
			return err
		}
	}
	cur := s.cur
	buf, undo := s.wbuf[:0], s.undo[:0]
	for i := range entries {
		id, data := entries[i].ID, entries[i].Data
		if len(data) < embedBelow {
			continue
		}
		if loc, ok := s.index[id]; ok {
			loc.refs++
			undo = append(undo, msgUndo{id: id})
			continue
		}
		size := uint32(msgHeader + len(data))
		s.index[id] = &msgLoc{file: cur.num, off: cur.size + int64(len(buf)), size: size, refs: 1}
		undo = append(undo, msgUndo{id: id, added: true})
		at := len(buf)
		buf = append(buf, make([]byte, msgHeader)...) // the header, in place
		hdr := buf[at : at+msgHeader]
		binary.BigEndian.PutUint32(hdr[0:], uint32(len(data)))
		binary.BigEndian.PutUint64(hdr[8:], uint64(id))
		binary.BigEndian.PutUint32(hdr[4:], crc32.Update(crc32.Checksum(hdr[8:16], crcTable), crcTable, data))
		buf = append(buf, data...)
	}
	s.undo = undo
	if cap(buf) <= 4<<20 {
		s.wbuf = buf[:0] // a rare huge batch does not stay allocated
	}
	if len(buf) == 0 {
		return nil
	}
	if _, err := cur.f.WriteAt(buf, cur.size); err != nil {
		// Cut what part of the batch got written, so the file ends on a
		// whole record and no stale record of this batch survives behind
		// the next one; the next batch writes at the same place.
		_ = cur.f.Truncate(cur.size)
		for i := len(undo) - 1; i >= 0; i-- {
			if undo[i].added {
				delete(s.index, undo[i].id)
			} else {
				s.index[undo[i].id].refs--
			}
		}
		return fmt.Errorf("store: write messages to %s: %w", cur.f.Name(), err)
	}
	cur.size += int64(len(buf))
	cur.live += int64(len(buf))
	s.dirty[cur.num] = cur
	return nil
}

// Read returns the data stored under id.
func (s *MessageStore) Read(id MsgID) ([]byte, error) {
	s.mu.Lock()
	loc, ok := s.index[id]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: message %d", ErrNotFound, id)
	}
	mf := s.files[loc.file]
	buf := make([]byte, loc.size)
	_, err := mf.f.ReadAt(buf, loc.off)
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("store: read message %d: %w", id, err)
	}
	if binary.BigEndian.Uint64(buf[8:]) != uint64(id) || crc32.Checksum(buf[8:], crcTable) != binary.BigEndian.Uint32(buf[4:]) {
		return nil, fmt.Errorf("%w: message %d", ErrCorrupt, id)
	}
	return buf[msgHeader:], nil
}

// Release drops one reference; the last one frees the message, and a file
// left mostly garbage is compacted.
func (s *MessageStore) Release(id MsgID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loc, ok := s.index[id]
	if !ok {
		return
	}
	loc.refs--
	if loc.refs > 0 {
		return
	}
	delete(s.index, id)
	mf := s.files[loc.file]
	mf.live -= int64(loc.size)
	if mf != s.cur && s.recovered && float64(mf.live) < compactRatio*float64(mf.size) {
		s.compactLocked(mf)
	}
}

// compactLocked copies a file's live records to the current file, makes them
// durable, and deletes the file. On any failure (a full disk) nothing moves
// and the file stays, to be tried again on a later release.
func (s *MessageStore) compactLocked(mf *msgFile) {
	if mf.live <= 0 {
		s.removeFileLocked(mf)
		return
	}
	if s.cur.size >= msgFileMax && s.rotate(s.cur.num+1) != nil {
		return
	}
	type move struct {
		loc *msgLoc
		off int64 // in the current file
	}
	var moves []move
	var buf []byte
	cur := s.cur
	for _, loc := range s.index {
		if loc.file != mf.num {
			continue
		}
		moves = append(moves, move{loc, cur.size + int64(len(buf))})
		buf = append(buf, make([]byte, loc.size)...)
		if _, err := mf.f.ReadAt(buf[len(buf)-int(loc.size):], loc.off); err != nil {
			return
		}
	}
	if _, err := cur.f.WriteAt(buf, cur.size); err != nil {
		_ = cur.f.Truncate(cur.size)
		s.disk.NoSpace(err)
		return
	}
	if err := cur.f.Sync(); err != nil {
		_ = cur.f.Truncate(cur.size)
		return
	}
	cur.size += int64(len(buf))
	cur.live += int64(len(buf))
	for _, m := range moves {
		m.loc.file, m.loc.off = cur.num, m.off
	}
	s.removeFileLocked(mf)
}

func (s *MessageStore) removeFileLocked(mf *msgFile) {
	if mf == s.cur {
		return
	}
	mf.f.Close()
	delete(s.files, mf.num)
	delete(s.dirty, mf.num)
	_ = os.Remove(s.path(mf.num))
}

// flush returns the files written since the last call, to fsync.
func (s *MessageStore) flush() ([]*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	files := make([]*os.File, 0, len(s.dirty))
	for n, mf := range s.dirty {
		files = append(files, mf.f)
		delete(s.dirty, n)
	}
	return files, nil
}

// Stats reports file count, bytes on disk and live bytes.
func (s *MessageStore) Stats() (files int, bytes, live int64, messages int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, mf := range s.files {
		bytes += mf.size
		live += mf.live
	}
	return len(s.files), bytes, live, len(s.index)
}

func (s *MessageStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.cur.f.Sync()
	s.closeFiles()
	return err
}

func (s *MessageStore) closeFiles() {
	for _, mf := range s.files {
		mf.f.Close()
	}
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
