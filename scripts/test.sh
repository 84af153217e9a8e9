#!/usr/bin/env bash
# The project's test command: installs protoc and the Go plugins if missing (for the test
# that the generated gRPC code is current), then gofmt, go vet and go test over every package,
# with the container fault suite's short scenario where a Docker engine answers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-protoc.sh
export PATH="$PATH:$(go env GOPATH)/bin"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '\.pb\.go$') || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
# The container fault suite (integration/docker_test.go) needs a Docker engine: CI runs its
# short scenario where one answers (about 4 minutes with the image build; the whole suite takes
# about 10: GPREDUCE_DOCKER=1; GPREDUCE_DOCKER=0 turns it off).
if [ -z "${GPREDUCE_DOCKER:-}" ]; then
  if docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    export GPREDUCE_DOCKER=short
    echo "container fault suite: Docker engine found, running the short scenario (GPREDUCE_DOCKER=short; GPREDUCE_DOCKER=1 runs every scenario)"
  else
    echo "container fault suite: SKIPPED, no Docker engine answers (integration/docker_test.go)"
  fi
fi
go test -count=1 -timeout 45m "$@" ./...
