package meta

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const (
	logName         = "meta.log"
	recordHeader    = 8 // length + CRC-32C
	maxRecord       = 64 << 20
	compactMinBytes = 1 << 20
)

// Local is the single-node Store: an in-memory State and an fsynced log.
type Local struct {
	dir string

	mu      sync.RWMutex // guards state, f, size, closed
	state   *State
	f       *os.File
	size    int64
	records int
	closed  bool
	// The log is rewritten as one snapshot once it is larger than
	// compactBytes and than twice the last snapshot (base), so compaction
	// costs amortized O(1) per write whatever the state's size.
	compactBytes int64
	base         int64

	cut Repair // what OpenLocal cut off the log's end

	subMu  sync.Mutex
	subs   map[int]func(Event)
	nextID int
	// applyMu serializes writers so events reach subscribers in log order.
	applyMu sync.Mutex
}

var _ Store = (*Local)(nil)

// OpenLocal opens (or creates) the store in dir and replays its log.
func OpenLocal(ctx context.Context, dir string) (*Local, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("meta: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, logName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("meta: open log: %w", err)
	}
	l := &Local{dir: dir, state: NewState(), f: f, subs: map[int]func(Event){}, compactBytes: compactMinBytes}
	good, n, err := replay(f, l.state)
	if err != nil {
		f.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("meta: stat log: %w", err)
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("meta: cut torn tail: %w", err)
	}
	l.cut = Repair{File: path, Offset: good, Dropped: st.Size() - good}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("meta: seek: %w", err)
	}
	l.size, l.records = good, n
	return l, nil
}

// Repair is what opening the log cut off its end: Dropped bytes from Offset
// on, a tail torn by a crash or a record that failed its checksum (and all
// after it: records are not self-delimiting past a bad length).
type Repair struct {
	File    string
	Offset  int64
	Dropped int64
}

// OpenRepair says what OpenLocal cut off the log; Dropped is 0 when the log
// was whole. The caller logs it (the store has no logger of its own).
func (l *Local) OpenRepair() Repair { return l.cut }

