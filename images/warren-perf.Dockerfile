# The warren-perf load tool image (AMQP and stream load, stream filler), used
# by the end-to-end suite's Jobs. Build from the repository root:
#   docker build -f images/warren-perf.Dockerfile -t docker.io/warrenmq/warren-perf:dev .
# `make images` builds the same image without a Docker daemon (hack/imagebuild
# reads the final stage of this file).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o /out/warren-perf ./cmd/warren-perf

# Distroless static: no shell, no package manager; user nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/warren-perf /usr/local/bin/warren-perf
USER 65532:65532
LABEL org.opencontainers.image.title="warren-perf" \
      org.opencontainers.image.description="Load tool for Warren and RabbitMQ: AMQP and stream publish/consume, stream fill" \
      org.opencontainers.image.source="https://github.com/warrenmq/warren"
ENTRYPOINT ["/usr/local/bin/warren-perf"]
