package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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
type MessageStore struct {
	dir string

	mu        sync.Mutex
	index     map[MsgID]*msgLoc
	files     map[uint32]*msgFile
	cur       *msgFile
	w         *bufio.Writer
	dirty     map[uint32]*msgFile // written since the last sync
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
	num     uint32
	f       *os.File
	size    int64 // bytes written (buffered included)
	flushed int64
	live    int64
}

func openMessageStore(dir string) (*MessageStore, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	s := &MessageStore{dir: dir, index: map[MsgID]*msgLoc{}, files: map[uint32]*msgFile{}, dirty: map[uint32]*msgFile{}}
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
	if s.cur == nil {
		if err := s.rotate(next); err != nil {
			s.closeFiles()
			return nil, err
		}
	}
	s.w = bufio.NewWriterSize(fileAppender{s.cur}, 256<<10)
	return s, nil
}

// fileAppender writes at the end of a msgFile.
type fileAppender struct{ mf *msgFile }

func (a fileAppender) Write(p []byte) (int, error) {
	n, err := a.mf.f.WriteAt(p, a.mf.flushed)
	a.mf.flushed += int64(n)
	return n, err
}

func (s *MessageStore) path(n uint32) string {
	return filepath.Join(s.dir, fmt.Sprintf("%d.rdq", n))
}

// recoverFile indexes every whole record of file n and cuts a torn tail.
func (s *MessageStore) recoverFile(n uint32) error {
	f, err := os.OpenFile(s.path(n), os.O_RDWR, 0o640)
	if err != nil {
		return fmt.Errorf("store: open message file: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	var hdr [msgHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		size := binary.BigEndian.Uint32(hdr[0:])
		if size > maxMessageSize {
			break
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			break
		}
		sum := crc32.Update(crc32.Checksum(hdr[8:16], crcTable), crcTable, data)
		if sum != binary.BigEndian.Uint32(hdr[4:]) {
			break
		}
		id := MsgID(binary.BigEndian.Uint64(hdr[8:]))
		s.index[id] = &msgLoc{file: n, off: off, size: msgHeader + size}
		off += int64(msgHeader + size)
	}
	if err := f.Truncate(off); err != nil {
		f.Close()
		return fmt.Errorf("store: cut torn message file: %w", err)
	}
	s.files[n] = &msgFile{num: n, f: f, size: off, flushed: off}
	return nil
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

// Write stores data under id, or adds a reference when it is already stored.
func (s *MessageStore) Write(id MsgID, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if loc, ok := s.index[id]; ok {
		loc.refs++
		return nil
	}
	if s.cur.size >= msgFileMax {
		if err := s.w.Flush(); err != nil {
			return fmt.Errorf("store: flush message file: %w", err)
		}
		if err := s.rotate(s.cur.num + 1); err != nil {
			return err
		}
		s.w.Reset(fileAppender{s.cur})
	}
	var hdr [msgHeader]byte
	binary.BigEndian.PutUint32(hdr[0:], uint32(len(data)))
	binary.BigEndian.PutUint64(hdr[8:], uint64(id))
	binary.BigEndian.PutUint32(hdr[4:], crc32.Update(crc32.Checksum(hdr[8:16], crcTable), crcTable, data))
	if _, err := s.w.Write(hdr[:]); err != nil {
		return fmt.Errorf("store: write message: %w", err)
	}
	if _, err := s.w.Write(data); err != nil {
		return fmt.Errorf("store: write message: %w", err)
	}
	size := uint32(msgHeader + len(data))
	s.index[id] = &msgLoc{file: s.cur.num, off: s.cur.size, size: size, refs: 1}
	s.cur.size += int64(size)
	s.cur.live += int64(size)
	s.dirty[s.cur.num] = s.cur
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
	if loc.off+int64(loc.size) > mf.flushed {
		if err := s.w.Flush(); err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("store: flush message file: %w", err)
		}
	}
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
// durable, and deletes the file.
func (s *MessageStore) compactLocked(mf *msgFile) {
	if mf.live <= 0 {
		s.removeFileLocked(mf)
		return
	}
	type move struct {
		id  MsgID
		loc *msgLoc
	}
	var moves []move
	for id, loc := range s.index {
		if loc.file == mf.num {
			moves = append(moves, move{id, loc})
		}
	}
	for _, m := range moves {
		buf := make([]byte, m.loc.size)
		if _, err := mf.f.ReadAt(buf, m.loc.off); err != nil {
			return // keep the file; try again on a later release
		}
		if s.cur.size >= msgFileMax {
			if s.w.Flush() != nil || s.rotate(s.cur.num+1) != nil {
				return
			}
			s.w.Reset(fileAppender{s.cur})
		}
		if _, err := s.w.Write(buf); err != nil {
			return
		}
		m.loc.file, m.loc.off = s.cur.num, s.cur.size
		s.cur.size += int64(m.loc.size)
		s.cur.live += int64(m.loc.size)
		mf.live -= int64(m.loc.size)
	}
	if s.w.Flush() != nil || s.cur.f.Sync() != nil {
		return
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

// flush hands buffered records to the OS and returns the files to fsync.
func (s *MessageStore) flush() ([]*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("store: flush message file: %w", err)
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
	err := s.w.Flush()
	if err == nil {
		err = s.cur.f.Sync()
	}
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
