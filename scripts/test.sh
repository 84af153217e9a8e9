#!/usr/bin/env bash
# The project's test command: installs protoc and the Go plugins if missing (for the test
# that the generated gRPC code is current), then gofmt, go vet and go test over every package.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-protoc.sh
export PATH="$PATH:$(go env GOPATH)/bin"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '\.pb\.go$') || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -count=1 -timeout 45m "$@" ./...
