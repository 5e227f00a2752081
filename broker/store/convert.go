package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

const convertingSuffix = ".converting"

// Convert rewrites the queue's files in the layout of opts (version 1 <-> 2
// or a new embed threshold). It is crash safe: the new files are written and
// fsynced beside the old ones and marked complete before they replace them;
// an interrupted conversion is finished or discarded when the queue opens.
func (q *QueueIndex) Convert(ctx context.Context, opts Options) error {
	if opts.Version == 0 {
		opts.Version = 2
	}
	if opts.Version == q.opts.Version && opts.EmbedBelow == q.opts.EmbedBelow && opts.SegmentEntries == q.opts.SegmentEntries {
		return nil
	}
	tmpDir := q.dir + convertingSuffix
	if err := os.RemoveAll(tmpDir); err != nil {
		return fmt.Errorf("store: convert: clear %s: %w", tmpDir, err)
	}
	if err := os.MkdirAll(tmpDir, 0o750); err != nil {
		return fmt.Errorf("store: convert: %w", err)
	}
	if err := writeFileSync(filepath.Join(tmpDir, optionsFile), []byte(fmt.Sprint(opts.Version))); err != nil {
		return err
	}
	nq := &QueueIndex{vs: q.vs, dir: tmpDir, opts: opts, segs: map[uint64]*segment{}, next: q.next}
	var batch []Entry
	var copyErr error
	flush := func() {
		if copyErr == nil && len(batch) > 0 {
			copyErr = nq.Append(batch)
			batch = batch[:0]
		}
	}
	_, err := q.Read(0, int(^uint(0)>>1), 0, func(e Entry) {
		if ctx.Err() != nil {
			return
		}
		batch = append(batch, e)
		if len(batch) >= 1024 {
			flush()
		}
	})
	flush()
	if err == nil {
		err = copyErr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		nq.releaseAll()
		nq.closeFiles()
		_ = os.RemoveAll(tmpDir)
		return fmt.Errorf("store: convert %s: %w", q.dir, err)
	}
	if err := nq.Close(false); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(tmpDir, "complete"), nil); err != nil {
		return err
	}
	// The new files hold their own message-store references; drop the old ones.
	q.releaseAll()
	q.closeFiles()
	if err := finishConversion(q.dir); err != nil {
		return err
	}
	// The copy's references were counted when it was written: reopen
	// without counting them again.
	reopened, _, err := openQueueIndexRefs(q.vs, q.dir, opts, false)
	if err != nil {
		return err
	}
	*q = *reopened
	return nil
}

// releaseAll drops the message-store references of every live external entry.
func (q *QueueIndex) releaseAll() {
	_ = q.applyAllAcks()
	_ = q.Flush()
	for _, s := range q.segs {
		if q.files(s) != nil {
			continue
		}
		st, err := s.idx.Stat()
		if err != nil {
			continue
		}
		buf := make([]byte, st.Size())
		n, _ := s.idx.ReadAt(buf, 0)
		buf = buf[:n-n%entrySize]
		for i := 0; i+entrySize <= len(buf); i += entrySize {
			e := buf[i : i+entrySize]
			if (e[0] == statusPublished || e[0] == statusDelivered) && e[1]&flagExternal != 0 {
				q.vs.msgs.Release(MsgID(binary.BigEndian.Uint64(e[16:])))
			}
		}
	}
}

// finishConversion completes or discards a conversion left by a crash.
func finishConversion(dir string) error {
	tmpDir := dir + convertingSuffix
	if _, err := os.Stat(tmpDir); err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(tmpDir, "complete")); err != nil {
		if err := os.RemoveAll(tmpDir); err != nil {
			return fmt.Errorf("store: discard unfinished conversion: %w", err)
		}
		return nil
	}
	old := dir + ".old"
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("store: conversion: %w", err)
	}
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("store: conversion: %w", err)
		}
	}
	if err := os.Rename(tmpDir, dir); err != nil {
		return fmt.Errorf("store: conversion: %w", err)
	}
	_ = os.Remove(filepath.Join(dir, "complete"))
	syncDir(filepath.Dir(dir))
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("store: conversion: remove old files: %w", err)
	}
	return nil
}
