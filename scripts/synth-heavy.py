#!/usr/bin/env python3
"""Write a synthetic regression CSV (header x0..x19,y) to stdout: ROWS rows (default 33000) of
20 log-normal inputs x_k = exp(0.9 z_k), z_k standard normal, and
y = sin(1.5 z0) + 0.5 z1 z2 + cos(z3) + 0.2 e: four relevant inputs, sixteen irrelevant, all
heavy-tailed (the largest of 33000 values is about 40 times the median). A stand-in, with a
fixed seed, for held-out sets whose inputs are counts and network statistics: an inducing grid
spaced evenly between a column's extremes puts most of its points where there are no rows.
Standard library only. Usage: synth-heavy.py [ROWS]"""
import math
import random
import sys

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 33000
rng = random.Random(3)
out = sys.stdout
out.write(",".join("x%d" % k for k in range(20)) + ",y\n")
for _ in range(rows):
    z = [rng.gauss(0, 1) for _ in range(20)]
    y = math.sin(1.5 * z[0]) + 0.5 * z[1] * z[2] + math.cos(z[3]) + 0.2 * rng.gauss(0, 1)
    out.write(",".join("%.6g" % math.exp(0.9 * v) for v in z) + ",%.6f\n" % y)
