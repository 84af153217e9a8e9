# Multi-stage build of the gpreduce images for users with a registry (this repository's CI
# has none and builds the same images with scripts/images.sh instead):
#
#   docker build --target coordinator -t gpreduce/coordinator --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker build --target worker      -t gpreduce/worker      --build-arg COMMIT=$(git rev-parse HEAD) .
#
# Both final stages are FROM scratch: a static binary, an /etc/passwd line for the non-root
# user gpreduce (65532) and the CA bundle (for https:// data sources). They run with a
# read-only root filesystem; the coordinator keeps its state in the /data volume.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN for prog in coordinator worker; do \
      go build -trimpath -buildvcs=false \
        -ldflags "-s -w -X github.com/gpreduce/gpreduce/internal/version.version=${VERSION} -X github.com/gpreduce/gpreduce/internal/version.commit=${COMMIT}" \
        -o /out/$prog ./cmd/$prog || exit 1; \
    done \
 && mkdir -p /out/etc /out/data \
 && echo "gpreduce:x:65532:65532:gpreduce:/nonexistent:/sbin/nologin" > /out/etc/passwd \
 && echo "gpreduce:x:65532:" > /out/etc/group

FROM scratch AS base
COPY --from=build /out/etc/ /etc/
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
USER 65532:65532

FROM base AS worker
COPY --from=build /out/worker /worker
ENTRYPOINT ["/worker"]
CMD ["serve"]

FROM base AS coordinator
COPY --from=build --chown=65532:65532 /out/data/ /data/
COPY --from=build /out/coordinator /coordinator
VOLUME ["/data"]
ENTRYPOINT ["/coordinator"]
CMD ["serve", "--data-dir", "/data"]
