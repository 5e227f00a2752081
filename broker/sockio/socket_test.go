package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/loopback"
)

func TestNewRefusesConnectionsWithoutDescriptor(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := New(a, BusyPoll{}); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("New(net.Pipe) = %v, want ErrNotSocket", err)
	}
}

func TestReadAndWriteNow(t *testing.T) {
	tests := []struct {
		name string
		poll BusyPoll
	}{
		{"no busy-poll", BusyPoll{}},
		{"busy-poll", BusyPoll{For: time.Millisecond, Spinners: NewSpinners(1), Want: func() bool { return true }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli := loopback.Pair(t)
			s, err := New(srv, tt.poll)
			if err != nil {
				t.Fatal(err)
			}
			msg := bytes.Repeat([]byte("warren"), 1000)
			n, err := s.WriteNow(msg)
			if err != nil || n != len(msg) {
				t.Fatalf("WriteNow = %d, %v; want %d, nil", n, err, len(msg))
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(cli, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("peer read %v, equal %v", err, bytes.Equal(got, msg))
			}
			// Data that comes while the reader waits (spinning or in the
			// poller) is read.
			go func() {
				time.Sleep(20 * time.Millisecond)
				_, _ = cli.Write([]byte("ack"))
			}()
			buf := make([]byte, 16)
			n, err = s.Read(buf)
			if err != nil || string(buf[:n]) != "ack" {
				t.Fatalf("Read = %q, %v; want \"ack\"", buf[:n], err)
			}
			cli.Close()
			if n, err := s.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("Read after the peer closed = %d, %v; want 0, EOF", n, err)
			}
		})
	}
}

func TestWriteNowStopsWhenTheSocketIsFull(t *testing.T) {
	srv, _ := loopback.Pair(t) // the peer never reads
	s, err := New(srv, BusyPoll{})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 64<<20)
	n, err := s.WriteNow(big)
	if err != nil {
		t.Fatalf("WriteNow on a full socket: %v", err)
	}
	if n == 0 || n >= len(big) {
		t.Fatalf("WriteNow wrote %d of %d bytes to a peer that never reads; want some, not all", n, len(big))
	}
}

func TestReadHonoursDeadline(t *testing.T) {
	srv, _ := loopback.Pair(t)
	s, err := New(srv, BusyPoll{For: time.Millisecond, Spinners: NewSpinners(1), Want: func() bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := s.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline = %v, want a timeout", err)
	}
}

func TestBusyPollIsBounded(t *testing.T) {
	tests := []struct {
		name        string
		want        bool
		budget      int
		wantTimeout bool
	}{
		{"spins and times out", true, 1, true},
		{"no reply due: no spin", false, 1, false},
		{"budget taken: no spin", true, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli := loopback.Pair(t)
			spinners := NewSpinners(1)
			if tt.budget == 0 {
				spinners.busy.Store(1) // another socket spins
			}
			var timedOut atomic.Int32
			s, err := New(srv, BusyPoll{
				For:      5 * time.Millisecond,
				Spinners: spinners,
				Want:     func() bool { return tt.want },
				TimedOut: func() { timedOut.Add(1) },
			})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				time.Sleep(50 * time.Millisecond)
				_, _ = cli.Write([]byte("x"))
			}()
			buf := make([]byte, 4)
			if n, err := s.Read(buf); err != nil || n != 1 {
				t.Fatalf("Read = %d, %v", n, err)
			}
			if got := timedOut.Load() > 0; got != tt.wantTimeout {
				t.Fatalf("spin timed out: %v, want %v", got, tt.wantTimeout)
			}
			if b := spinners.busy.Load(); b != int32(1-tt.budget) {
				t.Fatalf("spinners busy after Read = %d, want %d", b, 1-tt.budget)
			}
		})
	}
}
