package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// result is one run's outcome, printed as a summary line and as JSON.
type result struct {
	Tool      string         `json:"tool"`
	Mode      string         `json:"mode"`
	Target    string         `json:"target"`
	Messages  int64          `json:"messages"`
	Chunks    int64          `json:"chunks,omitempty"`
	Bytes     int64          `json:"bytes"`
	Seconds   float64        `json:"seconds"`
	MsgPerSec float64        `json:"msg_per_s"`
	MBPerSec  float64        `json:"mb_per_s"`
	Params    map[string]any `json:"params"`
	Error     string         `json:"error,omitempty"`
}

func (r *result) finish(elapsed time.Duration) {
	r.Tool = "warren-perf"
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.MsgPerSec = float64(r.Messages) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / r.Seconds / 1e6
	}
}

func (r *result) summary() string {
	s := fmt.Sprintf("%s %s: %d messages in %.3fs: %.0f msg/s, %.1f MB/s", r.Mode, r.Target, r.Messages, r.Seconds, r.MsgPerSec, r.MBPerSec)
	if r.Chunks > 0 {
		s += fmt.Sprintf(", %d chunks (%.1f msg/chunk)", r.Chunks, float64(r.Messages)/float64(r.Chunks))
	}
	if r.Error != "" {
		s += ", error: " + r.Error
	}
	return s
}

// output prints the summary to stdout and, if path is set, the JSON
// result to path ("-" for stdout).
func (r *result) output(stdout io.Writer, path string) error {
	fmt.Fprintln(stdout, r.summary())
	if path == "" {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// progress prints a line to stderr every second while a run lasts.
type progress struct {
	count atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

func startProgress(w io.Writer, what string, every time.Duration) *progress {
	p := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if every <= 0 {
			<-p.stop
			return
		}
		t := time.NewTicker(every)
		defer t.Stop()
		start, last, lastN := time.Now(), time.Now(), int64(0)
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				n := p.count.Load()
				rate := float64(n-lastN) / now.Sub(last).Seconds()
				fmt.Fprintf(w, "%s: %d messages after %.0fs, %.0f msg/s\n", what, n, now.Sub(start).Seconds(), rate)
				last, lastN = now, n
			}
		}
	}()
	return p
}

func (p *progress) end() {
	close(p.stop)
	<-p.done
}
