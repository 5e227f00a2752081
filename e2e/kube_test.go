//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// cluster is the cluster under test.
type cluster struct {
	c  client.Client
	cs *kubernetes.Clientset
}

func newCluster() (*cluster, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := warrenv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return &cluster{c: c, cs: cs}, nil
}

// eventually calls f every interval until it returns nil or timeout passes;
// then the test fails with f's last error. progress, when not nil, is
// logged whenever it changes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		err := f()
		if err == nil {
			return
		}
		if err.Error() != last {
			t.Logf("waiting for %s: %v", what, err)
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// podLogs returns a container's log (previous: of its last terminated run).
func (k *cluster) podLogs(ctx context.Context, ns, pod, container string, previous bool) (string, error) {
	var tail *int64
	if previous {
		n := int64(200)
		tail = &n
	}
	rc, err := k.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: tail}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4<<20))
	return string(b), err
}

// dump prints what a user would look at when something fails: every pod
// of the namespaces with its containers' states and last log lines (and
// those of the previous run after a restart), then the events in time order.
func (k *cluster) dump(w io.Writer, namespaces ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range namespaces {
		fmt.Fprintf(w, "\n===== namespace %s: pods =====\n", ns)
		pods := &corev1.PodList{}
		if err := k.c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			fmt.Fprintf(w, "list pods: %v\n", err)
		}
		for _, p := range pods.Items {
			fmt.Fprintf(w, "--- pod %s phase=%s node=%s ip=%s\n", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
			for _, c := range p.Status.Conditions {
				fmt.Fprintf(w, "    condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
			statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
			for _, cs := range statuses {
				fmt.Fprintf(w, "    container %s ready=%v restarts=%d state=%s\n", cs.Name, cs.Ready, cs.RestartCount, containerState(cs.State))
				if cs.RestartCount > 0 {
					if s, err := k.podLogs(ctx, ns, p.Name, cs.Name, true); err == nil {
						fmt.Fprintf(w, "    --- previous log of %s/%s:\n%s", p.Name, cs.Name, indent(tailLines(s, 100)))
					}
				}
				s, err := k.podLogs(ctx, ns, p.Name, cs.Name, false)
				if err != nil {
					fmt.Fprintf(w, "    (log of %s: %v)\n", cs.Name, err)
					continue
				}
				fmt.Fprintf(w, "    --- log of %s/%s (last 100 lines):\n%s", p.Name, cs.Name, indent(tailLines(s, 100)))
			}
		}
		fmt.Fprintf(w, "\n===== namespace %s: events =====\n", ns)
		events := &corev1.EventList{}
		if err := k.c.List(ctx, events, client.InNamespace(ns)); err != nil {
			fmt.Fprintf(w, "list events: %v\n", err)
		}
		sort.Slice(events.Items, func(i, j int) bool { return eventTime(events.Items[i]).Before(eventTime(events.Items[j])) })
		for _, e := range events.Items {
			fmt.Fprintf(w, "%s %-7s %-22s %s/%s: %s\n", eventTime(e).Format("15:04:05"), e.Type, e.Reason,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, strings.TrimSpace(e.Message))
		}
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.Format("15:04:05")
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason + " " + s.Waiting.Message
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: exit %d %s %s", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Message)
	}
	return "unknown"
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func indent(s string) string {
	var b bytes.Buffer
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		b.WriteString("      ")
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
