package streamlog

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const crashChildEnv = "STREAMLOG_CRASH_CHILD_DIR"

// crashChild appends until killed, printing each durable chunk as
// "ack <chunk id> <first seq> <records>" and each durable stored offset as
// "off <value>". It resumes the sequence from the recovered publisher
// sequence, so the log holds 0, 1, 2, ... with no gap if nothing
// confirmed is lost and nothing is stored twice.
func crashChild(dir string) {
	l, err := Open(dir, Options{MaxSegmentBytes: 64 << 10})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	next := uint64(0)
	if s, ok := l.PublisherSequence("pub"); ok {
		next = s + 1
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	flush := func(line string) {
		mu.Lock()
		out.WriteString(line)
		out.Flush()
		mu.Unlock()
	}
	fmt.Fprintf(os.Stdout, "start %d\n", next)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	b := NewBatch()
	for i := 0; ; i++ {
		b.Reset()
		n := 1 + rng.IntN(20)
		first := next
		for j := 0; j < n; j++ {
			m := make([]byte, 8+rng.IntN(100))
			binary.BigEndian.PutUint64(m, next)
			b.AddSimple(m)
			next++
		}
		b.TrackPublisher("pub", next-1)
		var off uint64
		if i%10 == 0 {
			off = first
			b.TrackOffset("consumer", off)
		}
		_, err := l.Append(b, func(id uint64, err error) {
			if err != nil {
				flush(fmt.Sprintf("error %v\n", err))
				return
			}
			line := fmt.Sprintf("ack %d %d %d\n", id, first, n)
			if i%10 == 0 {
				line += fmt.Sprintf("off %d\n", off)
			}
			flush(line)
		})
		if err != nil {
			flush(fmt.Sprintf("error %v\n", err))
			os.Exit(2)
		}
	}
}

type ackedChunk struct{ id, first, n uint64 }

func TestCrashKill9(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	var acked []ackedChunk
	var maxOff uint64
	for round := 0; round < 4; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := time.Now().Add(time.Duration(300+round*200) * time.Millisecond)
		killed := false
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch f[0] {
			case "ack":
				id, _ := strconv.ParseUint(f[1], 10, 64)
				first, _ := strconv.ParseUint(f[2], 10, 64)
				cnt, _ := strconv.ParseUint(f[3], 10, 64)
				acked = append(acked, ackedChunk{id, first, cnt})
				n++
			case "off":
				v, _ := strconv.ParseUint(f[1], 10, 64)
				maxOff = max(maxOff, v)
			case "error":
				t.Fatalf("child: %s", sc.Text())
			}
			// Kill once the child has run a while and acknowledged a good
			// number of chunks (a loaded machine may start it slowly).
			if !killed && n >= 50 && time.Now().After(killAt) {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child ended by itself", round)
		}
		if n < 50 {
			t.Fatalf("round %d: only %d acks", round, n)
		}
	}

	l := openLog(t, dir, Options{MaxSegmentBytes: 64 << 10})
	defer l.Close()
	offs, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	// Every record is there once, in order: the sequence has no gap and no
	// repeat.
	for i, s := range seqs {
		if s != i {
			t.Fatalf("record %d (offset %d) holds seq %d", i, offs[i], s)
		}
	}
	bySeq := make(map[uint64]uint64, len(seqs)) // seq -> offset
	for i, s := range seqs {
		bySeq[uint64(s)] = offs[i]
	}
	// Every acknowledged chunk is there, at its offsets.
	for _, a := range acked {
		for k := uint64(0); k < a.n; k++ {
			off, ok := bySeq[a.first+k]
			if !ok {
				t.Fatalf("acknowledged seq %d (chunk %d) lost; log holds %d records", a.first+k, a.id, len(seqs))
			}
			if off != a.id+k {
				t.Fatalf("acknowledged seq %d at offset %d, acked as %d", a.first+k, off, a.id+k)
			}
		}
	}
	if got, ok := l.QueryOffset("consumer"); !ok || got < maxOff {
		t.Fatalf("stored offset %d (%v), acknowledged up to %d", got, ok, maxOff)
	}
	if st := l.Stats(); st.Segments < 2 {
		t.Fatalf("test did not roll segments: %+v", st)
	}
	t.Logf("%d acknowledged chunks, %d records, %d segments", len(acked), len(seqs), l.Stats().Segments)
}
