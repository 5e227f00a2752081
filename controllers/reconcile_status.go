package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// outcome collects what went wrong in one reconcile; the first failure
// becomes ReconcileSuccess's reason and message.
type outcome struct {
	reason  string
	message string
}

// set records a failure that is not a Go error (a refused change, a pause).
func (o *outcome) set(reason, message string) {
	if o.reason == "" {
		o.reason, o.message = reason, message
	}
}

// fail records err and returns it, so the reconcile is retried with backoff.
func (o *outcome) fail(reason string, err error) error {
	o.set(reason, err.Error())
	return err
}

// updateStatus writes what the operator observed: replica counts and
// AllReplicasReady from the StatefulSet (the kubelets' readiness probes on
// /readyz), ClusterAvailable and QuorumHealthy from the cluster's own state
// (GET /api/cluster/status on a ready pod: condition_*.go), Ready from
// both, endpoints and the default-user Secret.
// Each condition change is an event. Nothing is written when nothing
// changed.
func (r *BrokerReconciler) updateStatus(ctx context.Context, b *warrenv1.Broker, out *outcome) error {
	before := b.DeepCopy()
	// b.Status.Vhosts may already be set by this reconcile; compare against
	// what the API server holds.
	server := &warrenv1.Broker{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(b), server); err != nil {
		return client.IgnoreNotFound(err)
	}
	before.Status = server.Status

	sts, err := r.currentStatefulSet(ctx, b)
	if err != nil {
		return err
	}
	nodes := resource.Replicas(b)
	var ready, current int32
	if sts != nil {
		if sts.Spec.Replicas != nil {
			nodes = *sts.Spec.Replicas
		}
		ready, current = sts.Status.ReadyReplicas, sts.Status.Replicas
	}
	st := &b.Status
	st.ObservedGeneration = b.Generation
	st.Replicas = current
	st.ReadyReplicas = ready
	host := resource.ClientHost(b)
	st.Endpoints = &warrenv1.BrokerEndpoints{
		AMQP:    fmt.Sprintf("amqp://%s:%d", host, resource.PortAMQP),
		Stream:  fmt.Sprintf("rabbitmq-stream://%s:%d", host, resource.PortStream),
		HTTP:    fmt.Sprintf("http://%s:%d", host, resource.PortHTTP),
		Metrics: fmt.Sprintf("http://%s:%d/metrics", host, resource.PortPrometheus),
	}
	if b.Spec.TLS != nil {
		st.Endpoints.AMQPS = fmt.Sprintf("amqps://%s:%d", host, resource.PortAMQPS)
		st.Endpoints.StreamTLS = fmt.Sprintf("rabbitmq-stream+tls://%s:%d", host, resource.PortStreamTLS)
	}
	st.DefaultUser = &warrenv1.DefaultUserStatus{SecretName: resource.DefaultUserSecretName(b), ServiceName: resource.ClientServiceName(b)}

	gen := b.Generation
	cond := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	allReady := ready >= nodes && nodes > 0
	cond(warrenv1.ConditionAllReplicasReady, allReady, pick(allReady, "AllPodsReady", "NotAllPodsReady"),
		fmt.Sprintf("%d of %d nodes ready", ready, nodes))
	view := r.observeCluster(ctx, b, "")
	available, reason, msg := clusterAvailable(b, view)
	cond(warrenv1.ConditionClusterAvailable, available, reason, msg)
	quorum, reason, msg := quorumHealthy(b, nodes, view)
	cond(warrenv1.ConditionQuorumHealthy, quorum, reason, msg)
	readyMsg := fmt.Sprintf("%d of %d nodes ready", ready, nodes)
	if allReady && !available {
		readyMsg = "every pod is ready but the cluster is not available (see ClusterAvailable)"
	}
	cond(warrenv1.ConditionReady, allReady && available, pick(allReady && available, "Ready", "NotReady"),
		pick(allReady && available, "every node is ready and the cluster serves clients", readyMsg))
	if out.reason == "" {
		cond(warrenv1.ConditionReconcileSuccess, true, warrenv1.ReasonSuccess, "the spec is applied")
	} else {
		cond(warrenv1.ConditionReconcileSuccess, false, out.reason, out.message)
	}

	r.conditionEvents(b, before.Status.Conditions, st.Conditions)
	if equality.Semantic.DeepEqual(before.Status, b.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, b, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("update status: %w", client.IgnoreNotFound(err))
	}
	return nil
}

// conditionEvents emits one event per condition that changed status.
func (r *BrokerReconciler) conditionEvents(b *warrenv1.Broker, old, cur []metav1.Condition) {
	for _, c := range cur {
		prev := meta.FindStatusCondition(old, c.Type)
		if prev != nil && prev.Status == c.Status {
			continue
		}
		if prev == nil && c.Status == metav1.ConditionFalse && c.Type != warrenv1.ConditionReconcileSuccess {
			continue // a new Broker is not ready yet: no news
		}
		typ := corev1.EventTypeNormal
		if c.Status == metav1.ConditionFalse {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(b, nil, typ, c.Reason, "Status", "%s is %s: %s", c.Type, c.Status, c.Message)
	}
}

func pick(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
