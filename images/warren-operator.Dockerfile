# The Warren operator image. Build from the repository root:
#   docker build -f images/warren-operator.Dockerfile -t docker.io/warrenmq/warren-operator:dev .
# `make images` builds the same image without a Docker daemon (hack/imagebuild
# reads the final stage of this file: COPY destination, USER, EXPOSE, LABEL,
# ENTRYPOINT and CMD).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o /out/warren-operator ./cmd/warren-operator

# Distroless static: no shell, no package manager; user nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/warren-operator /usr/local/bin/warren-operator
USER 65532:65532
LABEL org.opencontainers.image.title="warren-operator" \
      org.opencontainers.image.description="Kubernetes operator for Warren brokers (Broker custom resource, warrenmq.io/v1alpha1)" \
      org.opencontainers.image.source="https://github.com/warrenmq/warren"
ENTRYPOINT ["/usr/local/bin/warren-operator"]