// replay applies every whole record and returns the offset after the last one.
func replay(f *os.File, s *State) (int64, int, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, fmt.Errorf("meta: seek: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<16)
	var off int64
	n := 0
	for {
		cmd, size, err := readRecord(r)
		if err != nil {
			// io.EOF: clean end; anything else: a torn or corrupt tail, cut.
			return off, n, nil
		}
		s.Apply(cmd)
		off += int64(size)
		n++
	}
}

// errCorrupt marks a record that fails its length or checksum.
var errCorrupt = errors.New("meta: corrupt record")

func readRecord(r io.Reader) (Command, int, error) {
	var hdr [recordHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Command{}, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n == 0 || n > maxRecord {
		return Command{}, 0, errCorrupt
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return Command{}, 0, err
	}
	return decodeRecord(hdr, data)
}

func decodeRecord(hdr [recordHeader]byte, data []byte) (Command, int, error) {
	if crc32.Checksum(data, crcTable) != binary.BigEndian.Uint32(hdr[4:]) {
		return Command{}, 0, errCorrupt
	}
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return Command{}, 0, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	c.normalize()
	return c, recordHeader + len(data), nil
}

func encodeRecord(c Command) ([]byte, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("meta: encode command: %w", err)
	}
	rec := make([]byte, recordHeader, recordHeader+len(data))
	binary.BigEndian.PutUint32(rec[:4], uint32(len(data)))
	binary.BigEndian.PutUint32(rec[4:], crc32.Checksum(data, crcTable))
	return append(rec, data...), nil
}

// apply validates, logs (fsync), applies and publishes a command.
func (l *Local) apply(ctx context.Context, c Command) error {
	_, err := l.applyEvent(ctx, c)
	return err
}

// applyEvent is apply returning the event published (Kind 0 for none). A
// declare of something that exists, once validated, changes nothing and
// is not logged.
func (l *Local) applyEvent(ctx context.Context, c Command) (Event, error) {
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	rec, err := encodeRecord(c)
	if err != nil {
		return Event{}, err
	}
	// Apply what a replay will read back (JSON numbers and all), so the
	// state in memory is the state after a restart.
	var hdr [recordHeader]byte
	copy(hdr[:], rec)
	if c, _, err = decodeRecord(hdr, rec[recordHeader:]); err != nil {
		return Event{}, fmt.Errorf("meta: re-read command: %w", err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Event{}, ErrClosed
	}
	if err := l.state.Validate(c); err != nil {
		l.mu.Unlock()
		return Event{}, err
	}
	if l.state.declareExists(c) {
		l.mu.Unlock()
		return Event{}, nil
	}
	if _, err := l.f.Write(rec); err != nil {
		_ = l.f.Truncate(l.size)
		_, _ = l.f.Seek(l.size, io.SeekStart)
		l.mu.Unlock()
		return Event{}, fmt.Errorf("meta: append: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		// Not acknowledged: cut the record so the log stays what memory is.
		_ = l.f.Truncate(l.size)
		_, _ = l.f.Seek(l.size, io.SeekStart)
		l.mu.Unlock()
		return Event{}, fmt.Errorf("meta: fsync: %w", err)
	}
	l.size += int64(len(rec))
	l.records++
	ev := l.state.Apply(c)
	if l.size > l.compactBytes && l.size > 2*l.base {
		if err := l.compactLocked(); err != nil {
			l.mu.Unlock()
			return Event{}, err
		}
	}
	l.mu.Unlock()
	if ev.Kind != 0 {
		l.subMu.Lock()
		subs := make([]func(Event), 0, len(l.subs))
		for _, fn := range l.subs {
			subs = append(subs, fn)
		}
		l.subMu.Unlock()
		for _, fn := range subs {
			fn(ev)
		}
	}
	return ev, nil
}

// compactLocked rewrites the log as one snapshot record.
func (l *Local) compactLocked() error {
	rec, err := encodeRecord(Command{Op: opSnapshot, Snapshot: l.state})
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, logName+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("meta: compact: %w", err)
	}
	if _, err := f.Write(rec); err != nil {
		f.Close()
		return fmt.Errorf("meta: compact write: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("meta: compact fsync: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, logName)); err != nil {
		f.Close()
		return fmt.Errorf("meta: compact rename: %w", err)
	}
	if d, err := os.Open(l.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	l.f.Close()
	l.f = f
	l.size = int64(len(rec))
	l.base = l.size
	l.records = 1
	return nil
}

// Close closes the log.
func (l *Local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.f.Close()
}

// Subscribe implements Store.
func (l *Local) Subscribe(fn func(Event)) func() {
	l.subMu.Lock()
	defer l.subMu.Unlock()
	id := l.nextID
	l.nextID++
	l.subs[id] = fn
	return func() {
		l.subMu.Lock()
		delete(l.subs, id)
		l.subMu.Unlock()
	}
}

// PutVhost implements Store.
func (l *Local) PutVhost(ctx context.Context, v Vhost) error {
	return l.apply(ctx, Command{Op: OpPutVhost, Vhost: &v})
}

// DeleteVhost implements Store.
func (l *Local) DeleteVhost(ctx context.Context, name string) error {
	return l.apply(ctx, Command{Op: OpDeleteVhost, Name: name})
}

// Vhost implements Store.
func (l *Local) Vhost(name string) (Vhost, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	v, ok := l.state.Vhosts[name]
	return v, ok
}

// Vhosts implements Store.
func (l *Local) Vhosts() []Vhost {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Vhosts, nil)
}

// PutUser implements Store.
func (l *Local) PutUser(ctx context.Context, u User) error {
	return l.apply(ctx, Command{Op: OpPutUser, User: &u})
}

// DeleteUser implements Store.
func (l *Local) DeleteUser(ctx context.Context, name string) error {
	return l.apply(ctx, Command{Op: OpDeleteUser, Name: name})
}

// User implements Store.
func (l *Local) User(name string) (User, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	u, ok := l.state.Users[name]
	return u, ok
}

// Users implements Store.
func (l *Local) Users() []User {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Users, nil)
}

// PutPermission implements Store.
func (l *Local) PutPermission(ctx context.Context, p Permission) error {
	return l.apply(ctx, Command{Op: OpPutPermission, Permission: &p})
}

// DeletePermission implements Store.
func (l *Local) DeletePermission(ctx context.Context, vhost, user string) error {
	return l.apply(ctx, Command{Op: OpDeletePermission, VhostName: vhost, Name: user})
}

// Permission implements Store.
func (l *Local) Permission(vhost, user string) (Permission, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	p, ok := l.state.Permissions[key2(vhost, user)]
	return p, ok
}

// Permissions implements Store.
func (l *Local) Permissions() []Permission {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Permissions, nil)
}

