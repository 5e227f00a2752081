# The Warren broker image. Build from the repository root:
#   docker build -f images/warren.Dockerfile -t docker.io/warrenmq/warren:dev .
# `make images` builds the same image without a Docker daemon (hack/imagebuild
# reads the final stage of this file: COPY destination, USER, EXPOSE, LABEL,
# ENTRYPOINT and CMD).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o /out/warren ./cmd/warren

# Distroless static: no shell, no package manager; user nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/warren /usr/local/bin/warren
USER 65532:65532
LABEL org.opencontainers.image.title="warren" \
      org.opencontainers.image.description="Warren: a clustered message broker that speaks AMQP 0.9.1 and the RabbitMQ stream protocol" \
      org.opencontainers.image.source="https://github.com/warrenmq/warren"
# AMQP, AMQPS, stream, stream TLS, HTTP API, Prometheus, cluster gRPC.
EXPOSE 5672 5671 5552 5551 15672 15692 25672
ENTRYPOINT ["/usr/local/bin/warren"]
CMD ["serve"]
