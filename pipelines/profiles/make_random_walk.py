#!/usr/bin/env python3
"""Writes random_walk.json: a link whose rate changes every second, a seeded random walk
between 150 and 2500 kbit/s with 50 ms one-way delay. Fixed-rate streams freeze many
times a minute on such a link; it is the test of whether rate adaptation generalises.

Usage: pipelines/profiles/make_random_walk.py [SEED] > pipelines/profiles/random_walk.json
"""
import json
import math
import random
import sys

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 42
rng = random.Random(seed)
low, high, seconds = 150, 2500, 120
rate = 1000.0
steps = []
for _ in range(seconds):
    # A step of about ±30 % a second, reflected at the bounds.
    rate *= math.exp(rng.gauss(0.0, 0.3))
    if rate > high:
        rate = high * high / rate
    if rate < low:
        rate = low * low / rate
    steps.append({"duration_s": 1, "rate_kbit": int(round(rate)), "delay_ms": 50, "loss": 0.0})
profile = {
    "name": "RANDOM_WALK",
    "description": f"Rate changes every second: a random walk (seed {seed}) between {low} and "
    f"{high} kbit/s, 50 ms one-way delay; the queue holds 1 s at 600 kbit/s.",
    "loop": False,
    "queue_bytes": 75000,
    "steps": steps,
}
json.dump(profile, sys.stdout, indent=1)
sys.stdout.write("\n")
