#!/usr/bin/env bash
# hack/images.sh (make images): the warren, warren-operator and warren-perf images as
# archives in out/images, with no Docker daemon: static linux/amd64 binaries
# (CGO_ENABLED=0, -trimpath) put in an image by hack/imagebuild from the
# final stage of images/NAME.Dockerfile, so `docker build -f
# images/NAME.Dockerfile .` makes the same image.
#
# Usage: hack/images.sh [NAME...]        (default: warren warren-operator warren-perf)
#
# Environment:
#   IMAGE_REGISTRY=docker.io/warrenmq   registry and repository prefix
#   IMAGE_TAG=dev                       tag
#   IMAGES_OUT=out/images               where NAME.tar goes
#
# Each archive (OCI layout plus Docker manifest.json) loads with
#   ctr -n k8s.io images import out/images/NAME.tar
#   kind load image-archive out/images/NAME.tar
# A NAME whose cmd/NAME does not exist yet is skipped with a message.
set -euo pipefail

case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 0 ;;
esac
cd "$(dirname "$0")/.."
REGISTRY=${IMAGE_REGISTRY:-docker.io/warrenmq}
TAG=${IMAGE_TAG:-dev}
OUT=${IMAGES_OUT:-out/images}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(warren warren-operator warren-perf)
log() { printf 'images: %s\n' "$*" >&2; }

mkdir -p "$OUT/bin"
go build -o "$OUT/bin/imagebuild" ./hack/imagebuild
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
built=0
for name in "${names[@]}"; do
	if [ ! -d "cmd/$name" ]; then
		log "skipping $name: cmd/$name does not exist yet"
		continue
	fi
	[ -f "images/$name.Dockerfile" ] || { log "error: images/$name.Dockerfile is missing"; exit 1; }
	log "building $name"
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$OUT/bin/$name" "./cmd/$name"
	"$OUT/bin/imagebuild" -binary "$OUT/bin/$name" -dockerfile "images/$name.Dockerfile" \
		-ref "$REGISTRY/$name:$TAG" -out "$OUT/$name.tar" \
		-label "org.opencontainers.image.version=$TAG" -label "org.opencontainers.image.revision=$revision"
	log "wrote $OUT/$name.tar ($REGISTRY/$name:$TAG, $(du -h "$OUT/$name.tar" | cut -f1))"
	built=$((built + 1))
done
[ "$built" -gt 0 ] || { log "error: no image built"; exit 1; }
