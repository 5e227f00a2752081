package logstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkAppend: groups append concurrently, each one entry (256 bytes)
// at a time with StoreLogs as raft does, with real fdatasync to the test's
// temporary directory. b.N is the total number of entries.
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 3s ./broker/cluster/logstore/
func BenchmarkAppend(b *testing.B) {
	for _, groups := range []int{1, 10, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			s, err := Open(b.Context(), b.TempDir(), Options{})
			must(b, err)
			defer s.Close()
			data := make([]byte, 256)
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for gi := range groups {
				wg.Add(1)
				go func() {
					defer wg.Done()
					g := s.Group(fmt.Sprintf("queue-%d", gi))
					l := &raft.Log{Type: raft.LogCommand, Term: 1, Data: data}
					for i := uint64(1); left.Add(-1) >= 0; i++ {
						l.Index = i
						if err := g.StoreLogs([]*raft.Log{l}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			secs := time.Since(start).Seconds()
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(b.N)/secs, "appends/s")
			b.ReportMetric(float64(st.Syncs)/secs, "fsyncs/s")
			b.ReportMetric(float64(b.N)/float64(max(st.Syncs, 1)), "appends/fsync")
		})
	}
}
