#!/bin/sh
# protoc's protoc-gen-go-vtproto plugin (planetscale/vtprotobuf: reflection-free
# Size, Marshal and Unmarshal): the version pinned by go.mod's tool directive.
exec go tool protoc-gen-go-vtproto "$@"
