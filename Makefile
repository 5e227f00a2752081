# Warren — the two commands a new user runs are `make run` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
DATA_DIR ?= ./data
# FUZZTIME is a count of inputs per fuzz target, not a duration: Go 1.26's
# fuzz coordinator can fail a target with "context deadline exceeded" when a
# duration runs out while a worker is mid-input (golang/go#75804, fixed in
# Go 1.27); a count has no deadline to race. 150000 inputs take 2-10 s here.
FUZZTIME ?= 150000x
export PATH := $(BIN):$(PATH)

.PHONY: all build run cluster-up test test-go prometheus test-fuzz test-interop test-security test-faults test-java-stream e2e lint generate proto bench bench-cluster bench-streams clean images manifests chart-crds docs-crd controller-gen controller-gen-path helm helm-path envtest

all: build

## build: compile warren, warren-operator and warren-perf into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## run: start one broker with embedded defaults (data in ./data, guest/guest on loopback)
run:
	$(GO) run ./cmd/warren serve --data-dir $(DATA_DIR)

## cluster-up: start a local cluster of N nodes (default 3) on one machine, ports 5672.., 15672.., 25672..; Ctrl-C stops it
N ?= 3
cluster-up:
	BIN=$(BIN) DATA_DIR=$(DATA_DIR) ./hack/cluster-up.sh $(N)

## test: every test: vet, unit and integration tests over real sockets, brief fuzzing, the interoperability suite
test: lint-vet test-go test-fuzz test-interop

# The broker and its tools also build on macOS (and the BSDs): vet them for darwin too.
lint-vet:
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./broker/... ./cmd/warren ./cmd/warren-perf

# The Go tests include a scrape by a real Prometheus (Debian's package, installed when missing).
test-go:
	p=$$(./hack/install-prometheus.sh) && WARREN_PROMETHEUS=$$p $(GO) test -count=1 -timeout 20m ./...

## prometheus: install Prometheus from Debian when missing (root) for the scrape test; prints its path
prometheus:
	./hack/install-prometheus.sh

## test-fuzz: run each fuzz target briefly (FUZZTIME inputs per target)
test-fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## test-interop: the clients RabbitMQ users already have, each against a fresh broker (hack/interop/run.sh;
## installs each pinned client once, cached in ~/.cache/warren/interop; INTEROP=rstream runs one)
test-interop:
	./hack/interop/run.sh $(INTEROP)

## test-security: the security probe suite alone (part of make test too): malformed frames, clients
## that never read, the HTTP API's authorization walk, client-chosen path names, a full disk
test-security:
	$(GO) test -count=1 -timeout 10m -run '^TestProbe' ./broker/...

## test-faults: the fault harness of real processes (e2e/faults, build tag faults; not part of make test):
## warren nodes in network namespaces on a bridge, killed, paused, partitioned, delayed, then the invariants
## checked; needs root and Linux (installs iproute2 and iptables from Debian when missing); about 2 minutes.
## FAULTS_RUN=<regexp> runs only those tests (e.g. FAULTS_RUN=TestClusterIdleCPU WARREN_FAULTS_IDLE=30)
test-faults:
	./hack/install-fault-tools.sh
	WARREN_FAULTS_STRICT=1 $(GO) test -tags faults -count=1 -timeout 10m -v $(if $(FAULTS_RUN),-run '$(FAULTS_RUN)',) ./e2e/faults/

## test-java-stream: drive a fresh broker with the official Java stream client (needs java and mvn)
test-java-stream:
	./hack/java-stream-check.sh

## e2e: end-to-end suite on a real Kubernetes: brings up the local single-node cluster (root, Linux,
## about 1 GiB), builds and loads the images, Helm-installs the operator, runs a three-node Broker and
## client Jobs, tears the cluster down (E2E_CLUSTER=kind for kind; KUBECONFIG=... for a given cluster)
e2e:
	./e2e/run.sh

## lint: gofmt, go vet and staticcheck (pinned)
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...

## generate: regenerate generated code (AMQP codec from the spec XML, deepcopy of the operator's API, the cluster protobuf, ...)
generate: controller-gen proto
	$(GO) generate ./...
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

