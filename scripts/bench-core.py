#!/usr/bin/python3
"""Reference timings for the compute core (README, "Compute core"): numpy/OpenBLAS dsyrk
(Gram accumulation), numpy.linalg.cholesky, torch cdist + exp kernel blocks. Same shapes as
the Go benchmarks in internal/linalg and internal/kernel. Threads: OPENBLAS_NUM_THREADS /
--threads (torch).

    bench-core.py THREADS      time the references with THREADS threads
    bench-core.py --summary    read a bench-core.sh log on stdin, print the best of each
                               measurement over the rounds and the ratios to the reference
    bench-core.py --solvers    scipy/OpenBLAS references for BenchmarkOptimalQ,
                               BenchmarkELBOKufDense (internal/vof), BenchmarkFitFeatures
                               (internal/solver) and BenchmarkGRIEFPosterior (internal/train)
"""
import sys, time, math, re


def best(f, reps):
    t = math.inf
    for _ in range(reps):
        t0 = time.perf_counter(); f(); t = min(t, time.perf_counter() - t0)
    return t


# The kernel-block shapes of internal/kernel's BenchmarkScaledBlock (m x n, d = 8).
BLOCKS = ((1024, 8192), (64, 3000), (256, 3000))


def references(threads):
    import numpy as np
    import scipy.linalg.blas as blas
    import torch
    torch.set_num_threads(threads)
    rng = np.random.default_rng(1)
    n, block = 20000, 256
    for s in (256, 1024):
        Z = rng.standard_normal((block, s))
        G = np.zeros((s, s), order='F')
        def gram():
            for lo in range(0, n, block):
                blas.dsyrk(1.0, Z[: min(block, n - lo)], beta=1.0, c=G, trans=1, lower=0, overwrite_c=1)
        t = best(gram, 3)
        print(f"REF syrk s={s} threads={threads} {n*s*s/t/1e9:.2f} GFLOP/s  (dsyrk Gram n={n}, 256-row blocks)")
    for s in (1024, 4096):
        M = rng.standard_normal((s, s)); A = M @ M.T / s + 0.1 * np.eye(s)
        t = best(lambda: np.linalg.cholesky(A), 3)
        print(f"REF potrf s={s} threads={threads} {s**3/3/t/1e9:.2f} GFLOP/s  (numpy.linalg.cholesky, {t*1e3:.1f} ms)")
    d = 8
    for m, nb in BLOCKS:
        X = torch.randn(m, d, dtype=torch.float64); Y = torch.randn(nb, d, dtype=torch.float64)
        def rbf():
            r = torch.cdist(X, Y); return torch.exp(-0.5 * r * r)
        def m32():
            a = math.sqrt(3) * torch.cdist(X, Y); return (1 + a) * torch.exp(-a)
        reps = max(5, int(2e7 / (m * nb)))
        for name, f in (("rbf", rbf), ("matern32", m32)):
            t = best(f, reps)
            print(f"REF block {name}/{m}x{nb} threads={threads} {t/(m*nb)*1e9:.3f} ns/entry  (torch cdist+exp)")


