// Package controllers holds the Broker reconciler of warren-operator.
//
// One reconcile of a Broker runs these concerns in order, one file each:
// the finalizer (reconcile_finalizer.go: on deletion the StatefulSet goes
// first, so nodes drain while their Services and Secrets still exist), the
// pause annotation (reconcile_pause.go), the scale-down guard
// (reconcile_scaledown.go: until the broker can decommission a node, a
// smaller spec.replicas is refused, never applied), the children
// (reconcile_children.go: one builder per child from package resource,
// created or updated with owner references; the config hash on the pod
// template rolls pods only when the config file changes), PVC growth
// (reconcile_pvc.go), vhost storage policies applied through each ready
// node's HTTP API with no restart (reconcile_vhosts.go), and finally the status
// (reconcile_status.go: conditions Ready, AllReplicasReady,
// ClusterAvailable, QuorumHealthy, ReconcileSuccess, and an event for every
// outcome and every condition change).
//
// The reconciler is stateless between calls: everything it knows comes from
// the API server and the broker's API, so it can be restarted or fail over
// (leader election) at any point.
package controllers
