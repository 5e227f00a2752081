# Warren — the two commands a new user runs are `make run` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
DATA_DIR ?= ./data
FUZZTIME ?= 10s
export PATH := $(BIN):$(PATH)

.PHONY: all build run test test-go test-fuzz lint generate bench bench-streams clean images

all: build

## build: compile warren, warren-operator and warren-perf into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## run: start one broker with embedded defaults (data in ./data, guest/guest on loopback)
run:
	$(GO) run ./cmd/warren serve --data-dir $(DATA_DIR)

## test: every test: vet, unit and integration tests over real sockets, brief fuzzing
test: lint-vet test-go test-fuzz

lint-vet:
	$(GO) vet ./...

test-go:
	$(GO) test -count=1 -timeout 20m ./...

## test-fuzz: run each fuzz target briefly (FUZZTIME per target)
test-fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## lint: gofmt, go vet and staticcheck (pinned)
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...

## generate: regenerate generated code (AMQP codec from the spec XML, ...)
generate:
	$(GO) generate ./...

## bench: Warren vs RabbitMQ with PerfTest, table into docs/benchmarks.md
bench:
	./hack/bench.sh

## images: warren and warren-operator images as archives in out/images (no Docker daemon;
## IMAGE_REGISTRY=docker.io/warrenmq IMAGE_TAG=dev), for ctr images import / kind load image-archive
images:
	./hack/images.sh

clean:
	rm -rf $(BIN)
