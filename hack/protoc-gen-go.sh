#!/bin/sh
# protoc's protoc-gen-go plugin: the version pinned by go.mod's tool directive.
exec go tool protoc-gen-go "$@"
