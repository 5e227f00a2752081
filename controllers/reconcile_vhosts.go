package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/brokerapi"
	"github.com/warrenmq/warren/controllers/resource"
)

// notReadyRetry is how soon vhost policies are tried again while no node is
// ready to take them.
const notReadyRetry = 10 * time.Second

// reconcileVhosts makes every vhost of spec.vhosts exist in the cluster
// with the storage policy and default queue type written in the spec,
// through the broker's HTTP API and the default user's credentials. A
// running node applies a policy at once: nothing here touches the
// StatefulSet, so no pod restarts. A vhost that already matches is left
// alone; each change is an event. Vhosts are compared again every
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
	sts, err := r.currentStatefulSet(ctx, b)
	if err != nil {
		return ctrl.Result{}, out.fail(warrenv1.ReasonChildError, err)
	}
	if sts == nil || sts.Status.ReadyReplicas == 0 {
		return ctrl.Result{RequeueAfter: notReadyRetry}, nil // nothing serves the API yet
	}
	api, err := r.brokerClient(ctx, b)
	if err != nil {
		return ctrl.Result{}, out.fail(warrenv1.ReasonVhostPolicyError, err)
	}
	applied := make([]warrenv1.VhostStatus, 0, len(b.Spec.Vhosts))
	// One event per reconcile lists every change: events of one object with
	// the same reason are merged into a series that keeps the first note.
	var changes []string
	defer func() {
		if len(changes) > 0 {
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "VhostPolicyApplied", "ApplyVhost", "%s (no restart)", strings.Join(changes, "; "))
		}
	}()
	for _, v := range b.Spec.Vhosts {
		change, err := r.applyVhost(ctx, api, v)
		if err != nil {
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, warrenv1.ReasonVhostPolicyError, "ApplyVhost", "%v", err)
			b.Status.Vhosts = applied
			return ctrl.Result{}, out.fail(warrenv1.ReasonVhostPolicyError, err)
		}
		if change != "" {
			changes = append(changes, change)
		}
		applied = append(applied, warrenv1.VhostStatus{Name: v.Name, ObservedGeneration: b.Generation})
	}
	b.Status.Vhosts = applied
	return ctrl.Result{RequeueAfter: resync}, nil
}

// applyVhost makes one vhost match the spec and describes the change it
// made ("" when there was none).
func (r *BrokerReconciler) applyVhost(ctx context.Context, api *brokerapi.Client, v warrenv1.VhostSpec) (string, error) {
	want := desiredVhost(v)
	have, err := api.Vhost(ctx, v.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, brokerapi.ErrNotFound) {
		return "", fmt.Errorf("vhost %q: %w", v.Name, err)
	}
	if exists && have.Storage.Equal(want.Storage) && have.DefaultQueueType == want.DefaultQueueType {
		return "", nil
	}
	if err := api.PutVhost(ctx, want); err != nil {
		return "", fmt.Errorf("vhost %q: %w", v.Name, err)
	}
	verb := "updated"
	if !exists {
		verb = "created"
	}
	return fmt.Sprintf("%s vhost %q: default queue type %s, storage %s", verb, v.Name, want.DefaultQueueType, describeStorage(want.Storage)), nil
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

// brokerClient authenticates as the default user of the Broker's Secret.
func (r *BrokerReconciler) brokerClient(ctx context.Context, b *warrenv1.Broker) (*brokerapi.Client, error) {
	sec := &corev1.Secret{}
	key := types.NamespacedName{Namespace: b.Namespace, Name: resource.DefaultUserSecretName(b)}
	if err := r.Get(ctx, key, sec); err != nil {
		return nil, fmt.Errorf("default user Secret %s: %w", key.Name, err)
	}
	user, pass := string(sec.Data[resource.KeyUsername]), string(sec.Data[resource.KeyPassword])
	if user == "" || pass == "" {
		return nil, fmt.Errorf("default user Secret %s has no %s or %s", key.Name, resource.KeyUsername, resource.KeyPassword)
	}
	return &brokerapi.Client{BaseURL: r.brokerURL(b), Username: user, Password: pass}, nil
}
