#!/usr/bin/env python3
"""Writes mobile.json: a mobile-like link whose rate changes every second, between 150 and
2500 kbit/s around a mean of about 800, with 50 ms delay each way, for 120 s.

Unlike random_walk.json (a free walk, mean about 1100 kbit/s, one-way delay downstream only)
the rate is pulled back toward its median (a mean-reverting walk in log rate), so it dips
to the floor and bursts to the top again within seconds, as a cell's rate does: the test
of whether rate control leaves the floor after each dip. A seed reproduces the trace.

Usage: pipelines/profiles/make_mobile.py [SEED] > pipelines/profiles/mobile.json
"""
import json
import math
import random
import sys

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 5
rng = random.Random(seed)
low, high, seconds, median = 150, 2500, 120, 650.0
# Each second the log rate moves 30 % of the way back to the median's, plus noise.
pull, noise = 0.3, 0.45
x = math.log(median)
steps = []
for _ in range(seconds):
    x += pull * (math.log(median) - x) + rng.gauss(0.0, noise)
    # Reflected at the bounds.
    if x > math.log(high):
        x = 2 * math.log(high) - x
    if x < math.log(low):
        x = 2 * math.log(low) - x
    steps.append({"duration_s": 1, "rate_kbit": int(round(math.exp(x))), "delay_ms": 50, "loss": 0.0})
mean = sum(s["rate_kbit"] for s in steps) / len(steps)
profile = {
    "name": "MOBILE",
    "description": f"Mobile-like: the rate changes every second, a mean-reverting walk (seed {seed}) "
    f"between {low} and {high} kbit/s, mean {mean:.0f} kbit/s, 50 ms delay each way; the queue "
    "holds 1 s at 600 kbit/s.",
    "loop": False,
    "queue_bytes": 75000,
    "steps": steps,
    "reverse": {
        "queue_bytes": 75000,
        "steps": [{"duration_s": seconds, "rate_kbit": 0, "delay_ms": 50, "loss": 0.0}],
    },
}
json.dump(profile, sys.stdout, indent=1)
sys.stdout.write("\n")
