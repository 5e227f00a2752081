package controllers

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/brokerapi"
)

// Issue 4 item 3: per-vhost storage policies reach a running broker through
// its HTTP API, and a policy change rolls no pod.
func TestVhostPoliciesReachRunningBrokerWithoutRestart(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	b := newBroker(ns, "policies", func(b *warrenv1.Broker) {
		b.Spec.Vhosts = []warrenv1.VhostSpec{
			{Name: "orders", DefaultQueueType: "quorum", Storage: warrenv1.VhostStorage{QueueVersion: ptr.To[int32](1), EmbedMessagesBelow: ptr.To[int32](1024)}},
			{Name: "events", DefaultQueueType: "stream", Storage: warrenv1.VhostStorage{StreamReadAhead: ptr.To(false)}},
		}
	})
	createBroker(t, b)

	// Three real nodes form one cluster as pods 0..2, with the config file
	// and the environment the operator made; pod 2 is not ready, so the
	// operator does not ask it, yet it gets the policies: the metadata is
	// the cluster's, and the operator applies them once.
	nodes := startWarrenCluster(t, b, 3)
	sts := statefulSetOf(t, b)
	for i, node := range nodes {
		overview, err := node.get("/api/overview")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("warren@policies-server-%d.policies-nodes.%s", i, ns); overview["node"] != want {
			t.Errorf("node name from the pod's environment: %v, want %s", overview["node"], want)
		}
	}
	createPods(t, b, true, true, false)
	setReady(t, b, 2)

	for _, node := range nodes {
		node.expectVhost(t, "orders", "quorum", map[string]any{"queue-version": 1.0, "embed-messages-below": 1024.0})
		node.expectVhost(t, "events", "stream", map[string]any{"stream-read-ahead": false})
	}
	e := eventFor(t, b, "VhostPolicyApplied", `created vhost "orders"`)
	if !strings.Contains(e.Note, "in the cluster through pod policies-server-0") || strings.Count(e.Note, `vhost "orders"`) != 1 {
		t.Errorf("event %q: want the vhost created once, through one pod", e.Note)
	}
	node := nodes[0]
	template := sts.Spec.Template.DeepCopy()
	generation := sts.Generation

	updateBroker(t, b, func(b *warrenv1.Broker) {
		b.Spec.Vhosts[0].Storage = warrenv1.VhostStorage{QueueVersion: ptr.To[int32](2), EmbedMessagesBelow: ptr.To[int32](8192)}
		b.Spec.Vhosts[1].Storage = warrenv1.VhostStorage{StreamReadAhead: ptr.To(true), StreamReadAheadLimit: ptr.To[int32](65536)}
	})
	for _, node := range nodes {
		node.expectVhost(t, "orders", "quorum", map[string]any{"queue-version": 2.0, "embed-messages-below": 8192.0})
		node.expectVhost(t, "events", "stream", map[string]any{"stream-read-ahead": true, "stream-read-ahead-limit": 65536.0})
	}
	eventFor(t, b, "VhostPolicyApplied", `updated vhost "events"`)

	if err := getObj(sts); err != nil {
		t.Fatal(err)
	}
	if sts.Generation != generation || !reflect.DeepEqual(&sts.Spec.Template, template) {
		t.Errorf("a policy change touched the StatefulSet: generation %d -> %d", generation, sts.Generation)
	}
	eventually(t, 10*time.Second, "status.vhosts", func() error {
		if err := getObj(b); err != nil {
			return err
		}
		if len(b.Status.Vhosts) != 2 || b.Status.Vhosts[1].ObservedGeneration != b.Generation {
			return fmt.Errorf("status.vhosts %+v at generation %d", b.Status.Vhosts, b.Generation)
		}
		return nil
	})
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)

	// A change made behind the operator's back is undone at the next resync.
	if err := nodes[2].api().PutVhost(ctx, brokerapi.Vhost{Name: "orders", DefaultQueueType: "classic", Storage: brokerapi.Storage{QueueVersion: 1}}); err != nil {
		t.Fatal(err)
	}
	node.expectVhost(t, "orders", "quorum", map[string]any{"queue-version": 2.0, "embed-messages-below": 8192.0})
}

// When the broker refuses a policy or cannot be reached, the Broker says so.
func TestVhostPolicyErrorIsReported(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "unreachable", func(b *warrenv1.Broker) {
		b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: "orders"}}
	})
	createBroker(t, b)
	statefulSetOf(t, b)
	createPods(t, b, true) // ready, but nothing answers on its API
	setReady(t, b, 1)
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionFalse, warrenv1.ReasonVhostPolicyError)
	e := eventFor(t, b, warrenv1.ReasonVhostPolicyError, `pod unreachable-server-0: vhost "orders"`)
	if !strings.Contains(e.Note, "connection refused") {
		t.Errorf("event note %q does not say why", e.Note)
	}
}