def solvers():
    """The same dense operations as the Go benchmarks named in the docstring, on random
    matrices of their sizes (Fortran order, so scipy makes no copies): seconds, best of 3."""
    import numpy as np
    from scipy.linalg import lapack, blas
    rng = np.random.default_rng(1)
    M = 3375  # vof: 15 Hermite features on each of 3 inputs
    X = rng.standard_normal((M, 200))
    A = np.asfortranarray(np.eye(M) + X @ X.T / 0.05)
    b = rng.standard_normal(M)
    def diag():
        c, _ = lapack.dpotrf(A, lower=0)
        lapack.dpotrs(c, b, lower=0)
    JA = np.asfortranarray(A[::-1, ::-1])
    def dense():  # one factorisation of J A J, U^-1, and m* = L (L^T b) by two dtrmv
        u, _ = lapack.dpotrf(JA, lower=0)
        w, _ = lapack.dtrtri(u, lower=0)
        blas.dtrmv(w, blas.dtrmv(w, b, trans=1), trans=0)
    L = np.asfortranarray(np.tril(rng.standard_normal((M, M))))
    def elbo():
        blas.dsyrk(1.0, L)
        blas.dgemm(1.0, A, L)
    print(f"REF optimalq diag M={M} {best(diag, 3):.3f} s  (dpotrf + dpotrs)")
    print(f"REF optimalq dense M={M} {best(dense, 3):.3f} s  (dpotrf + dtrtri + 2 dtrmv)")
    print(f"REF elbo dense M={M} {best(elbo, 3):.3f} s  (dsyrk + dgemm)")
    for s in (1024, 4096):
        Z = rng.standard_normal((s, s))
        B = np.asfortranarray(Z @ Z.T / s + np.eye(s))
        def fit():
            c, _ = lapack.dpotrf(B, lower=0)
            lapack.dtrtri(c, lower=0)
        print(f"REF fitfeatures s={s} {best(fit, 3):.3f} s  (dpotrf + dtrtri, the O(s^3) part)")
    for p in (1000, 4000):
        T = np.asfortranarray(rng.standard_normal((p, p)))
        d = rng.random(p)
        print(f"REF griefposterior p={p} {best(lambda: blas.dgemm(1.0, T * d, T, trans_b=1), 3):.3f} s  (T S T^T, S diagonal)")


def summary(lines):
    """Best of each measurement over the rounds (highest GFLOP/s, lowest ns/entry), then the
    ratios ours/reference: rates for Syrk and Potrf (>= 1 is faster than the reference), time
    per entry for kernel blocks (<= 1 is faster)."""
    bestv, loads = {}, []
    gob = re.compile(r"^Benchmark(SyrkGram|Potrf|ScaledBlock)/(\S+?)(?:-(\d+))?\s.*?([\d.]+) (GFLOP/s|ns/entry)")
    ref = re.compile(r"^REF (\w+) (\S+) threads=(\d+) ([\d.]+) (GFLOP/s|ns/entry)")
    for line in lines:
        if line.startswith("== "):
            loads.append(line.strip())
        m = gob.match(line)
        if m:
            bench, name, thr, val, unit = m.groups()
            thr = thr or "1"
            kind = {"SyrkGram": "syrk", "Potrf": "potrf", "ScaledBlock": "block"}[bench]
            parts = name.split("/")
            if kind in ("syrk", "potrf"):
                if parts[-1] != "linalg":
                    continue
                key = (kind, parts[0], thr, "ours")
            else:
                if parts[-1] == "direct":
                    continue
                key = (kind, name, thr, "ours")
        else:
            m = ref.match(line)
            if not m:
                continue
            kind, name, thr, val, unit = m.groups()
            key = (kind, name, thr, "ref")
        v = float(val)
        hi = unit == "GFLOP/s"
        if key not in bestv or (v > bestv[key][0] if hi else v < bestv[key][0]):
            bestv[key] = (v, unit)
    for l in loads:
        print(l)
    print(f"{'kernel':32} {'thr':>3} {'ours':>10} {'reference':>10} {'unit':9} ratio")
    for key in sorted(k for k in bestv if k[3] == "ours"):
        kind, name, thr, _ = key
        r = bestv.get((kind, name, thr, "ref"))
        v, unit = bestv[key]
        if r is None:
            continue
        what = "ours/ref rate" if unit == "GFLOP/s" else "ours/ref time"
        print(f"{kind + ' ' + name:32} {thr:>3} {v:10.3f} {r[0]:10.3f} {unit:9} {v/r[0]:.2f} ({what})")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        summary(sys.stdin)
    elif len(sys.argv) > 1 and sys.argv[1] == "--solvers":
        solvers()
    else:
        references(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
