package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// methodNode is the node-level call that answers a member's
// GET /api/nodes entry.
const methodNode = "mgmt.node"

// listNodes is GET /api/nodes: every member of the cluster, each as its own
// node reports it (asked over the cluster link); a member that does not
// answer is listed with running false, as RabbitMQ lists a stopped node.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request, u caller) {
	st, err := s.b.ClusterStatus(r.Context())
	if err != nil {
		writeClusterError(w, err)
		return
	}
	out := make([]map[string]any, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		out = append(out, s.memberJSON(r.Context(), n))
	}
	writeJSON(w, http.StatusOK, out)
}

// getNode is GET /api/nodes/{name}.
func (s *Server) getNode(w http.ResponseWriter, r *http.Request, u caller) {
	st, err := s.b.ClusterStatus(r.Context())
	if err != nil {
		writeClusterError(w, err)
		return
	}
	name := pv(r, "name")
	for _, n := range st.Nodes {
		if n.Name == name {
			writeJSON(w, http.StatusOK, s.memberJSON(r.Context(), n))
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("node '%s' not found", name))
}

// memberJSON is a member's /api/nodes entry: this node's own, another's
// asked of it (2 s at most), or a stopped node's.
func (s *Server) memberJSON(ctx context.Context, n ClusterNode) map[string]any {
	if n.Name == s.b.NodeName() {
		return s.nodeJSON()
	}
	if n.Running {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		data, err := s.b.CallNode(cctx, n.Name, methodNode, nil)
		cancel()
		var out map[string]any
		if err == nil && json.Unmarshal(data, &out) == nil && out["name"] == n.Name {
			return out
		}
	}
	return map[string]any{"name": n.Name, "type": "disc", "running": false, "being_drained": n.BeingDrained, "partitions": []string{}}
}

// answerNode answers another member's methodNode call.
func (s *Server) answerNode(ctx context.Context, req []byte) ([]byte, error) {
	return json.Marshal(s.nodeJSON())
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
		"being_drained":            s.b.Draining(),
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

// memoryBreakdown is RabbitMQ's node memory breakdown (rabbit_vm:memory)
// filled from the Go runtime: queue_procs is what the queues hold,
// other_proc the rest of the live heap, other_system the runtime's own
// (stacks, GC metadata, buffers), allocated_unused the heap the runtime
// holds and has not handed out, binary, code and the Erlang-specific
// tables 0. total.rss is the process's resident set (from /proc), or
// what the runtime obtained from the OS where /proc is missing.
// ReadMemStats stops the world for a moment: only this request calls it.
func memoryBreakdown(queues int64) map[string]any {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := int64(ms.HeapAlloc)
	queues = min(queues, heap)
	system := int64(ms.Sys - ms.HeapSys)
	unused := int64(ms.HeapIdle-ms.HeapReleased) + int64(ms.HeapInuse-ms.HeapAlloc)
	rss := residentSet()
	if rss <= 0 {
		rss = int64(ms.Sys - ms.HeapReleased)
	}
	out := map[string]any{"queue_procs": queues, "other_proc": heap - queues, "other_system": system, "allocated_unused": unused,
		"strategy": "allocated", "total": map[string]any{"rss": rss, "allocated": int64(ms.Sys - ms.HeapReleased), "erlang": heap + system}}
	for _, k := range []string{"connection_readers", "connection_writers", "connection_channels", "connection_other",
		"quorum_queue_procs", "stream_queue_procs", "stream_queue_replica_reader_procs", "stream_queue_coordinator_procs",
		"plugins", "metadata_store", "metrics", "mgmt_db", "mnesia", "quorum_ets", "metadata_store_ets", "other_ets",
		"binary", "msg_index", "code", "atom", "reserved_unallocated"} {
		out[k] = 0
	}
	return out
}

// residentSet reads the process's resident set size from /proc (Linux);
// 0 elsewhere.
func residentSet() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(data), &size, &resident); err != nil {
		return 0
	}
	return resident * int64(os.Getpagesize())
}
