#!/usr/bin/env bash
# Installs what `go generate ./proto/...` needs: protoc from Debian and the Go plugins at the
# versions the committed code was generated with. Idempotent; run as root (or with sudo).
set -euo pipefail
PROTOC_GEN_GO=v1.36.11
PROTOC_GEN_GO_GRPC=v1.6.0
if ! command -v protoc >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
fi
GOBIN="$(go env GOPATH)/bin"
want_go="protoc-gen-go $PROTOC_GEN_GO"
if [ "$("$GOBIN/protoc-gen-go" --version 2>/dev/null)" != "$want_go" ]; then
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO"
fi
if [ "$("$GOBIN/protoc-gen-go-grpc" --version 2>/dev/null)" != "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC#v}" ]; then
  go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
fi
