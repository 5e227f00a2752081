package streamlog

import (
	"fmt"
	"testing"
)

// BenchmarkAppend appends chunks of per 12-byte messages; the syncer
// fsyncs in the background (group commit), as a stream writer does.
func BenchmarkAppend(b *testing.B) {
	for _, per := range []int{1, 100} {
		b.Run(fmt.Sprintf("msgs-per-chunk=%d", per), func(b *testing.B) {
			l := openLog(b, b.TempDir(), Options{})
			defer l.Close()
			batch := NewBatch()
			m := make([]byte, 12)
			b.ReportAllocs()
			b.SetBytes(int64(per * 12))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch.Reset()
				for j := 0; j < per; j++ {
					batch.AddSimple(m)
				}
				if _, err := l.Append(batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkRead1MsgChunks reads chunks of one 12-byte message, the case
// read-ahead is for. "on" serves them from memory after one read per 4096
// bytes; "off-sections" costs a header read per chunk and hands out file
// sections (the stream protocol path, before sendfile); "off" reads header
// and data (the AMQP path).
func BenchmarkRead1MsgChunks(b *testing.B) {
	const chunks = 200_000
	l := openLog(b, b.TempDir(), Options{Sync: SyncNone})
	defer l.Close()
	batch := NewBatch()
	m := make([]byte, 12)
	for i := 0; i < chunks; i++ {
		batch.Reset()
		batch.AddSimple(m)
		if _, err := l.Append(batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	batch.Reset()
	batch.AddSimple(m)
	l.Append(batch, func(uint64, error) { close(done) })
	<-done
	for _, tc := range []struct {
		name string
		opts ReaderOptions
	}{
		{"on", ReaderOptions{ReadAhead: NewReadAhead(true, 4096), FileSections: true}},
		{"off-sections", ReaderOptions{ReadAhead: NewReadAhead(false, 4096), FileSections: true}},
		{"off", ReaderOptions{ReadAhead: NewReadAhead(false, 4096)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, tc.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := r.TryNext()
				if err != nil {
					b.Fatal(err)
				}
				if c == nil {
					r.Close()
					if r, err = l.NewReader(OffsetSpec{Kind: OffsetFirst}, tc.opts); err != nil {
						b.Fatal(err)
					}
					continue
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
			r.Close()
		})
	}
}

// BenchmarkReadEntries iterates the records of 1-message chunks read with
// read-ahead (the AMQP consumer path): no allocation per message.
func BenchmarkReadEntries(b *testing.B) {
	l := openLog(b, b.TempDir(), Options{Sync: SyncNone})
	defer l.Close()
	batch := NewBatch()
	m := make([]byte, 12)
	for i := 0; i < 100_000; i++ {
		batch.Reset()
		batch.AddSimple(m)
		l.Append(batch, nil)
	}
	l.Close()
	l = openLog(b, l.Dir(), Options{})
	r, _ := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		c, err := r.TryNext()
		if err != nil {
			b.Fatal(err)
		}
		if c == nil {
			r.Close()
			r, _ = l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
			continue
		}
		it := c.Entries()
		for _, msg, ok := it.Next(); ok; _, msg, ok = it.Next() {
			n += len(msg)
		}
	}
	r.Close()
}
