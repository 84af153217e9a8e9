#!/usr/bin/env python3
"""Write a synthetic regression CSV (header x0,x1,y) to stdout: 60000 rows of 2 inputs uniform
on [-3, 3], y = sin(3 x0) cos(2.5 x1) + 0.5 sin(5 x0 + 4 x1) + 0.3 x0 + 0.1 e. A stand-in,
with a fixed seed, for large low-dimensional (e.g. spatial) sets, whose functions need more
GP-GRIEF eigenfunctions than the paper's 10 x 10 grid holds (`eval --test-tail 0.1` keeps
54000 training rows). Standard library only."""
import math
import random
import sys

rng = random.Random(2)
out = sys.stdout
out.write("x0,x1,y\n")
for _ in range(60000):
    a, b = rng.uniform(-3, 3), rng.uniform(-3, 3)
    y = math.sin(3 * a) * math.cos(2.5 * b) + 0.5 * math.sin(5 * a + 4 * b) + 0.3 * a + 0.1 * rng.gauss(0, 1)
    out.write("%.6f,%.6f,%.6f\n" % (a, b, y))
