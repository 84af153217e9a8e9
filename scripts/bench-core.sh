#!/bin/sh
# Compute-core benchmarks (README, "Compute core"): the Go kernels and the numpy/OpenBLAS and
# torch references, in one run on this machine, with 1 thread and with all cores. Not in CI.
set -e
cd "$(dirname "$0")/.."
cores=$(nproc)
# The references need Debian's numpy, scipy and torch for /usr/bin/python3.
if ! /usr/bin/python3 -c 'import numpy, scipy, torch' 2>/dev/null; then
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=; fi
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-numpy python3-scipy python3-torch >/dev/null
fi
for t in 1 "$cores"; do
	echo "== $t thread(s)"
	go test -run XXX -bench 'SyrkGram/s=/linalg' -benchtime 3x -cpu "$t" ./internal/linalg/ | grep Benchmark
	go test -run XXX -bench 'Potrf/s=/linalg' -benchtime 3x -cpu "$t" ./internal/linalg/ | grep Benchmark
	go test -run XXX -bench 'ScaledBlock/.*/block' -benchtime 5x -cpu "$t" ./internal/kernel/ | grep Benchmark
	OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t /usr/bin/python3 scripts/bench-core.py "$t"
done
