package framebuf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// pieces hands out its bytes n at a time, then err (io.EOF when nil).
type pieces struct {
	b    []byte
	n    int
	err  error
	gave int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		return 0, io.EOF
	}
	m := copy(b[:min(len(b), p.n)], p.b)
	p.b = p.b[m:]
	p.gave += m
	return m, nil
}

type empty struct{}

func (empty) Read([]byte) (int, error) { return 0, nil }

func TestFill(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	tests := []struct {
		name    string
		rd      io.Reader
		fill    int
		wantErr error
	}{
		{"whole, in small pieces", &pieces{b: data, n: 7}, len(data), nil},
		{"nothing at all", &pieces{}, 4, io.EOF},
		{"cut short", &pieces{b: data[:10], n: 3}, 100, io.ErrUnexpectedEOF},
		{"declares far more than arrives", &pieces{b: data[:50], n: 50}, 1 << 30, io.ErrUnexpectedEOF},
		{"a reader error after a part", &pieces{b: data[:5], n: 5, err: os.ErrDeadlineExceeded}, 10, os.ErrDeadlineExceeded},
		{"a reader that never progresses", empty{}, 1, io.ErrNoProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.rd, 64)
			err := b.Fill(tt.fill)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Fill(%d) = %v, want %v", tt.fill, err, tt.wantErr)
			}
			if p, ok := tt.rd.(*pieces); ok && b.Size() > 64 && b.Size() > 2*p.gave {
				t.Fatalf("buffer of %d bytes after %d arrived", b.Size(), p.gave)
			}
			if err == nil && !bytes.Equal(b.Next(tt.fill), data[:tt.fill]) {
				t.Fatal("Next returned other bytes than arrived")
			}
		})
	}
}

// Bytes already read stay buffered after an error, so a read that timed
// out can be retried; consumed bytes are compacted away.
func TestFillRetryAndCompact(t *testing.T) {
	p := &pieces{b: []byte("abcdef"), n: 4, err: os.ErrDeadlineExceeded}
	b := New(p, 8)
	if err := b.Fill(8); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Fill past the data: %v, want the deadline", err)
	}
	if got := string(b.Unread()); got != "abcdef" {
		t.Fatalf("buffered after the error: %q", got)
	}
	if got := string(b.Next(2)); got != "ab" {
		t.Fatalf("Next(2) = %q", got)
	}
	p.b, p.err = []byte("ghij"), nil
	if err := b.Fill(8); err != nil {
		t.Fatal(err)
	}
	if got := string(b.Next(8)); got != "cdefghij" || b.Size() != 8 {
		t.Fatalf("after compaction: %q in a buffer of %d, want cdefghij in 8", got, b.Size())
	}
}
