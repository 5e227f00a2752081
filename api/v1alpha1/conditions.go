package v1alpha1

// Condition types of BrokerStatus.Conditions.
const (
	// ConditionReady is True when every replica is ready and the client
	// Service has endpoints.
	ConditionReady = "Ready"
	// ConditionAllReplicasReady is True when every desired replica is ready.
	ConditionAllReplicasReady = "AllReplicasReady"
	// ConditionClusterAvailable is True when the cluster's metadata group
	// has a leader and a majority of its members answer, as a ready node
	// reports it (GET /api/cluster/status): clients are served and
	// definitions can change.
	ConditionClusterAvailable = "ClusterAvailable"
	// ConditionQuorumHealthy is True when the node of every pod the
	// StatefulSet runs is a running voting member and no other member is
	// down: any one node may stop without a Raft group losing its majority
	// (no member is quorum critical).
	ConditionQuorumHealthy = "QuorumHealthy"
	// ConditionReconcileSuccess is True when the last reconcile applied the
	// whole spec. When False its reason says what failed and its message
	// what to do.
	ConditionReconcileSuccess = "ReconcileSuccess"
)

// Reasons of ConditionReconcileSuccess (and of the events that go with them).
const (
	ReasonSuccess = "Success"
	ReasonPaused  = "Paused"
	// ReasonScalingDown: a smaller spec.replicas is being applied, one
	// decommissioned node at a time.
	ReasonScalingDown = "ScalingDown"
	// ReasonDecommissionFailed: the node to remove could not be
	// decommissioned; the scale-down stopped with the StatefulSet as it
	// was. The message says why and what to do.
	ReasonDecommissionFailed = "DecommissionFailed"
	ReasonChildError         = "ChildError"
	ReasonVhostPolicyError   = "VhostPolicyError"
	ReasonPVCExpandError     = "PVCExpandError"
	ReasonInvalidSpec        = "InvalidSpec"
	// ReasonTLSSecretInvalid: spec.tls.secretName names a Secret that is
	// missing or lacks tls.crt or tls.key.
	ReasonTLSSecretInvalid = "TLSSecretInvalid"
)