// PutPolicy implements Store.
func (l *Local) PutPolicy(ctx context.Context, p Policy) error {
	return l.apply(ctx, Command{Op: OpPutPolicy, Policy: &p})
}

// DeletePolicy implements Store.
func (l *Local) DeletePolicy(ctx context.Context, vhost, name string) error {
	return l.apply(ctx, Command{Op: OpDeletePolicy, VhostName: vhost, Name: name})
}

// Policies implements Store; vhost "" lists every vhost's.
func (l *Local) Policies(vhost string) []Policy {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Policies, func(p Policy) bool { return vhost == "" || p.Vhost == vhost })
}

// PutExchange implements Store.
func (l *Local) PutExchange(ctx context.Context, e Exchange) error {
	return l.apply(ctx, Command{Op: OpPutExchange, Exchange: &e})
}

// DeclareExchange implements Store.
func (l *Local) DeclareExchange(ctx context.Context, e Exchange) (bool, error) {
	ev, err := l.applyEvent(ctx, Command{Op: OpDeclareExchange, Exchange: &e})
	return ev.Kind != 0, err
}

// DeleteExchange implements Store.
func (l *Local) DeleteExchange(ctx context.Context, vhost, name string) error {
	return l.apply(ctx, Command{Op: OpDeleteExchange, VhostName: vhost, Name: name})
}

// Exchanges implements Store; vhost "" lists every vhost's.
func (l *Local) Exchanges(vhost string) []Exchange {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Exchanges, func(e Exchange) bool { return vhost == "" || e.Vhost == vhost })
}

// PutQueue implements Store.
func (l *Local) PutQueue(ctx context.Context, q Queue) error {
	return l.apply(ctx, Command{Op: OpPutQueue, Queue: &q})
}

// DeclareQueue implements Store.
func (l *Local) DeclareQueue(ctx context.Context, q Queue) (bool, error) {
	ev, err := l.applyEvent(ctx, Command{Op: OpDeclareQueue, Queue: &q})
	return ev.Kind != 0, err
}

// DeleteQueue implements Store.
func (l *Local) DeleteQueue(ctx context.Context, vhost, name string) error {
	return l.apply(ctx, Command{Op: OpDeleteQueue, VhostName: vhost, Name: name})
}

// DeleteQueueIf implements Store.
func (l *Local) DeleteQueueIf(ctx context.Context, q Queue) (bool, error) {
	ev, err := l.applyEvent(ctx, Command{Op: OpDeleteQueue, VhostName: q.Vhost, Name: q.Name, Queue: &q})
	return ev.Kind != 0, err
}

// Queues implements Store; vhost "" lists every vhost's.
func (l *Local) Queues(vhost string) []Queue {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Queues, func(q Queue) bool { return vhost == "" || q.Vhost == vhost })
}

// PutBinding implements Store.
func (l *Local) PutBinding(ctx context.Context, b Binding) error {
	return l.apply(ctx, Command{Op: OpPutBinding, Binding: &b})
}

// DeleteBinding implements Store.
func (l *Local) DeleteBinding(ctx context.Context, b Binding) error {
	return l.apply(ctx, Command{Op: OpDeleteBinding, Binding: &b})
}

// Bindings implements Store; vhost "" lists every vhost's.
func (l *Local) Bindings(vhost string) []Binding {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Bindings, func(b Binding) bool { return vhost == "" || b.Vhost == vhost })
}
