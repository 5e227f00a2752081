#!/bin/sh
# protoc's protoc-gen-go-grpc plugin: the version pinned by go.mod's tool directive.
exec go tool protoc-gen-go-grpc "$@"
