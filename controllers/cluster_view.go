package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/brokerapi"
)

// clusterView is the cluster as one ready node reported it through GET
// /api/cluster/status: the source of ClusterAvailable and QuorumHealthy
// and of the scale-down's decisions, never pod readiness.
type clusterView struct {
	status brokerapi.ClusterStatus
	// pod answered; empty when none did.
	pod string
	// err says why no node answered (status is then zero).
	err error
}

// observeCluster asks the Broker's ready pods, in name order, for the
// cluster's status and returns the first answer. A pod named skip is asked
// last (a node being decommissioned knows least about the cluster it is
// leaving). Every member shares the metadata group, so any one answer is
// the cluster's view.
func (r *BrokerReconciler) observeCluster(ctx context.Context, b *warrenv1.Broker, skip string) clusterView {
	pods, err := r.readyPods(ctx, b)
	if err != nil {
		return clusterView{err: err}
	}
	if len(pods) == 0 {
		return clusterView{err: errors.New("no pod is ready")}
	}
	user, pass, err := r.defaultUser(ctx, b)
	if err != nil {
		return clusterView{err: err}
	}
	var order []*corev1.Pod
	var last []*corev1.Pod
	for _, p := range pods {
		if p.Name == skip {
			last = append(last, p)
		} else {
			order = append(order, p)
		}
	}
	var errs []string
	for _, p := range append(order, last...) {
		st, err := r.nodeAPI(b, p, user, pass).ClusterStatus(ctx)
		if err == nil {
			return clusterView{status: st, pod: p.Name}
		}
		errs = append(errs, fmt.Sprintf("pod %s: %v", p.Name, err))
	}
	return clusterView{err: errors.New(strings.Join(errs, "; "))}
}

// nodeAPI is the HTTP API client of one pod with the default user.
func (r *BrokerReconciler) nodeAPI(b *warrenv1.Broker, pod *corev1.Pod, user, pass string) *brokerapi.Client {
	return &brokerapi.Client{BaseURL: r.nodeURL(b, pod), Username: user, Password: pass}
}
