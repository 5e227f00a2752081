// Package e2e is Warren's end-to-end suite: the operator installed with its
// Helm chart on a real Kubernetes cluster, a three-node Broker of real warren
// pods, and clients in Jobs and pods that reach it through its Services and
// cluster DNS.
//
// The tests are behind the build tag e2e, so `go test ./...` (make test)
// never runs them. `make e2e` (e2e/run.sh) brings up a cluster (the local
// single-node cluster of hack/local-cluster.sh, a kind cluster with
// E2E_CLUSTER=kind, or the cluster of $KUBECONFIG), builds and loads the
// images, runs
//
//	go test -tags e2e -v ./e2e/
//
// and tears down the cluster it brought up. The suite reads:
//
//	KUBECONFIG           the cluster (controller-runtime's usual lookup)
//	E2E_HELM             helm binary (make helm-path)
//	E2E_IMAGE_REGISTRY   registry/prefix of the images (docker.io/warrenmq)
//	E2E_IMAGE_TAG        tag of the images (dev)
//	E2E_KEEP=1           leave the operator, namespace and Broker behind
//	E2E_BROKER_IMAGE     the Broker's image (default: the warren image under test)
//	E2E_READY_TIMEOUT    how long the Broker may take to be Ready (10m)
//
// One test, TestBroker, walks a user's path in order (each step needs the
// previous one): install the operator, apply the sample Broker with three
// replicas, wait for Ready, check status, events and placement, run
// warren-perf in a Job through the client Service's DNS name, read every
// node's metrics, roll the pods with a config change while
// warren-e2e-client (e2e/cmd/warren-e2e-client) keeps publishing with
// confirms, check that no confirmed message was lost, then delete the Broker
// and check its children go. On failure the pods' logs and the events of the
// namespaces are printed.
package e2e
