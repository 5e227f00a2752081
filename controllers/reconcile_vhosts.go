package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/brokerapi"
	"github.com/warrenmq/warren/controllers/resource"
)

// notReadyRetry is how soon vhost policies are tried again while some node
// is not ready to take them.
const notReadyRetry = 10 * time.Second

// reconcileVhosts makes every vhost of spec.vhosts exist in the cluster
// with the storage policy and default queue type written in the spec,
// through the HTTP API of one ready node and the default user's
// credentials. The metadata is the cluster's (replicated by Raft), so one
// node's answer is every node's: the policy is applied once, to the
// cluster, and the next ready pod is asked only when one cannot be
// reached. A running node applies a policy at once: nothing here touches
// the StatefulSet, so no pod restarts. Vhosts are compared again every
// PolicyResync, so a change made behind the operator's back is undone.
func (r *BrokerReconciler) reconcileVhosts(ctx context.Context, b *warrenv1.Broker, out *outcome) (ctrl.Result, error) {
	resync := r.PolicyResync
	if resync == 0 {
		resync = 5 * time.Minute
	}
	if len(b.Spec.Vhosts) == 0 {
		b.Status.Vhosts = nil
		return ctrl.Result{}, nil
	}
	pods, err := r.readyPods(ctx, b)
	if err != nil {
		return ctrl.Result{}, out.fail(warrenv1.ReasonChildError, err)
	}
	if len(pods) == 0 {
		return ctrl.Result{RequeueAfter: notReadyRetry}, nil // nothing serves the API yet
	}
	user, pass, err := r.defaultUser(ctx, b)
	if err != nil {
		return ctrl.Result{}, out.fail(warrenv1.ReasonVhostPolicyError, err)
	}
	var errs []error
	for _, pod := range pods {
		applied, changes, err := applyVhosts(ctx, r.nodeAPI(b, pod, user, pass), b)
		b.Status.Vhosts = applied
		if len(changes) > 0 {
			// One event per reconcile lists every change: events of one
			// object with the same reason are merged into a series that
			// keeps the first note.
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "VhostPolicyApplied", "ApplyVhost", "%s, in the cluster through pod %s (no restart)",
				strings.Join(changes, "; "), pod.Name)
		}
		if err == nil {
			return ctrl.Result{RequeueAfter: resync}, nil
		}
		errs = append(errs, fmt.Errorf("pod %s: %w", pod.Name, err))
		if len(changes) > 0 || !unreachable(err) {
			break // the node answered: another would answer the same
		}
	}
	err = errors.Join(errs...)
	r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, warrenv1.ReasonVhostPolicyError, "ApplyVhost", "%v", err)
	return ctrl.Result{}, out.fail(warrenv1.ReasonVhostPolicyError, err)
}

// applyVhosts applies every vhost of the spec through api and returns
// those applied (in spec order, up to the first error) and what changed.
func applyVhosts(ctx context.Context, api *brokerapi.Client, b *warrenv1.Broker) ([]warrenv1.VhostStatus, []string, error) {
	applied := make([]warrenv1.VhostStatus, 0, len(b.Spec.Vhosts))
	var changes []string
	for _, v := range b.Spec.Vhosts {
		want := desiredVhost(v)
		verb, err := applyVhost(ctx, api, want)
		if err != nil {
			return applied, changes, err
		}
		if verb != "" {
			changes = append(changes, fmt.Sprintf("%s vhost %q: default queue type %s, storage %s",
				verb, v.Name, want.DefaultQueueType, describeStorage(want.Storage)))
		}
		applied = append(applied, warrenv1.VhostStatus{Name: v.Name, ObservedGeneration: b.Generation})
	}
	return applied, changes, nil
}

// unreachable reports whether err is a failure to reach the node at all
// (not an answer from it), so another node may be tried.
func unreachable(err error) bool {
	var netErr net.Error
	var opErr *net.OpError
	return errors.As(err, &netErr) || errors.As(err, &opErr)
}

// readyPods lists the Broker's pods that pass their readiness probe, by name.
func (r *BrokerReconciler) readyPods(ctx context.Context, b *warrenv1.Broker) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(b.Namespace), client.MatchingLabels(resource.SelectorLabels(b))); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var ready []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, p)
			}
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].Name < ready[j].Name })
	return ready, nil
}

// applyVhost makes one node's vhost match want and says what it did:
// "created", "updated" or "" (already right).
func applyVhost(ctx context.Context, api *brokerapi.Client, want brokerapi.Vhost) (string, error) {
	have, err := api.Vhost(ctx, want.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, brokerapi.ErrNotFound) {
		return "", fmt.Errorf("vhost %q: %w", want.Name, err)
	}
	if exists && have.Storage.Equal(want.Storage) && have.DefaultQueueType == want.DefaultQueueType {
		return "", nil
	}
	if err := api.PutVhost(ctx, want); err != nil {
		return "", fmt.Errorf("vhost %q: %w", want.Name, err)
	}
	if !exists {
		return "created", nil
	}
	return "updated", nil
}

// desiredVhost maps the spec to the API's names; unset fields are zero,
// which the broker reads as its node defaults.
func desiredVhost(v warrenv1.VhostSpec) brokerapi.Vhost {
	out := brokerapi.Vhost{Name: v.Name, DefaultQueueType: v.DefaultQueueType}
	if out.DefaultQueueType == "" {
		out.DefaultQueueType = "classic"
	}
	s := v.Storage
	if s.QueueVersion != nil {
		out.Storage.QueueVersion = int(*s.QueueVersion)
	}
	if s.EmbedMessagesBelow != nil {
		out.Storage.EmbedMessagesBelow = int(*s.EmbedMessagesBelow)
	}
	if s.StreamReadAhead != nil {
		ra := *s.StreamReadAhead
		out.Storage.StreamReadAhead = &ra
	}
	if s.StreamReadAheadLimit != nil {
		out.Storage.StreamReadAheadLimit = int(*s.StreamReadAheadLimit)
	}
	return out
}

func describeStorage(s brokerapi.Storage) string {
	f := func(n int) string {
		if n == 0 {
			return "default"
		}
		return fmt.Sprint(n)
	}
	ra := "default"
	if s.StreamReadAhead != nil {
		ra = fmt.Sprint(*s.StreamReadAhead)
	}
	return fmt.Sprintf("queue-version=%s embed-messages-below=%s stream-read-ahead=%s stream-read-ahead-limit=%s",
		f(s.QueueVersion), f(s.EmbedMessagesBelow), ra, f(s.StreamReadAheadLimit))
}

// defaultUser reads the default user's credentials from the Broker's Secret.
func (r *BrokerReconciler) defaultUser(ctx context.Context, b *warrenv1.Broker) (string, string, error) {
	sec := &corev1.Secret{}
	key := types.NamespacedName{Namespace: b.Namespace, Name: resource.DefaultUserSecretName(b)}
	if err := r.Get(ctx, key, sec); err != nil {
		return "", "", fmt.Errorf("default user Secret %s: %w", key.Name, err)
	}
	user, pass := string(sec.Data[resource.KeyUsername]), string(sec.Data[resource.KeyPassword])
	if user == "" || pass == "" {
		return "", "", fmt.Errorf("default user Secret %s has no %s or %s", key.Name, resource.KeyUsername, resource.KeyPassword)
	}
	return user, pass, nil
}
