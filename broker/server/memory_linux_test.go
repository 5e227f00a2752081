package server

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestSystemMemory checks the memory alarm's base figure against the
// kernel's own MemTotal.
func TestSystemMemory(t *testing.T) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatalf("open /proc/meminfo: %v", err)
	}
	defer f.Close()
	var totalKiB int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			totalKiB, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse MemTotal %q: %v", rest, err)
			}
		}
	}
	if totalKiB == 0 {
		t.Fatal("no MemTotal in /proc/meminfo")
	}
	got, want := systemMemory(), totalKiB*1024
	if diff := got - want; diff < -want/100 || diff > want/100 {
		t.Errorf("systemMemory() = %d bytes, /proc/meminfo MemTotal = %d bytes", got, want)
	}
}
