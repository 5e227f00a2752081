package streamlog

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest/tmpfs"
)

// countingDisk records what the log tells the disk alarm.
type countingDisk struct {
	mu       sync.Mutex
	reserved int64
	noSpace  int
}

func (d *countingDisk) Reserve(n int64) { d.mu.Lock(); d.reserved += n; d.mu.Unlock() }
func (d *countingDisk) NoSpace(err error) bool {
	full := errors.Is(err, syscall.ENOSPC)
	if full {
		d.mu.Lock()
		d.noSpace++
		d.mu.Unlock()
	}
	return full
}

// TestProbeDiskFullStream fills a real filesystem (a small tmpfs) with a
// stream's chunks, rolling segments as it goes: appends that find the disk
// full fail with ENOSPC and leave nothing behind, the log is not broken by
// them (once space is freed appends work again, with no reopen), and
// after a restart exactly the chunks confirmed durable are there.
func TestProbeDiskFullStream(t *testing.T) {
	mnt := tmpfs.Mount(t, 2<<20)
	filler := filepath.Join(mnt, "filler")
	tmpfs.Fill(t, filler, 256<<10)
	dir := filepath.Join(mnt, "stream")
	disk := &countingDisk{}
	opts := Options{MaxSegmentBytes: 64 << 10, Disk: disk}
	l := openLog(t, dir, opts)

	var mu sync.Mutex
	durable := map[int]bool{}
	var wg sync.WaitGroup
	b := NewBatch()
	next, failures := 0, 0
	appendOne := func(size int) error {
		b.Reset()
		i := next
		next++
		if err := b.AddSimple(msg(i, size)); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		_, err := l.Append(b, func(_ uint64, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				durable[i] = true
				mu.Unlock()
			}
		})
		if err != nil {
			wg.Done()
		}
		return err
	}
	// Once the disk is full, every other append is larger than a segment
	// holds, so it first rolls to a new segment, which cannot be written.
	for failures < 20 && next < 100000 {
		size := 1000
		if failures%2 == 1 {
			size = 70 << 10
		}
		if err := appendOne(size); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append %d: %v, want ENOSPC", next-1, err)
			}
			failures++
		}
	}
	wg.Wait()
	if failures == 0 {
		t.Fatal("the disk never filled")
	}
	if disk.noSpace == 0 || disk.reserved == 0 {
		t.Fatalf("the disk alarm was not told: %d bytes reserved, %d ENOSPC", disk.reserved, disk.noSpace)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		size := 1000
		if i == 10 || i == 40 {
			size = 70 << 10 // rolls
		}
		if err := appendOne(size); err != nil {
			t.Fatalf("append after space came back: %v", err)
		}
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	l = openLog(t, dir, Options{MaxSegmentBytes: 64 << 10})
	defer l.Close()
	_, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	got := map[int]bool{}
	for _, s := range seqs {
		if got[s] {
			t.Fatalf("message %d read twice", s)
		}
		got[s] = true
		if !durable[s] {
			t.Fatalf("message %d is in the log but its append failed", s)
		}
	}
	if len(got) != len(durable) {
		t.Fatalf("read %d messages, want the %d confirmed durable", len(got), len(durable))
	}
	t.Logf("%d appends, %d failed with ENOSPC, %d durable", next, failures, len(durable))
}
