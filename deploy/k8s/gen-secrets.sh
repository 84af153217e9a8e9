#!/usr/bin/env sh
# Writes random tokens to deploy/k8s/base/secrets/ (not committed) for the gpreduce-secrets
# Secret that `kubectl apply -k deploy/k8s` creates. Existing files are kept.
set -eu
dir="$(dirname "$0")/base/secrets"
mkdir -p "$dir"
chmod 700 "$dir"
for name in api-token join-token raft-secret; do
  if [ ! -s "$dir/$name" ]; then
    head -c 32 /dev/urandom | base64 | tr -d '\n=' > "$dir/$name"
    chmod 600 "$dir/$name"
    echo "wrote $dir/$name"
  fi
done
