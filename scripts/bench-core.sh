#!/bin/sh
# Compute-core benchmarks (README, "Compute core"): the Go kernels and the numpy/OpenBLAS and
# torch references, alternated in ROUNDS rounds (default 3) on this machine, with 1 thread
# and with all cores; then the best of each over the rounds and the ratios. The load average
# is printed before every round. Not in CI. Usage: [ROUNDS=n] scripts/bench-core.sh [log]
# With --solvers instead: the dense solver steps of vof, gl/rff and GRIEF (BenchmarkOptimalQ,
# BenchmarkELBOKufDense, BenchmarkFitFeatures, BenchmarkGRIEFPosterior) and their
# scipy/OpenBLAS references (bench-core.py --solvers), once each, all cores.
set -e
cd "$(dirname "$0")/.."
cores=$(nproc)
rounds=${ROUNDS:-3}
log=${1:-$(mktemp)}
# The references need Debian's numpy, scipy and torch for /usr/bin/python3.
if ! /usr/bin/python3 -c 'import numpy, scipy, torch' 2>/dev/null; then
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=; fi
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-numpy python3-scipy python3-torch >/dev/null
fi
if [ "${1:-}" = "--solvers" ]; then
	echo "== load average $(cut -d' ' -f1-3 /proc/loadavg)"
	/usr/bin/python3 scripts/bench-core.py --solvers
	go test -run XXX -bench 'OptimalQ|ELBOKufDense' -benchtime 3x ./internal/vof/ | grep Benchmark
	go test -run XXX -bench FitFeatures -benchtime 3x ./internal/solver/ | grep Benchmark
	go test -run XXX -bench GRIEFPosterior -benchtime 3x ./internal/train/ | grep Benchmark
	echo "== load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
	exit 0
fi
bin=$(mktemp -d)
go test -c -o "$bin/linalg.test" ./internal/linalg/
go test -c -o "$bin/kernel.test" ./internal/kernel/
: >"$log"
r=1
while [ "$r" -le "$rounds" ]; do
	for t in 1 "$cores"; do
		echo "== round $r, $t thread(s), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
		OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t /usr/bin/python3 scripts/bench-core.py "$t" | tee -a "$log"
		"$bin/linalg.test" -test.run XXX -test.bench 'SyrkGram/s=/linalg' -test.benchtime 3x -test.cpu "$t" | grep Benchmark | tee -a "$log"
		"$bin/linalg.test" -test.run XXX -test.bench 'Potrf/s=/linalg' -test.benchtime 3x -test.cpu "$t" | grep Benchmark | tee -a "$log"
		"$bin/kernel.test" -test.run XXX -test.bench 'ScaledBlock/.*/[0-9]' -test.benchtime 20x -test.cpu "$t" | grep Benchmark | tee -a "$log"
	done
	r=$((r + 1))
done
echo "== load average at the end $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
echo
/usr/bin/python3 scripts/bench-core.py --summary <"$log"
rm -r "$bin"
