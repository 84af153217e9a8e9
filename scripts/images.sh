#!/usr/bin/env bash
# Builds the coordinator and worker container images FROM scratch, with no base image to
# pull: static binaries (CGO_ENABLED=0, -trimpath, version and git commit stamped by the
# linker), an /etc/passwd line for the non-root user gpreduce (65532), and the host's CA
# bundle (for https:// data sources). The images run with a read-only root filesystem;
# coordinators keep their state in /data (a volume), workers need no writable path.
#
#   scripts/images.sh              # builds gpreduce/coordinator:TAG and gpreduce/worker:TAG
#   IMAGE_PREFIX=registry.example.com/gpreduce TAG=v1.0 scripts/images.sh
#   BINARIES_ONLY=1 scripts/images.sh   # only the static binaries, in bin/static/
#
# TAG defaults to `git describe --tags --always --dirty`; the images are also tagged :latest.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${IMAGE_PREFIX:-gpreduce}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
ver=${TAG:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
pkg=github.com/gpreduce/gpreduce/internal/version
out=bin/static
mkdir -p "$out"
for prog in coordinator worker; do
  CGO_ENABLED=0 go build -trimpath -buildvcs=false \
    -ldflags "-s -w -X $pkg.version=$ver -X $pkg.commit=$commit" \
    -o "$out/$prog" "./cmd/$prog"
done
echo "static binaries in $out/: $("$out/coordinator" version)"
if [ -n "${BINARIES_ONLY:-}" ]; then
  exit 0
fi

ca=""
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
  if [ -r "$f" ]; then ca=$f; break; fi
done

for prog in coordinator worker; do
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  mkdir -p "$ctx/etc/ssl/certs"
  cp "$out/$prog" "$ctx/$prog"
  echo "gpreduce:x:65532:65532:gpreduce:/nonexistent:/sbin/nologin" > "$ctx/etc/passwd"
  echo "gpreduce:x:65532:" > "$ctx/etc/group"
  if [ -n "$ca" ]; then
    cp "$ca" "$ctx/etc/ssl/certs/ca-certificates.crt"
  else
    echo "warning: no CA bundle on this host: https:// data sources will fail in the $prog image" >&2
    touch "$ctx/etc/ssl/certs/ca-certificates.crt"
  fi
  # /data is the coordinator's state directory; it is a volume in every deployment.
  mkdir -p "$ctx/data"
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY etc/ /etc/
COPY --chown=65532:65532 data/ /data/
COPY $prog /$prog
LABEL org.opencontainers.image.title="gpreduce $prog" \\
      org.opencontainers.image.version="$ver" \\
      org.opencontainers.image.revision="$commit" \\
      org.opencontainers.image.source="https://github.com/gpreduce/gpreduce"
USER 65532:65532
ENTRYPOINT ["/$prog"]
DOCKERFILE
  if [ "$prog" = coordinator ]; then
    echo 'CMD ["serve", "--data-dir", "/data"]' >> "$ctx/Dockerfile"
    echo 'VOLUME ["/data"]' >> "$ctx/Dockerfile"
  else
    echo 'CMD ["serve"]' >> "$ctx/Dockerfile"
  fi
  docker build -q -t "$prefix/$prog:$ver" -t "$prefix/$prog:latest" "$ctx" >/dev/null
  rm -rf "$ctx"
  trap - EXIT
  echo "built $prefix/$prog:$ver ($prefix/$prog:latest)"
done
