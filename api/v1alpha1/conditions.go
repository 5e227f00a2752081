package v1alpha1

// Condition types of BrokerStatus.Conditions.
const (
	// ConditionReady is True when every replica is ready and the client
	// Service has endpoints.
	ConditionReady = "Ready"
	// ConditionAllReplicasReady is True when every desired replica is ready.
	ConditionAllReplicasReady = "AllReplicasReady"
	// ConditionClusterAvailable is True when at least one node serves
	// clients through the client Service.
	ConditionClusterAvailable = "ClusterAvailable"
	// ConditionQuorumHealthy is True when a majority of the nodes is ready,
	// so replicated queues and streams accept writes.
	ConditionQuorumHealthy = "QuorumHealthy"
	// ConditionReconcileSuccess is True when the last reconcile applied the
	// whole spec. When False its reason says what failed and its message
	// what to do.
	ConditionReconcileSuccess = "ReconcileSuccess"
)

// Reasons of ConditionReconcileSuccess (and of the events that go with them).
const (
	ReasonSuccess          = "Success"
	ReasonPaused           = "Paused"
	ReasonScaleDownRefused = "ScaleDownRefused"
	ReasonChildError       = "ChildError"
	ReasonVhostPolicyError = "VhostPolicyError"
	ReasonPVCExpandError   = "PVCExpandError"
	ReasonInvalidSpec      = "InvalidSpec"
	// ReasonTLSSecretInvalid: spec.tls.secretName names a Secret that is
	// missing or lacks tls.crt or tls.key.
	ReasonTLSSecretInvalid = "TLSSecretInvalid"
)
