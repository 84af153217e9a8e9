#!/usr/bin/env python3
"""Write a synthetic regression CSV (header x1..x19,y) to stdout: 3300 rows of 19 standard
normal inputs, of which 6 matter, y = sin(1.5 x1) + 0.5 x2 x3 + cos(x4) + 0.3 x5^2
+ 0.2 sin(2 x6 x1) + 0.15 e. A stand-in, with a fixed seed, for the 19-input, 3000-row set
of issue 10's exact-GP timing (`eval --test-tail 0.090909` keeps 3000 training rows).
Standard library only."""
import math
import random
import sys

rng = random.Random(19)
out = sys.stdout
out.write(",".join("x%d" % (i + 1) for i in range(19)) + ",y\n")
for _ in range(3300):
    x = [rng.gauss(0, 1) for _ in range(19)]
    y = (math.sin(1.5 * x[0]) + 0.5 * x[1] * x[2] + math.cos(x[3]) + 0.3 * x[4] ** 2
         + 0.2 * math.sin(2 * x[5] * x[0]) + 0.15 * rng.gauss(0, 1))
    out.write(",".join("%.6f" % v for v in x + [y]) + "\n")
