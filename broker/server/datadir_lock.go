package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the file in the data directory a running node holds an
// exclusive flock on; it names the holder (pid, host, node).
const lockFile = "lock"

// ErrDataDirInUse matches (errors.Is) New's error when another process
// holds the data directory.
var ErrDataDirInUse = errors.New("data directory is in use")

// inUseError names the holder of a locked data directory.
type inUseError string

func (e inUseError) Error() string        { return string(e) }
func (e inUseError) Is(target error) bool { return target == ErrDataDirInUse }

// lockDataDir takes an exclusive, non-blocking flock on dir/lock and
// writes the holder's pid, host and node name into it. The kernel
// releases the lock when the process exits, however it exits (kill -9
// included), so a stale file never blocks a new node. Another holder's
// lock fails with "data directory <dir> is in use by pid N (host h, node n)".
//
// flock is advisory and per open file description: it works between
// processes on one host (Linux and macOS); on NFS it depends on the
// server's lock support.
func lockDataDir(dir, node string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("server: open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if abs, err := filepath.Abs(dir); err == nil {
				dir = abs
			}
			return nil, inUseError("server: data directory " + dir + " is in use by " + describeHolder(holder))
		}
		return nil, fmt.Errorf("server: lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("pid %d\nhost %s\nnode %s\n", os.Getpid(), host, node)
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("server: write %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(info), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("server: write %s: %w", path, err)
	}
	return f, nil
}

// describeHolder renders a lock file's content as "pid N (host h, node n)";
// a file not yet written (the holder is starting) gives "another process".
func describeHolder(data []byte) string {
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			fields[k] = v
		}
	}
	pid, err := strconv.Atoi(fields["pid"])
	if err != nil {
		return "another process"
	}
	return fmt.Sprintf("pid %d (host %s, node %s)", pid, fields["host"], fields["node"])
}
