// Package controllers holds the Broker reconciler of warren-operator.
//
// One reconcile of a Broker runs these concerns in order, one file each:
// the finalizer (reconcile_finalizer.go: on deletion the StatefulSet goes
// first, so nodes drain while their Services and Secrets still exist), the
// pause annotation (reconcile_pause.go), the scale-down
// (reconcile_scaledown.go: a smaller spec.replicas decommissions the
// highest-ordinal node through its API, waits until the other nodes no
// longer list it, then shrinks the StatefulSet by one; one node per pod
// termination), the children (reconcile_children.go: one builder per child
// from package resource, created or updated with owner references; the
// config hash on the pod template rolls pods only when the config file
// changes), PVC growth (reconcile_pvc.go), vhost storage policies applied
// once, to the cluster, through one ready node's HTTP API with no restart
// (reconcile_vhosts.go), and finally the status (reconcile_status.go:
// conditions Ready, AllReplicasReady, ClusterAvailable and QuorumHealthy
// (condition_*.go, from GET /api/cluster/status on a ready pod,
// cluster_view.go, not from pod readiness), ReconcileSuccess, and an event
// for every outcome and every condition change). Every reconcile is
// requeued after ClusterResync at the latest, since the cluster's state
// changes without Kubernetes noticing.
//
// A reconcile blocks while a node decommissions (bounded by
// brokerapi.MembershipChangeTimeout) and while it waits for the node to be
// gone from the membership (leaveWait).
//
// The reconciler is stateless between calls: everything it knows comes from
// the API server and the broker's API, so it can be restarted or fail over
// (leader election) at any point.
package controllers