## proto: regenerate broker/cluster/clusterpb from cluster.proto (protoc pinned in hack/protoc.sh; plugins protoc-gen-go, -go-grpc and -go-vtproto in go.mod's tool directives)
proto:
	hack/protoc.sh -I broker/cluster/clusterpb \
		--plugin=protoc-gen-go=hack/protoc-gen-go.sh --go_out=broker/cluster/clusterpb --go_opt=paths=source_relative \
		--plugin=protoc-gen-go-grpc=hack/protoc-gen-go-grpc.sh --go-grpc_out=broker/cluster/clusterpb --go-grpc_opt=paths=source_relative \
		--plugin=protoc-gen-go-vtproto=hack/protoc-gen-go-vtproto.sh --go-vtproto_out=broker/cluster/clusterpb \
		--go-vtproto_opt=paths=source_relative,features=size+marshal+unmarshal \
		broker/cluster/clusterpb/cluster.proto

# Operator tooling, pinned and installed into ./bin (the version is part of the file name,
# so changing a version here reinstalls it).
CONTROLLER_GEN_VERSION ?= v0.23.0
HELM_VERSION ?= v3.22.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)

## controller-gen: install controller-gen $(CONTROLLER_GEN_VERSION) into ./bin
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	@mkdir -p $(BIN)/.tmp-controller-gen
	GOBIN=$(BIN)/.tmp-controller-gen $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/.tmp-controller-gen/controller-gen $@ && rmdir $(BIN)/.tmp-controller-gen

## helm: build helm $(HELM_VERSION) from the Go module proxy into ./bin
helm: $(HELM)
$(HELM):
	@mkdir -p $(BIN)/.tmp-helm
	GOBIN=$(BIN)/.tmp-helm $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/.tmp-helm/helm $@ && rmdir $(BIN)/.tmp-helm

# controller-gen-path: install controller-gen if needed and print its path (tests use it).
controller-gen-path: controller-gen
	@echo $(CONTROLLER_GEN)

# helm-path: build helm if needed and print its path (the chart tests use it).
helm-path: helm
	@echo $(HELM)

## manifests: regenerate the Broker CRD and the operator's RBAC from the markers, copy them into the chart, regenerate the CRD reference
manifests: controller-gen
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=warren-operator paths=./controllers/... output:rbac:artifacts:config=config/rbac
	@# The tests install prometheus-operator's ServiceMonitor CRD, generated from the pinned API types.
	rm -rf $(BIN)/.tmp-monitoring-crds
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir=$(BIN)/.tmp-monitoring-crds
	cp $(BIN)/.tmp-monitoring-crds/monitoring.coreos.com_servicemonitors.yaml controllers/testdata/crds/
	rm -rf $(BIN)/.tmp-monitoring-crds
	$(MAKE) chart-crds docs-crd

## chart-crds: copy the generated CRDs and RBAC rules into the Helm chart (never edit the chart's copies)
chart-crds:
	@mkdir -p charts/warren-operator/crds
	cp config/crd/bases/*.yaml charts/warren-operator/crds/
	@mkdir -p charts/warren-operator/files
	cp config/rbac/role.yaml charts/warren-operator/files/role.yaml

## docs-crd: regenerate the CRD reference in docs/operator.md from the generated CRD
docs-crd:
	$(GO) run ./hack/crddoc -crd config/crd/bases/warrenmq.io_brokers.yaml -doc docs/operator.md

## envtest: build kube-apiserver, etcd and kubectl for the operator's tests (cached), print their directory
envtest:
	./hack/setup-envtest.sh

## bench: Warren vs RabbitMQ with PerfTest, table into docs/benchmarks.md
bench:
	./hack/bench.sh

## bench-cluster: a three-node cluster measured in one run: idle CPU, metadata writes, a client on a non-owner node vs the owner (and the same against a three-node RabbitMQ cluster)
bench-cluster:
	./hack/bench-cluster.sh

## bench-streams: stream read-ahead study (message size x chunk size, read-ahead off/on,
## stream protocol and AMQP; RabbitMQ's stream plugin), tables and chart into docs/benchmarks.md
bench-streams:
	./hack/bench-streams.sh

## images: warren, warren-operator and warren-perf images as archives in out/images (no Docker daemon;
## IMAGE_REGISTRY=docker.io/warrenmq IMAGE_TAG=dev), for ctr images import / kind load image-archive
images:
	./hack/images.sh

clean:
	rm -rf $(BIN)
