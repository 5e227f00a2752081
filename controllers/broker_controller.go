package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// DefaultBrokerImage is the image a Broker runs when it names none and the
// operator was given no other default.
const DefaultBrokerImage = "docker.io/warrenmq/warren:latest"

// BrokerReconciler reconciles Broker objects.
type BrokerReconciler struct {
	client.Client
	// Recorder emits an event for every outcome a user may care about.
	Recorder events.EventRecorder
	// DefaultImage is the broker image used when spec.image is empty.
	DefaultImage string
	// NodeURL returns the HTTP API root of one broker pod; nil means the
	// pod's IP (http://<podIP>:15672). An operator running outside the
	// cluster, or a test, points it elsewhere.
	NodeURL func(b *warrenv1.Broker, pod *corev1.Pod) string
	// PolicyResync is how often vhost policies are compared with the
	// cluster's even when nothing changed (drift correction); 0 means 5 min.
	PolicyResync time.Duration
	// ClusterResync is how often the cluster's status is read again for
	// the conditions when nothing in Kubernetes changed (a node's peers may
	// lose it while its pod stays ready); 0 means 30 s.
	ClusterResync time.Duration
}

// +kubebuilder:rbac:groups=warrenmq.io,resources=brokers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=warrenmq.io,resources=brokers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=warrenmq.io,resources=brokers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;secrets;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile brings one Broker's children and cluster in line with its spec
// and reports what it found in its status.
func (r *BrokerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &warrenv1.Broker{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, b)
	}
	if added, err := r.ensureFinalizer(ctx, b); err != nil || added {
		return ctrl.Result{Requeue: added}, err
	}

	out := &outcome{}
	var result ctrl.Result
	var err error
	if r.paused(b) {
		r.reportPaused(b, out)
	} else {
		result, err = r.reconcileSpec(ctx, b, out)
	}
	if errors.Is(err, errChildConflict) {
		// Retry with fresh objects, reporting nothing: an update that lost
		// a race is neither an error event nor a failed reconcile.
		log.FromContext(ctx).V(1).Info("child changed meanwhile, retrying", "err", err)
		return ctrl.Result{Requeue: true}, nil
	}
	if serr := r.updateStatus(ctx, b, out); serr != nil && err == nil {
		err = serr
	}
	resync := r.ClusterResync
	if resync == 0 {
		resync = 30 * time.Second
	}
	if result.RequeueAfter == 0 || result.RequeueAfter > resync {
		result.RequeueAfter = resync
	}
	return result, err
}

// reconcileSpec runs the concerns that change the cluster.
func (r *BrokerReconciler) reconcileSpec(ctx context.Context, b *warrenv1.Broker, out *outcome) (ctrl.Result, error) {
	sts, err := r.currentStatefulSet(ctx, b)
	if err != nil {
		return ctrl.Result{}, out.fail(warrenv1.ReasonChildError, err)
	}
	replicas, scaleResult := r.scaleDown(ctx, b, sts, out)
	if err := r.reconcileChildren(ctx, b, replicas, out); err != nil {
		return ctrl.Result{}, err
	}
	if out.reason == warrenv1.ReasonInvalidSpec {
		// Nothing to retry until the user fixes the spec (a new generation).
		return ctrl.Result{}, nil
	}
	if err := r.reconcilePVCs(ctx, b, out); err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.reconcileVhosts(ctx, b, out)
	if scaleResult.RequeueAfter > 0 && (result.RequeueAfter == 0 || scaleResult.RequeueAfter < result.RequeueAfter) {
		result.RequeueAfter = scaleResult.RequeueAfter
	}
	return result, err
}

func (r *BrokerReconciler) nodeURL(b *warrenv1.Broker, pod *corev1.Pod) string {
	if r.NodeURL != nil {
		return r.NodeURL(b, pod)
	}
	host := pod.Status.PodIP
	if host == "" {
		host = fmt.Sprintf("%s.%s", pod.Name, resource.HeadlessHost(b))
	}
	return fmt.Sprintf("http://%s", net.JoinHostPort(host, fmt.Sprint(resource.PortHTTP)))
}

// SetupWithManager registers the reconciler: it watches Brokers and the
// children they own.
func (r *BrokerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.DefaultImage == "" {
		r.DefaultImage = DefaultBrokerImage
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&warrenv1.Broker{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&corev1.Service{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Named("broker").
		Complete(r)
}
