//go:build faults && linux

package faults

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterIdleCPU (run only with WARREN_FAULTS_IDLE=<seconds>): three
// clustered nodes with nothing but the metadata group, idle; the CPU the
// three warren processes use over that many seconds, from utime+stime in
// /proc/<pid>/stat, must stay under 1% of one CPU (issue 22, item 8).
func TestClusterIdleCPU(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("WARREN_FAULTS_IDLE"))
	if secs <= 0 {
		t.Skip("set WARREN_FAULTS_IDLE=<seconds> (e.g. 30) to measure an idle cluster's CPU")
	}
	hz := clockTicks(t)
	c := Start(t, 3, Options{Bin: bin, NodeSettings: ClusterSettings, Settings: []string{"debug.pprof_listen=:6060"}})
	leader := c.WaitLeader()
	time.Sleep(5 * time.Second) // joins, first snapshots and connections settle
	// WARREN_FAULTS_IDLE_PROFILES=<dir>: a CPU profile of each node over the
	// window, <dir>/<node>.pprof (the leader is named in the log).
	if dir := os.Getenv("WARREN_FAULTS_IDLE_PROFILES"); dir != "" {
		t.Logf("profiles in %s; the leader is %s", dir, leader.Name)
		for _, n := range c.Nodes {
			go func() {
				url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", net.JoinHostPort(n.IP.String(), "6060"), secs)
				resp, err := http.Get(url)
				if err != nil {
					t.Logf("profile of %s: %v", n.Name, err)
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				_ = os.WriteFile(filepath.Join(dir, n.Name+".pprof"), b, 0o644)
			}()
		}
	}
	before := make([]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		before[i] = cpuTicks(t, n.Pid())
	}
	begin := time.Now()
	time.Sleep(time.Duration(secs) * time.Second)
	elapsed := time.Since(begin)
	var total float64
	var per []string
	for i, n := range c.Nodes {
		used := float64(cpuTicks(t, n.Pid())-before[i]) / hz
		total += used
		per = append(per, fmt.Sprintf("%s %.2f%%", n.Name, used/elapsed.Seconds()*100))
	}
	pct := total / elapsed.Seconds() * 100
	t.Logf("idle cluster of 3 (metadata group only) over %v: %.2f%% of one CPU (%s)", elapsed.Round(time.Second), pct, strings.Join(per, ", "))
	if pct >= 1 {
		t.Errorf("an idle cluster of three uses %.2f%% of one CPU, want under 1%%", pct)
	}
}

// cpuTicks is utime+stime of process pid, in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (which may hold spaces) in parentheses:
	// state is field 3, utime 14, stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return ut + st
}

// clockTicks is the kernel's USER_HZ (getconf CLK_TCK).
func clockTicks(t *testing.T) float64 {
	t.Helper()
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	hz, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || hz <= 0 {
		return 100
	}
	return hz
}
