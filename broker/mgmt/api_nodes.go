package mgmt

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// listNodes is GET /api/nodes: the node serving the request (Warren nodes
// do not form clusters yet), as monitoring tools read RabbitMQ's.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request, u caller) {
	writeJSON(w, http.StatusOK, []map[string]any{s.nodeJSON()})
}

// getNode is GET /api/nodes/{name}.
func (s *Server) getNode(w http.ResponseWriter, r *http.Request, u caller) {
	if name := pv(r, "name"); name != s.b.NodeName() {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("node '%s' not found", name))
		return
	}
	writeJSON(w, http.StatusOK, s.nodeJSON())
}

// nodeJSON renders the node under RabbitMQ's field names. mem_used is the
// figure the memory alarm compares with mem_limit (the Go heap's live
// objects), and disk_free what the data directory's file system has left
// (-1 if it could not be read), both from the last sample of the
// once-a-second resource watch.
func (s *Server) nodeJSON() map[string]any {
	res := s.b.Resources()
	out := map[string]any{
		"name":                     s.b.NodeName(),
		"type":                     "disc",
		"running":                  true,
		"being_drained":            false,
		"uptime":                   time.Since(res.StartedAt).Milliseconds(),
		"os_pid":                   strconv.Itoa(os.Getpid()),
		"processors":               runtime.NumCPU(),
		"mem_used":                 res.MemUsed,
		"mem_limit":                res.MemLimit,
		"mem_alarm":                res.MemAlarm,
		"mem_calculation_strategy": "allocated",
		"disk_free":                res.DiskFree,
		"disk_free_limit":          res.DiskFreeLimit,
		"disk_free_alarm":          res.DiskAlarm,
		"sockets_used":             len(s.b.Connections()),
		"proc_used":                runtime.NumGoroutine(),
		"partitions":               []string{},
		"rates_mode":               "basic",
	}
	if used, total, ok := fileDescriptors(); ok {
		out["fd_used"], out["fd_total"], out["sockets_total"] = used, total, total
	}
	return out
}

// fileDescriptors reports the process's open file descriptors and its
// limit, where /proc tells (Linux).
func fileDescriptors() (used, total int, ok bool) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, 0, false
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, false
	}
	return len(fds), int(min(lim.Cur, 1<<31-1)), true
}
