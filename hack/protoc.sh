#!/usr/bin/env bash
# protoc.sh runs the pinned protoc, downloading it once from Maven Central
# (com.google.protobuf:protoc:<version>:exe:linux-x86_64), checking its
# sha256, into ~/.cache/warren. Arguments go to protoc.
set -euo pipefail

PROTOC_VERSION=4.36.2 # libprotoc 36.2
PROTOC_SHA256=f6ee22d65361338459208da8bff801c9ca689741cba9187b34990dd45198f864
PLATFORM=linux-x86_64

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) ;;
*)
	echo "protoc.sh: the pinned protoc is for $PLATFORM; regenerate on a $PLATFORM machine (or container)" >&2
	exit 1
	;;
esac

cache="$HOME/.cache/warren"
bin="$cache/protoc-$PROTOC_VERSION-$PLATFORM"
if [ ! -x "$bin" ]; then
	mkdir -p "$cache"
	url="https://repo1.maven.org/maven2/com/google/protobuf/protoc/$PROTOC_VERSION/protoc-$PROTOC_VERSION-$PLATFORM.exe"
	tmp="$(mktemp "$cache/protoc.XXXXXX")"
	trap 'rm -f "$tmp"' EXIT
	curl -fsSL --retry 3 -o "$tmp" "$url"
	echo "$PROTOC_SHA256  $tmp" | sha256sum -c --quiet - || {
		echo "protoc.sh: $url does not have the pinned sha256" >&2
		exit 1
	}
	chmod +x "$tmp"
	mv "$tmp" "$bin"
fi
exec "$bin" "$@"
