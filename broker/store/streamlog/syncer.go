package streamlog

import (
	"fmt"
	"io"
	"os"

	"github.com/warrenmq/warren/broker/datasync"
)

// syncLoop is the log's syncer goroutine: it writes the pending index
// records, fsyncs (group commit: everything appended since the previous
// round is made durable by one round), advances the commit point, wakes
// the readers and calls the durability callbacks.
func (l *Log) syncLoop() {
	defer close(l.stopped)
	for range l.wake {
		for {
			l.mu.Lock()
			if len(l.pend) == 0 && len(l.rolled) == 0 {
				closed := l.closed
				l.mu.Unlock()
				if closed {
					return
				}
				break
			}
			pend := l.pend
			l.pend = l.sparePend[:0]
			l.sparePend = nil
			rolled := l.rolled
			l.rolled = nil
			idxBuf := l.pendIdx
			l.pendIdx = l.spareIdx[:0]
			l.spareIdx = nil
			seg, idx := l.seg, l.idx
			dirDirty := l.dirDirty
			l.dirDirty = false
			err := l.failed
			l.mu.Unlock()

			if err == nil {
				err = l.flush(rolled, seg, idx, idxBuf, dirDirty)
			} else {
				for _, r := range rolled {
					r.seg.Close()
					r.idx.Close()
				}
			}

			l.mu.Lock()
			l.spareIdx = idxBuf[:0]
			if err != nil && l.failed == nil {
				l.failed = err
			}
			if err == nil && len(pend) > 0 {
				l.commit = pend[len(pend)-1].upto
				old := l.notify
				l.notify = make(chan struct{})
				close(old)
			}
			l.mu.Unlock()
			for i := range pend {
				if pend[i].done != nil {
					pend[i].done(pend[i].id, err)
				}
				pend[i] = pending{}
			}
			l.mu.Lock()
			l.sparePend = pend[:0]
			l.mu.Unlock()
		}
	}
}

// flush writes index records and fsyncs the files of one round.
func (l *Log) flush(rolled []rolledFiles, seg, idx *os.File, idxBuf []byte, dirDirty bool) error {
	sync := l.opts.Sync == SyncGroup
	for _, r := range rolled {
		var err error
		if len(r.idxBuf) > 0 {
			l.writeIndex(r.idx, r.idxBuf)
		}
		if sync {
			if err = datasync.File(r.seg); err == nil {
				err = datasync.File(r.idx)
			}
		}
		r.seg.Close()
		r.idx.Close()
		if err != nil {
			return fmt.Errorf("streamlog: flush rolled segment in %s: %w", l.dir, err)
		}
	}
	if len(idxBuf) > 0 {
		l.writeIndex(idx, idxBuf)
	}
	if !sync {
		return nil
	}
	if err := datasync.File(seg); err != nil {
		return fmt.Errorf("streamlog: sync segment in %s: %w", l.dir, err)
	}
	if len(idxBuf) > 0 {
		if err := datasync.File(idx); err != nil {
			return fmt.Errorf("streamlog: sync index in %s: %w", l.dir, err)
		}
	}
	if dirDirty {
		if err := syncDir(l.dir); err != nil {
			return fmt.Errorf("streamlog: sync directory %s: %w", l.dir, err)
		}
	}
	return nil
}

// writeIndex appends index records. The index only speeds up finding an
// offset or a timestamp, and recovery rebuilds one that does not match its
// segment, so a write that fails (a full disk) does not fail the chunks,
// whose data is written: the records are dropped, the index is cut back to
// whole records, and readers scan forward from an earlier chunk.
func (l *Log) writeIndex(x *os.File, recs []byte) {
	n, err := x.Write(recs)
	if err == nil {
		return
	}
	if n > 0 {
		if pos, serr := x.Seek(-int64(n), io.SeekCurrent); serr == nil {
			_ = x.Truncate(pos)
		}
	}
	l.opts.Disk.NoSpace(err)
	l.opts.Log.Warn("stream: index records not written; the index is rebuilt at the next start", "file", x.Name(), "records", len(recs)/IndexRecordSize, "err", err)
}
