package transport

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectorCountsTraffic: after calls between two nodes, the metrics
// count the frames and messages each way, and no more frames than
// messages.
func TestCollectorCountsTraffic(t *testing.T) {
	a, b := grpcNet(t, "a", nil), grpcNet(t, "b", nil)
	must(t, a.SetAddress("b", b.Addr().String()))
	must(t, b.SetAddress("a", a.Addr().String()))
	b.Handle("echo", func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil })
	for range 5 {
		if _, err := a.Call(t.Context(), "b", "echo", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	if err := a.Send(t.Context(), "b", "echo", []byte("y"), func(_ []byte, err error) { sent <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Collector())
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 6 {
		t.Fatalf("metrics gathered: %d, %v; want 6", n, err)
	}
	// Every call's round trip is in the method's histogram (the Send's
	// once its answer came).
	if count, sum := callHistogram(t, reg, "echo"); count != 6 || sum <= 0 {
		t.Fatalf("echo's call durations: %d observations summing to %gs; want 6 and more than 0", count, sum)
	}
	s := a.Stats()
	if s.MessagesSent < 5 || s.MessagesReceived < 5 || s.FramesSent == 0 || s.FramesSent > s.MessagesSent || s.FramesReceived > s.MessagesReceived {
		t.Fatalf("stats after 5 calls: %+v", s)
	}
	// What is exported is what Stats counts (only calls to b happen here,
	// so the counters no longer move).
	s = a.Stats()
	want := strings.NewReader(`# HELP warren_cluster_messages_sent_total Messages (requests, answers, snapshot chunks) sent to other nodes.
# TYPE warren_cluster_messages_sent_total counter
warren_cluster_messages_sent_total ` + itoa(s.MessagesSent) + `
# HELP warren_cluster_frames_received_total Frames received from other nodes.
# TYPE warren_cluster_frames_received_total counter
warren_cluster_frames_received_total ` + itoa(s.FramesReceived) + `
`)
	if err := testutil.GatherAndCompare(reg, want, "warren_cluster_messages_sent_total", "warren_cluster_frames_received_total"); err != nil {
		t.Fatal(err)
	}
}

// callHistogram returns the observations and their sum of method's
// warren_cluster_call_duration_seconds in reg.
func callHistogram(t *testing.T, reg *prometheus.Registry, method string) (uint64, float64) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "warren_cluster_call_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == method {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
