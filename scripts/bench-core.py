#!/usr/bin/python3
"""Reference timings for the compute core (README, "Compute core"): numpy/OpenBLAS dsyrk
(Gram accumulation), numpy.linalg.cholesky, torch cdist + exp kernel blocks. Same shapes as
the Go benchmarks in internal/linalg and internal/kernel. Threads: OPENBLAS_NUM_THREADS /
--threads (torch)."""
import sys, time, math
import numpy as np
import scipy.linalg.blas as blas
import torch

def best(f, reps):
    t = math.inf
    for _ in range(reps):
        t0 = time.perf_counter(); f(); t = min(t, time.perf_counter() - t0)
    return t

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
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
    print(f"dsyrk Gram n={n} s={s} (256-row blocks): {n*s*s/t/1e9:.2f} GFLOP/s")
for s in (1024, 4096):
    M = rng.standard_normal((s, s)); A = M @ M.T / s + 0.1 * np.eye(s)
    t = best(lambda: np.linalg.cholesky(A), 3)
    print(f"cholesky s={s}: {s**3/3/t/1e9:.2f} GFLOP/s ({t*1e3:.1f} ms)")
m, nb, d = 1024, 8192, 8
X = torch.randn(m, d, dtype=torch.float64); Y = torch.randn(nb, d, dtype=torch.float64)
def rbf():
    r = torch.cdist(X, Y); return torch.exp(-0.5 * r * r)
def m32():
    a = math.sqrt(3) * torch.cdist(X, Y); return (1 + a) * torch.exp(-a)
for name, f in (("rbf", rbf), ("matern32", m32)):
    t = best(f, 5)
    print(f"torch cdist+exp {name} {m}x{nb} d={d}: {t/(m*nb)*1e9:.2f} ns/entry")
