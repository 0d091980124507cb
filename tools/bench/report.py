#!/usr/bin/python3
"""Plots and BENCHMARKS.md from a moq-bench run directory.
usage: report.py DIR [--reading FILE] [--publish REPO] [--fanout FDIR ..]
usage: report.py FDIR [--fanout-runs FDIR2 ..]

Reads DIR/summary.json and DIR/frames/*.csv; writes DIR/plots/*.png and DIR/BENCHMARKS.md,
with a fan-out section when DIR/fanout.json (`moq-bench --fanout`) is there, or from the
fan-out runs given with --fanout (their median and min–max); a directory with only
fanout.json gets FDIR/FANOUT.md.
A reading (the honest interpretation, written by a person) is taken from --reading FILE or
DIR/reading.md when present and placed under "Reading". --publish REPO also writes the
report as REPO/BENCHMARKS.md with its plots and summary.json under REPO/benchmarks/.
`report.py DIR --fanout-runs DIR2 ..` prints the median and min–max over several fan-out runs.
"""

import argparse
import shutil

import csv
import json
import os
import platform
import re
import subprocess
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KINDS = ["key", "reference", "non-reference"]
PROFILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pipelines", "profiles")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read_text(path):
    with open(path) as f:
        return f.read()


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def load_frames(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append(
                {
                    "id": int(r["id"]),
                    "kind": r["kind"],
                    "size": int(r["size"]),
                    "available": int(r["available_us"]) / 1e6,
                    "arrived": int(r["arrived_us"]) / 1e6 if r["arrived_us"] else None,
                    "rendered": int(r["rendered_us"]) / 1e6 if r["rendered_us"] else None,
                    # Rendered from exactly the bytes sent (older runs did not check: rendered).
                    "intact": r["intact"] == "1" if "intact" in r else bool(r["rendered_us"]),
                    # Our modes: when QUIC took the frame at the sender, when moqsrc had it whole.
                    "handed_off": int(r["handed_off_us"]) / 1e6 if r.get("handed_off_us") else None,
                    "received": int(r["received_us"]) / 1e6 if r.get("received_us") else None,
                }
            )
    return rows


def runs(out):
    """(system, profile, repetition) -> frame rows, for every per-frame CSV."""
    found = {}
    frames = os.path.join(out, "frames")
    for name in sorted(os.listdir(frames)):
        # Per-frame files are SYSTEM__PROFILE__REP.csv; the other logs of a run add a suffix.
        parts = name[:-4].split("__") if name.endswith(".csv") else []
        if len(parts) != 3 or not parts[2].isdigit():
            continue
        system, profile, rep = parts
        found[(system, profile, int(rep))] = load_frames(os.path.join(frames, name))
    return found


def captured_rows(rows):
    """The frames sent from the receiver's first rendered frame on (as moq-bench counts
    frames captured)."""
    first = next((i for i, r in enumerate(rows) if r["rendered"] is not None), len(rows))
    return rows[first:]


def add_intact_bitrate(summaries, all_runs):
    """Adds to each summary with frames `intact_kbit`, the media bitrate of the frames
    rendered intact over the span `rendered_kbit` uses, and `intact_capacity_efficiency`.
    A damaged picture's bytes did not all arrive, so counting its size as delivered can
    even exceed the link."""
    for s in summaries:
        captured = captured_rows(all_runs.get((s["system"], s["profile"], s["repetition"]), []))
        if not captured:
            continue
        span = max(captured[-1]["available"] - captured[0]["available"], 1 / 24)
        s["intact_kbit"] = sum(r["size"] for r in captured if r["intact"]) * 8 / span / 1000
        if s.get("rendered_kbit"):
            s["intact_capacity_efficiency"] = s["capacity_efficiency"] * s["intact_kbit"] / s["rendered_kbit"]


def system_colors(by_system):
    """One colour per system, the same in every plot of a profile."""
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {system: cycle[i % len(cycle)] for i, system in enumerate(sorted(by_system))}


def plot_latency(profile, by_system, path):
    """`by_system`: system -> [rows of each repetition]; every repetition drawn, keyframes of
    the first marked."""
    fig, ax = plt.subplots(figsize=(10, 4.5))
    colors = system_colors(by_system)
    for system, reps in sorted(by_system.items()):
        for i, rows in enumerate(reps):
            t0 = rows[0]["available"]
            shown = [r for r in rows if r["rendered"] is not None]
            ax.plot(
                [r["available"] - t0 for r in shown],
                [r["rendered"] - r["available"] for r in shown],
                ".",
                markersize=2 if i == 0 else 1,
                alpha=1.0 if i == 0 else 0.4,
                color=colors[system],
                label=system if i == 0 else None,
            )
        keys = [r for r in reps[0] if r["rendered"] is not None and r["kind"] == "key"]
        t0 = reps[0][0]["available"]
        ax.plot(
            [r["available"] - t0 for r in keys],
            [r["rendered"] - r["available"] for r in keys],
            "^",
            markersize=4,
            color=colors[system],
        )
    ax.set_xlabel("capture time (s)")
    ax.set_ylabel("latency (s)")
    reps = max(len(r) for r in by_system.values())
    ax.set_title(f"{profile}: latency per rendered frame, {reps} repetition(s) (triangles: keyframes of the first)")
    ax.grid(alpha=0.3)
    ax.legend(markerscale=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def received_kbit(rows, span):
    """kbit/s received per second since the first frame was available, per frame kind."""
    t0 = rows[0]["available"]
    per_kind = {k: [0.0] * span for k in KINDS}
    for r in rows:
        if r["arrived"] is not None:
            second = int(r["arrived"] - t0)
            if 0 <= second < span:
                per_kind[r["kind"]][second] += r["size"] * 8 / 1000
    return per_kind


def plot_bitrate(profile, by_system, path):
    """The first repetition by frame kind; the total of the others as thin lines."""
    systems = sorted(by_system)
    fig, axes = plt.subplots(len(systems), 1, figsize=(10, 1.8 * len(systems) + 0.8), sharex=True, squeeze=False)
    for ax, system in zip(axes[:, 0], systems):
        reps = by_system[system]
        span = int(max(r["available"] for r in reps[0]) - reps[0][0]["available"]) + 6
        per_kind = received_kbit(reps[0], span)
        ax.stackplot(range(span), *[per_kind[k] for k in KINDS], labels=KINDS)
        for i, rows in enumerate(reps[1:], 1):
            other = received_kbit(rows, span)
            total = [sum(other[k][t] for k in KINDS) for t in range(span)]
            ax.plot(range(span), total, color="black", linewidth=0.6, alpha=0.6,
                    label="other repetitions (total)" if i == 1 else None)
        ax.set_ylabel("kbit/s")
        ax.set_title(system, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time (s)")
    fig.suptitle(f"{profile}: received bitrate by frame kind")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def ccdf_lines(ax, values_by_system, colors):
    """One CCDF step line per repetition of each system (values: a list per repetition)."""
    for system, reps in sorted(values_by_system.items()):
        for i, values in enumerate(reps):
            values = sorted(v for v in values if v > 0)
            if not values:
                continue
            n = len(values)
            ax.step(values, [1 - j / n for j in range(n)], where="post", color=colors[system],
                    linewidth=1.2 if i == 0 else 0.7, alpha=1.0 if i == 0 else 0.5,
                    label=system if i == 0 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")


def plot_ccdf(profile, by_system, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    latencies = {
        system: [[r["rendered"] - r["available"] for r in rows if r["rendered"] is not None] for rows in reps]
        for system, reps in by_system.items()
    }
    ccdf_lines(ax, latencies, system_colors(by_system))
    ax.set_xlabel("latency (s)")
    ax.set_ylabel("P(latency > x)")
    ax.set_title(f"{profile}: latency CCDF (every repetition)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


STAGES = [
    ("queued at the sender", "available", "handed_off"),
    ("in flight", "handed_off", "received"),
    ("reorder buffer", "received", "arrived"),
]


def stage_rows(rows):
    """Rendered frames with every stage time."""
    return [r for r in rows if r["rendered"] is not None and r["handed_off"] is not None
            and r["received"] is not None and r["arrived"] is not None]


def plot_stages(profile, by_system, path):
    """Per-stage delay CCDFs (seed 004) of the systems that report their stages; False when none do."""
    staged = {system: [stage_rows(rows) for rows in reps] for system, reps in by_system.items()}
    staged = {system: reps for system, reps in staged.items() if any(reps)}
    if not staged:
        return False
    colors = system_colors(by_system)
    fig, axes = plt.subplots(1, len(STAGES), figsize=(15, 4.5), sharey=True)
    for ax, (title, start, end) in zip(axes, STAGES):
        ccdf_lines(ax, {system: [[r[end] - r[start] for r in rows] for rows in reps] for system, reps in staged.items()}, colors)
        ax.set_xlabel(f"{title} (s)")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("P(delay > x)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{profile}: delay per stage of the frames rendered, CCDF (every repetition)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def load_rates(path):
    """unix time (s) -> (encoder target, estimate) in kbit/s, from an adaptive sender's log."""
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append((int(r["unix_us"]) / 1e6, int(r["target_bps"]) / 1000, int(r["estimated_bps"]) / 1000))
    return rows


def load_profile(profile, profiles_dir=PROFILES):
    """A link profile (pipelines/profiles/NAME.json) by name."""
    return load_json(os.path.join(profiles_dir, f"{profile}.json"))


def profile_steps(profile, profiles_dir=PROFILES):
    """[(start s, end s, kbit/s)] of a profile's link trace."""
    p = load_profile(profile, profiles_dir)
    steps, t = [], 0.0
    for s in p["steps"]:
        steps.append((t, t + s["duration_s"], s["rate_kbit"]))
        t += s["duration_s"]
    return steps


def has_rate_log(system):
    """The systems whose sender samples its encoder target and path estimate (….rate.csv):
    ours with rate control, and WebRTC (the bitrate GCC set, rtpgccbwe's estimate)."""
    return system.startswith("moq-adaptive") or system == WEBRTC


# The encoder variants of the systems with the encoder in the loop, by the suffix of their names.
ENCODER_VARIANTS = ["zerolatency", "default", "openh264"]
# The adaptive systems' floor (moq-bench's ADAPTIVE_MIN_KBIT), kbit/s.
FLOOR_KBIT = 150.0


def encoder_variant(system):
    """The encoder variant of a `moq-adaptive*` / `moq-abr*` system (None for other systems)."""
    if not (system.startswith("moq-adaptive") or system.startswith("moq-abr")):
        return None
    for variant in ENCODER_VARIANTS[1:]:
        if system.endswith("-" + variant):
            return variant
    return "zerolatency"


def adaptive_rates(out, summaries, profile, repetition=0):
    """system -> [(s since the trace started, target, estimate)] for the systems with a rate log."""
    found = {}
    for s in summaries:
        if s["profile"] != profile or s["repetition"] != repetition or not has_rate_log(s["system"]):
            continue
        path = os.path.join(out, "frames", f"{s['system']}__{profile}__{repetition}.rate.csv")
        if os.path.exists(path) and s.get("trace_start_us"):
            t0 = s["trace_start_us"] / 1e6
            found[s["system"]] = [(t - t0, target, est) for (t, target, est) in load_rates(path)]
    return found


def frame_latency(rows, trace_start_s):
    """[(s since the trace started, latency ms)] of the frames rendered."""
    return [(r["available"] - trace_start_s, (r["rendered"] - r["available"]) * 1000) for r in rows if r["rendered"]]


def load_playout(path):
    """[(unix s, target ms, buffering ms)] of moqsrc's adaptive playout (its `moq-playout` messages)."""
    with open(path) as f:
        return [(int(r["unix_us"]) / 1e6, float(r["target_ms"]), float(r["delay_ms"])) for r in csv.DictReader(f)]


def plot_adaptation(profile, rates, path, latency=None, playout=None):
    """Target and estimate per system against the link rate; with `latency` (system ->
    [(s, ms)]) a second panel of each frame's latency on the same time axis, and on it with
    `playout` (system -> [(s, target ms, buffering ms)]) moqsrc's playout target."""
    if latency:
        fig, (ax, lat) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    else:
        fig, ax = plt.subplots(figsize=(10, 4.5))
    link_line(profile, ax)
    colors = {}
    for system, rows in sorted(rates.items()):
        line = ax.plot([r[0] for r in rows], [r[1] for r in rows], label=f"{system} encoder target")[0]
        colors[system] = line.get_color()
        ax.plot([r[0] for r in rows], [r[2] for r in rows], ":", color=line.get_color(), label=f"{system} estimate")
    if latency:
        for system, points in sorted(latency.items()):
            lat.plot([p[0] for p in points], [p[1] for p in points], ".", markersize=1.5,
                     color=colors.get(system), label=f"{system} latency")
        for system, points in sorted((playout or {}).items()):
            lat.step([p[0] for p in points], [p[1] for p in points], where="post", linewidth=1,
                     color=colors.get(system), label=f"{system} playout target")
        lat.set_ylabel("latency (ms)")
        lat.set_yscale("log")
        lat.grid(alpha=0.3)
        lat.legend(fontsize=7)
    save_rate_plot(fig, ax, f"{profile}: encoder target and path estimate against the link rate", path,
                   lat if latency else None)


def floor_episodes(rows, steps, floor=FLOOR_KBIT, window=5.0):
    """How long the target (rows of `adaptive_rates`, one every 100 ms) sat at the floor
    (within 2 %): (total s, starved s). Starved: the time covered by `window`-long stretches
    spent at the floor throughout while the link's mean over the same stretch was above
    twice the floor (the issue's goal: none)."""
    total = 0.0
    at = []
    for i, (t, target, _) in enumerate(rows):
        dt = rows[i + 1][0] - t if i + 1 < len(rows) else 0.0
        at.append(target <= floor * 1.02)
        if at[-1]:
            total += dt
    starved = [False] * len(rows)
    run_start = None
    for i, (t, _, _) in enumerate(rows):
        if not at[i]:
            run_start = None
            continue
        if run_start is None:
            run_start = i
        # The stretch of `window` s ending here, all at the floor.
        j = i
        while j > run_start and t - rows[j - 1][0] <= window + 1e-9:
            j -= 1
        if t - rows[j][0] >= window - 1e-9:
            link = mean_link_between(steps, rows[j][0], t)
            if link is not None and link > 2 * floor:
                for k in range(j, i + 1):
                    starved[k] = True
    covered = sum(rows[i + 1][0] - rows[i][0] for i in range(len(rows) - 1) if starved[i] and starved[i + 1])
    return total, covered


def mean_link_between(steps, start, end):
    """The link's time-weighted mean rate over [start, end] (clipped to the trace), or None."""
    start = max(start, 0.0)
    span = 0.0
    weighted = 0.0
    for (a, b, kbit) in steps:
        overlap = min(b, end) - max(a, start)
        if overlap > 0:
            weighted += kbit * overlap
            span += overlap
    if end > (steps[-1][1] if steps else 0.0) and steps:
        # A trace holds its last step after its end.
        extra = end - max(start, steps[-1][1])
        weighted += steps[-1][2] * extra
        span += extra
    return weighted / span if span > 0 else None


def convergence(rows, steps, headroom=0.85, ceiling=1200.0):
    """Seconds after each rate step until the target settled: below the new link rate after
    a drop; at 80 % of what the new rate allows (its headroom share, at most the ceiling)
    after a rise. None when it did not within the step."""
    out = []
    for (prev, cur) in zip(steps, steps[1:]):
        start, end, kbit = cur
        if kbit == prev[2]:
            continue
        if kbit < prev[2]:
            done = lambda target: target <= kbit  # noqa: E731
        else:
            goal = min(headroom * kbit, ceiling)
            done = lambda target: target >= 0.8 * goal  # noqa: E731
        t = next((r[0] - start for r in rows if start <= r[0] < end and done(r[1])), None)
        out.append((start, prev[2], kbit, t))
    return out


def recovery_episodes(steps):
    """[(down s, up s, level kbit/s)]: each step back up to a rate, with the latest step down
    from that rate before it (the episode the link recovered from)."""
    episodes = []
    downs = []
    for (prev, cur) in zip(steps, steps[1:]):
        start, _, kbit = cur
        if kbit < prev[2]:
            downs.append((start, prev[2]))
        elif kbit > prev[2]:
            down = next((d for d in reversed(downs) if d[1] == kbit), None)
            if down:
                episodes.append((down[0], start, kbit))
    return episodes


def median_between(points, start, end):
    """The median of the values of `points` ([(s, value)]) from `start` to `end` s, if any."""
    values = sorted(v for (t, v) in points if start <= t < end)
    return values[len(values) // 2] if values else None


def recovery(latency, steps, window=5.0, margin_ms=50.0, within=10.0):
    """Per recovery episode (`recovery_episodes`): the median latency (ms) over the `window`
    before the step down, and how long after the step back up the median over a `window`
    starting there first came within `margin_ms` of it (None if not within `within` s).
    `latency` is [(s since the trace started, ms)] by availability."""
    out = []
    for (down, up, kbit) in recovery_episodes(steps):
        before = median_between(latency, down - window, down)
        back = None
        if before is not None:
            t = up
            while t <= up + within:
                after = median_between(latency, t, t + window)
                if after is not None and after <= before + margin_ms:
                    back = t - up
                    break
                t += 0.25
        out.append((down, up, kbit, before, back))
    return out


def recovery_section(summaries, all_runs, profile, profiles_dir=PROFILES):
    """Markdown: for the systems with a rate log, after each step back up of `profile`, the
    time until the 5 s median latency was back within 50 ms of its value before the step
    down (goal: within 10 s); the median over the repetitions with their range."""
    steps = profile_steps(profile, profiles_dir)
    episodes = recovery_episodes(steps)
    if not episodes:
        return []
    by_system = {}
    for s in summaries:
        rows = (all_runs or {}).get((s["system"], profile, s["repetition"]))
        if s["profile"] != profile or not has_rate_log(s["system"]) or not rows or not s.get("trace_start_us"):
            continue
        latency = frame_latency(rows, s["trace_start_us"] / 1e6)
        by_system.setdefault(s["system"], []).append(recovery(latency, steps))
    if not by_system:
        return []
    md = ["Recovery: how long after the link came back up the 5 s median latency was within 50 ms of "
          "its value before the step down (goal: within 10 s; medians over the repetitions, ranges in "
          "brackets; the median latency before the step in parentheses).", "",
          "| system | " + " | ".join(f"{d:.0f} s down, {u:.0f} s back at {k} kbit/s" for (d, u, k) in episodes) + " |",
          "|---|" + "---|" * len(episodes)]
    for system, per_rep in sorted(by_system.items()):
        cells = []
        for i in range(len(episodes)):
            befores = [rep[i][3] for rep in per_rep if rep[i][3] is not None]
            backs = [rep[i][4] for rep in per_rep if rep[i][3] is not None]
            if not befores:
                cells.append("–")
                continue
            missed = sum(1 for b in backs if b is None)
            within = spread([b for b in backs if b is not None], 1) + " s" if missed < len(backs) else ""
            note = f"**{missed} of {len(backs)} not within 10 s**" if missed else ""
            cells.append(" ".join(x for x in [within, note] if x) + f" ({median(befores):.0f} ms)")
        md.append(f"| {system} | " + " | ".join(cells) + " |")
    md.append("")
    return md


def adaptation_section(out, summaries, profile, plots, all_runs=None):
    rates = adaptive_rates(out, summaries, profile)
    if not rates:
        return []
    md = []
    by_variant = {}
    for system, rows in rates.items():
        by_variant.setdefault(encoder_variant(system), {})[system] = rows
    for variant in ENCODER_VARIANTS:
        if variant not in by_variant:
            continue
        latency, playout = {}, {}
        for system in by_variant[variant]:
            s = next((s for s in summaries if s["system"] == system and s["profile"] == profile), None)
            rows = (all_runs or {}).get((system, profile, 0))
            if s and rows and s.get("trace_start_us"):
                t0 = s["trace_start_us"] / 1e6
                latency[system] = frame_latency(rows, t0)
                path = os.path.join(out, "frames", f"{system}__{profile}__0.playout.csv")
                if os.path.exists(path):
                    playout[system] = [(t - t0, target, delay) for (t, target, delay) in load_playout(path)]
        name = f"adaptation_{profile}_{variant}.png"
        plot_adaptation(profile, by_variant[variant], os.path.join(plots, name), latency, playout)
        md += [f"![adaptation {profile}, {variant} encoder](plots/{name})", ""]
    steps = profile_steps(profile)
    if len(steps) > 1 and len(steps) <= 20:
        md.append("| system | " + " | ".join(f"{a:.0f} s: {p}→{k}" for (a, p, k, _) in convergence([], steps)) + " |")
        md.append("|---|" + "---|" * len(convergence([], steps)))
        for system, rows in sorted(rates.items()):
            cells = [fmt(t, 1) + " s" if t is not None else "not within the step" for (_, _, _, t) in convergence(rows, steps)]
            md.append(f"| {system} convergence | " + " | ".join(cells) + " |")
        md.append("")
    return md


def variant_rows(out, summaries, profile, profiles_dir=PROFILES):
    """Per adaptive system on `profile` (typical repetition): frames intact, latency, stalls per
    minute, intact bitrate against the link's mean, and per repetition the time at the floor
    and the time starved there (`floor_episodes`)."""
    steps = profile_steps(profile, profiles_dir)
    rows = []
    for (system, p), runs_ in sorted(repetitions(summaries).items()):
        if p != profile or not system.startswith("moq-adaptive"):
            continue
        s = typical(runs_)
        minutes = s["frames_captured"] / 24.0 / 60.0
        link = mean_link_kbit(steps, s["frames_captured"] / 24.0)
        floors = []
        for r in runs_:
            rates = adaptive_rates(out, [r], profile, r["repetition"]).get(system)
            if rates:
                floors.append(floor_episodes(rates, steps))
        rows.append({
            "system": system,
            "variant": encoder_variant(system),
            "intact": intact_share(s),
            "mean_ms": s["latency_mean_ms"],
            "p95_ms": s["latency_p95_ms"],
            "published_ms": s.get("published_latency_mean_ms"),
            "stalls_per_min": s["stalls"] / minutes if minutes else 0.0,
            "link_share": s["intact_kbit"] / link if link and s.get("intact_kbit") is not None else None,
            "floor_s": [f[0] for f in floors],
            "starved_s": [f[1] for f in floors],
        })
    return rows


def variants_section(out, summaries, profiles, profiles_dir=PROFILES):
    """The adaptive systems per encoder variant on each profile."""
    md = []
    for profile in profiles:
        try:
            rows = variant_rows(out, summaries, profile, profiles_dir)
        except OSError:
            continue
        if not rows:
            continue
        if not md:
            md += ["## Rate control per encoder", "",
                   "Frames = rendered intact ÷ captured; mean and p95 latency from the picture handed to the "
                   "encoder; from moqsink = mean latency from the encoded frame reaching moqsink (the elements' "
                   "own definition: what the encoder holds back is not counted); delivered = intact media bitrate "
                   "÷ the link's mean rate; "
                   f"floor = time the target sat at the floor ({FLOOR_KBIT:.0f} kbit/s); starved = time covered by 5 s "
                   "stretches at the floor throughout while the link's mean over the same 5 s was above twice the "
                   "floor (goal: 0). Medians over the repetitions, ranges in brackets for floor and starved.", ""]
        md.append(f"### {profile}")
        md.append("")
        md.append("| system | encoder | frames | mean (ms) | p95 (ms) | from moqsink (ms) | stalls/min | delivered "
                  "| floor (s) | starved (s) |")
        md.append("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            share = f"{r['link_share']:.0%}" if r["link_share"] is not None else "–"
            md.append(
                f"| {r['system']} | {r['variant']} | {r['intact']:.1%} | {r['mean_ms']:.0f} | {r['p95_ms']:.0f} "
                f"| {fmt(r['published_ms'])} | {r['stalls_per_min']:.1f} | {share} | {spread(r['floor_s'], 1)} "
                f"| {spread(r['starved_s'], 1)} |"
            )
        md.append("")
    return md


def load_renditions(path):
    """[(unix s, kbit/s)] of the renditions a moq-abr viewer played: its first, then each switch."""
    with open(path) as f:
        return [(int(r["unix_us"]) / 1e6, int(r["kbit"])) for r in csv.DictReader(f)]


def save_rate_plot(fig, ax, title, path, time_ax=None):
    """Labels a plot of kbit/s against the link trace's time (on `time_ax`, the bottom
    panel, when not `ax`) and writes it to `path`."""
    (time_ax or ax).set_xlabel("time since the link's trace started (s)")
    ax.set_ylabel("kbit/s")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def link_line(profile, ax):
    """The profile's rate steps, drawn on `ax`."""
    xs, ys = [], []
    for (a, b, kbit) in profile_steps(profile):
        xs += [a, b]
        ys += [kbit, kbit]
    ax.plot(xs, ys, color="black", linewidth=2, label="link rate")
    return xs[-1] if xs else 0.0


def abr_section(out, summaries, profile, plots):
    """moq-abr: the rendition its viewer chose against the link rate, and its switches."""
    s = next((s for s in summaries if s["profile"] == profile and s["system"] == "moq-abr" and s.get("abr")), None)
    path = os.path.join(out, "frames", f"moq-abr__{profile}__0.renditions.csv")
    if not s or not os.path.exists(path) or not s.get("trace_start_us"):
        return []
    t0 = s["trace_start_us"] / 1e6
    timeline = [(t - t0, kbit) for (t, kbit) in load_renditions(path)]
    fig, ax = plt.subplots(figsize=(10, 4))
    end = link_line(profile, ax)
    xs, ys = [], []
    for i, (t, kbit) in enumerate(timeline):
        until = timeline[i + 1][0] if i + 1 < len(timeline) else end
        xs += [max(t, 0.0), until]
        ys += [kbit, kbit]
    ax.plot(xs, ys, color="tab:red", label="moq-abr rendition played")
    title = f"{profile}: the rendition moq-abr's viewer played against the link rate"
    save_rate_plot(fig, ax, title, os.path.join(plots, f"abr_{profile}.png"))
    a = s["abr"]
    switches = ", ".join(f"{t:.1f} s → {kbit}" for (t, kbit) in timeline[1:]) or "none"
    return [
        f"![renditions {profile}](plots/abr_{profile}.png)",
        "",
        f"moq-abr: started on {timeline[0][1]} kbit/s; switches up {a['switches_up']}, down {a['switches_down']} "
        f"({switches}); mean rendition {a['rendition_kbit']:.0f} kbit/s.",
        "",
    ]


ABR_GOAL_PROFILES = ["const_500", "cascade"]


def abr_goals(summaries):
    """The renditions goal: moq-abr on CONST_500 and CASCADE, ≥ 95 % intact frames, mean
    latency ≤ 500 ms and no stall; every Twitch profile listed beside the other systems."""
    first = list(typical_runs(summaries).values())
    if not any(s["system"] == "moq-abr" for s in first):
        return []
    md = ["## Renditions (moq-abr) goals", ""]
    md.append("Goal: ≥ 95 % of frames rendered intact, mean latency ≤ 500 ms and 0 stalls on CONST_500 and "
              "CASCADE. Every profile of the run, with the other systems beside moq-abr:")
    md.append("")
    md.append("| profile | system | frames | mean (ms) | p95 (ms) | stalls | delivered kbit/s (intact) | switches up / down | verdict |")
    md.append("|---|---|---|---|---|---|---|---|---|")
    profiles = []
    for s in first:
        if s["profile"] not in profiles and any(t["system"] == "moq-abr" and t["profile"] == s["profile"] for t in first):
            profiles.append(s["profile"])
    for profile in profiles:
        rows = sorted((s for s in first if s["profile"] == profile), key=lambda s: (s["system"] != "moq-abr", s["system"]))
        for s in rows:
            frames = intact_share(s)
            a = s.get("abr")
            switches = f"{a['switches_up']} / {a['switches_down']}" if a else "–"
            verdict = ""
            if s["system"] == "moq-abr" and profile in ABR_GOAL_PROFILES:
                ok = frames >= 0.95 and s["latency_mean_ms"] <= 500 and s["stalls"] == 0
                verdict = "met" if ok else "not met"
            md.append(
                f"| {profile} | {s['system']} | {frames:.1%} | {s['latency_mean_ms']:.0f} | {s['latency_p95_ms']:.0f} "
                f"| {s['stalls']} | {fmt(s.get('intact_kbit'))} | {switches} | {verdict} |"
            )
    md.append("")
    return md


def command_output(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:.{digits}f}"


def intact(s):
    """Frames rendered from exactly the bytes sent (runs from before the check: all rendered)."""
    return s.get("frames_rendered_intact", s["frames_rendered"])


def intact_share(s):
    return intact(s) / s["frames_captured"] if s["frames_captured"] else 0.0


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def spread(values, digits=0):
    """The median of the repetitions' values, with their min–max when there are several."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    low, high = fmt(min(values), digits), fmt(max(values), digits)
    if low == high:
        return low
    return f"{fmt(median(values), digits)} ({low}–{high})"


def repetitions(summaries):
    """(system, profile) -> that run's summaries, by repetition, in the order first run."""
    found = {}
    for s in summaries:
        found.setdefault((s["system"], s["profile"]), []).append(s)
    for runs_ in found.values():
        runs_.sort(key=lambda s: s["repetition"])
    return found


# Numbers that name one repetition (which one, when its link trace started) rather than measure
# it: `typical` takes them from the repetition it names, so they match that repetition's frames.
RUN_IDENTITY = ("repetition", "trace_start_us")


def typical(runs_):
    """One summary standing for a run's repetitions: the median of every number, and the rest
    (nested figures, the fields in `RUN_IDENTITY`) from the median repetition by mean latency."""
    middle = sorted(runs_, key=lambda s: s["latency_mean_ms"])[(len(runs_) - 1) // 2]
    t = dict(middle)
    for key, value in middle.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in RUN_IDENTITY:
            values = [r[key] for r in runs_ if isinstance(r.get(key), (int, float))]
            if len(values) == len(runs_):
                t[key] = median(values)
    return t


def typical_runs(summaries):
    """(system, profile) -> its typical summary (see `typical`)."""
    return {key: typical(runs_) for key, runs_ in repetitions(summaries).items()}


def table(summaries, profile, baseline="moq-baseline"):
    """One row per system: latency mean and p95, frames and stalls as median (min–max) over the
    repetitions, every other figure as the median."""
    runs_by = {k: v for k, v in repetitions(summaries).items() if k[1] == profile}
    base = typical(runs_by[(baseline, profile)]) if (baseline, profile) in runs_by else None
    lines = [
        "| system | latency mean (ms) | p50 | p95 | p99 | × baseline mean | rendered intact + damaged / captured | OTDR 1 s | stalls; total | gaps | capacity eff. (intact) | delivered kbit/s intact (all rendered) | jitter (ms) | TS-DF mean/max (ms) | overhead | CPU µs/frame snd / rcv |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (system, _), runs_ in runs_by.items():
        s = typical(runs_)
        ratio = s["latency_mean_ms"] / base["latency_mean_ms"] if base and base["latency_mean_ms"] else None
        damaged = median([r["frames_rendered"] - intact(r) for r in runs_])
        lines.append(
            f"| {system} | {spread([r['latency_mean_ms'] for r in runs_])} | {fmt(s['latency_p50_ms'])} "
            f"| {spread([r['latency_p95_ms'] for r in runs_])} | {fmt(s['latency_p99_ms'])} | {fmt(ratio, 2)} "
            f"| {spread([intact(r) for r in runs_])} + {fmt(damaged)} / {fmt(s['frames_captured'])} "
            f"| {fmt(s['otdr_1s'], 2)} | {spread([r['stalls'] for r in runs_])}; {fmt(s['stall_total_s'], 1)} s | {fmt(s['frame_gaps'])} "
            f"| {fmt(s.get('intact_capacity_efficiency'), 2)} | {fmt(s.get('intact_kbit'))} ({fmt(s.get('rendered_kbit'))}) "
            f"| {fmt(s['jitter_ms'], 1)} | {fmt(s['ts_df_mean_ms'])}/{fmt(s['ts_df_max_ms'])} "
            f"| {fmt(s['overhead'], 3)} | {fmt(s['cpu_us_per_frame_sender'])} / {fmt(s['cpu_us_per_frame_receiver'])} |"
        )
    if base and base.get("fluid_ratio") is not None:
        lines.append("")
        lines.append(f"Sanity check: measured baseline mean latency ÷ fluid-model mean = {base['fluid_ratio']:.2f}.")
    return "\n".join(lines)


def stages_table(summaries, profile):
    """Median over the repetitions of each stage's p50 / p95 (ms), for the systems that report them."""
    runs_by = {k: v for k, v in repetitions(summaries).items() if k[1] == profile and all(r.get("stages") for r in v)}
    if not runs_by:
        return []
    lines = [
        "Delay per stage of the frames rendered (ms, p50 / p95, median over the repetitions): queued in moqsink until "
        "QUIC took the object, in flight until moqsrc had it whole, then in moqsrc's reorder buffer until it left:",
        "",
        "| system | queued p50 / p95 | in flight p50 / p95 | reorder p50 / p95 |",
        "|---|---|---|---|",
    ]
    for (system, _), runs_ in runs_by.items():
        cell = lambda stage: " / ".join(  # noqa: E731
            fmt(median([r["stages"][f"{stage}_{q}_ms"] for r in runs_])) for q in ("p50", "p95")
        )
        lines.append(f"| {system} | {cell('queued')} | {cell('flight')} | {cell('reorder')} |")
    lines.append("")
    return lines


def av_section(summaries):
    """Audio beside video: `moq-av` against `moq-skip-gops` (the same video without audio)."""
    av = [s for s in summaries if s.get("av")]
    if not av:
        return []
    md = [
        "## Audio and video",
        "",
        "`moq-av` is `moq-skip-gops` with a live 64 kbit/s Opus track (20 ms frames) on moqsink's "
        "`audio_0` pad beside the reference video; its receiver decodes both pads (`opusdec`, "
        "`fakesink sync=true`). Audio gaps: holes over 60 ms in the audio moqsrc output (running time). "
        "A/V skew: for each video frame output after the first second, the audio frame nearest to it at "
        "the sender, and how much further apart (or closer) moqsrc's timestamps put them than the "
        "sender's; median over repetitions, min–max in brackets.",
        "",
        "| profile | system | video rendered / captured | latency mean / p95 (ms) | stalls | audio output / sent | audio gaps > 60 ms (longest ms) | A/V skew p95 / max (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    profiles = []
    for s in av:
        if s["profile"] not in profiles:
            profiles.append(s["profile"])
    for profile in profiles:
        for system in ["moq-av", "moq-skip-gops"]:
            runs_ = [s for s in summaries if s["profile"] == profile and s["system"] == system]
            if not runs_:
                continue

            row = (
                f"| {profile} | {system} | {spread([r['frames_rendered'] for r in runs_])} / {runs_[0]['frames_captured']} "
                f"| {spread([r['latency_mean_ms'] for r in runs_])} / {spread([r['latency_p95_ms'] for r in runs_])} "
                f"| {spread([r['stalls'] for r in runs_])} "
            )
            if runs_[0].get("av"):
                a = [r["av"] for r in runs_]
                row += (
                    f"| {spread([x['audio_frames_output'] for x in a])} / {spread([x['audio_frames_sent'] for x in a])} "
                    f"| {spread([x['audio_gaps'] for x in a])} ({spread([x['audio_gap_longest_ms'] for x in a])}) "
                    f"| {spread([x['av_skew_p95_ms'] for x in a], 1)} / {spread([x['av_skew_max_ms'] for x in a], 1)} |"
                )
            else:
                row += "| – | – | – |"
            md.append(row)
    md.append("")
    return md


OUR_SKIPPING = ["moq-skip-gops", "moq-combined"]
SRT = ["srt-125ms", "srt-500ms"]


def lowest_rate_step(steps):
    """The first of the lowest-rate steps of profile_steps()."""
    return min(steps, key=lambda step: step[2])


def step_rendering(rows, trace_start, start, end):
    """Frames rendered intact while the link was in [start, end) s of its trace: how many, how many
    of them were also sent in that window, their median latency and the longest gap; and how
    many damaged pictures were shown in that window besides."""
    lo, hi = trace_start + start, trace_start + end
    in_window = [r for r in rows if r["rendered"] is not None and lo <= r["rendered"] < hi]
    shown = [r for r in in_window if r["intact"]]
    fresh = [r for r in shown if r["available"] >= lo]
    times = [lo] + sorted(r["rendered"] for r in shown) + [hi]
    latencies = sorted(r["rendered"] - r["available"] for r in shown)
    return {
        "rendered": len(shown),
        "damaged": len(in_window) - len(shown),
        "fresh": len(fresh),
        "median_s": latencies[len(latencies) // 2] if latencies else None,
        "longest_gap_s": max(b - a for a, b in zip(times, times[1:])),
    }


def rendered_before_tail(rows, tail_s=2.0):
    """(rendered intact, captured) over the frames sent from the receiver's first rendered frame up to
    `tail_s` before the stream's last frame: a receiver that tears down its buffer when the
    sender hangs up (SRT, RTP) loses about its latency's worth of final frames, which is an
    artefact of ending the run, not of the link."""
    captured = captured_rows(rows)
    if not captured:
        return 0, 0
    end = rows[-1]["available"] - tail_s
    window = [r for r in captured if r["available"] <= end]
    return sum(r["intact"] for r in window), len(window)


def fraction(counts):
    rendered, captured = counts
    return rendered / captured if captured else 0.0


def goals(summaries, all_runs, profiles_dir):
    """The issue's goals, each checked against this run's figures: the median over the
    repetitions, and per frame the median repetition's (see `typical`)."""
    first = typical_runs(summaries)

    def lowest_mean(profile):
        ours = [first[(s, profile)] for s in OUR_SKIPPING if (s, profile) in first]
        return min(ours, key=lambda s: s["latency_mean_ms"], default=None)

    profiles = sorted({p for (_, p) in first if not p.startswith("loss")})
    md = ["## Goals", ""]
    md.append("1. `moq-skip-gops` or `moq-combined` mean latency ≤ 0.25 × baseline where baseline's mean exceeds 2 s:")
    md.append("")
    for p in profiles:
        base = first.get(("moq-baseline", p))
        if not base or base["latency_mean_ms"] <= 2000:
            continue
        best = lowest_mean(p)
        if best:
            ratio = best["latency_mean_ms"] / base["latency_mean_ms"]
            verdict = "met" if ratio <= 0.25 else "not met"
            md.append(
                f"   - {p}: {best['system']} {best['latency_mean_ms']:.0f} ms vs baseline "
                f"{base['latency_mean_ms']:.0f} ms = {ratio:.2f}× — {verdict}"
            )
    best = lowest_mean("intra_cascade")
    if best:
        verdict = "met" if best["latency_mean_ms"] <= 1000 else "not met"
        md.append("")
        md.append(
            f"2. INTRA_CASCADE mean ≤ 1.0 s: {best['system']} {best['latency_mean_ms']:.0f} ms — {verdict}."
        )
        start, end, kbit = lowest_rate_step(profile_steps("intra_cascade", profiles_dir))
        md.append("")
        md.append(
            f"3. Pictures during INTRA_CASCADE's {kbit} kbit/s step ({start:.0f}–{end:.0f} s of the link trace); "
            "\"fresh\" = intact frames that were also sent during the step; latency and gaps count intact "
            "pictures only:"
        )
        md.append("")
        md.append(
            "   | system | rendered intact | fresh | median latency (s) | longest gap without a new intact picture (s) "
            "| damaged pictures shown |"
        )
        md.append("   |---|---|---|---|---|---|")
        for (system, profile, rep), rows in sorted(all_runs.items()):
            s = first.get((system, profile))
            if profile != "intra_cascade" or not s or rep != s["repetition"] or s.get("trace_start_us") is None:
                continue
            r = step_rendering(rows, s["trace_start_us"] / 1e6, start, end)
            md.append(
                f"   | {system} | {r['rendered']} | {r['fresh']} | {fmt(r['median_s'], 2)} | {r['longest_gap_s']:.2f} "
                f"| {r['damaged']} |"
            )
    md.append("")
    md.append(
        "4. Lower p95 latency than SRT with at least as many frames rendered intact (of our skipping modes faster than SRT at p95, the one "
        "rendering the larger share of its frames). "
        "Frames are counted up to 2 s before the stream's end, because SRT's receiver drops what it still buffers "
        "when the sender hangs up:"
    )
    md.append("")
    md.append("   | profile | ours: p95 (ms), rendered intact / captured | SRT: p95 (ms), rendered intact / captured | p95 lower | frames ≥ | verdict |")
    md.append("   |---|---|---|---|---|---|")
    for p in profiles:
        counted = [
            (first[(s, p)], rendered_before_tail(all_runs.get((s, p, first[(s, p)]["repetition"]), [])))
            for s in OUR_SKIPPING
            if (s, p) in first
        ]
        for srt in (first.get((s, p)) for s in SRT):
            if not counted or not srt:
                continue
            srt_n = rendered_before_tail(all_runs.get((srt["system"], p, srt["repetition"]), []))
            faster = [c for c in counted if c[0]["latency_p95_ms"] < srt["latency_p95_ms"]]
            lower = bool(faster)
            best, ours_n = (
                max(faster, key=lambda c: fraction(c[1]))
                if faster
                else min(counted, key=lambda c: c[0]["latency_p95_ms"])
            )
            more = fraction(ours_n) >= fraction(srt_n)
            md.append(
                f"   | {p} vs {srt['system']} | {best['system']} {best['latency_p95_ms']:.0f}, {ours_n[0]} / {ours_n[1]} "
                f"| {srt['latency_p95_ms']:.0f}, {srt_n[0]} / {srt_n[1]} | {'yes' if lower else 'no'} "
                f"| {'yes' if more else 'no'} | {'met' if lower and more else 'not met'} |"
            )
    md.append("")
    return md


IDLE_LINK = "loss0_rtt50"


def comparator_check(summaries, all_runs, profiles_dir):
    """Each system on the loss-free link: its latency against the link's one-way delay, the
    buffering it is configured with and what its decoder needs, from its median repetition."""
    typical_ = {k: s for k, s in typical_runs(summaries).items() if k[1] == IDLE_LINK}
    if not typical_:
        return []
    steps = load_profile(IDLE_LINK, profiles_dir)["steps"]
    one_way = steps[0].get("delay_ms", 0)
    md = [
        "## Comparators on an idle link",
        "",
        f"Each system on `{IDLE_LINK}` (no rate limit, no loss, {one_way} ms each way), median repetition. "
        "*Configured*: the receiver buffering set (moqsrc and rtpjitterbuffer `latency`, SRT's latency); "
        "*decoder*: the latency `avdec_h264` reports (reordering the B frames: the same for every system); "
        "*excess* = latency mean − one-way delay − configured − decoder, what a system costs beyond its "
        "settings. *Delivered after*: median time from the sender's hand-off to the AU leaving the receiving "
        "element for the decoder's queue (a jitter buffer that only timestamps delivers at once; SRT's "
        "receiver holds packets for its latency). *Render interval*: the 5th and 95th percentile of the time "
        "between one picture rendered and the next; the stream's frame interval is 41.7 ms, so a spread means "
        "pictures are shown unevenly.",
        "",
        "| system | latency mean (ms) | configured (ms) | decoder (ms) | excess (ms) | delivered after (ms) "
        "| render interval p5 / p95 (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (system, _), s in sorted(typical_.items()):
        rows = all_runs.get((system, IDLE_LINK, s["repetition"]), [])
        delivered = [r["arrived"] - r["available"] for r in rows if r["rendered"] is not None and r["arrived"] is not None]
        configured, decoder = s.get("configured_latency_ms"), s.get("decoder_latency_ms")
        excess = None
        if decoder is not None:
            excess = s["latency_mean_ms"] - one_way - (configured or 0) - decoder
        shown = sorted(r["rendered"] for r in rows if r["rendered"] is not None)
        intervals = sorted((b - a) * 1000 for a, b in zip(shown, shown[1:]))
        cadence = (
            f"{fmt(intervals[len(intervals) // 20], 1)} / {fmt(intervals[len(intervals) * 19 // 20], 1)}"
            if intervals
            else "–"
        )
        md.append(
            f"| {system} | {fmt(s['latency_mean_ms'])} | {fmt(configured) if configured is not None else 'none to set'} "
            f"| {fmt(decoder)} | {fmt(excess)} | {fmt(median(delivered) * 1000) if delivered else '–'} | {cadence} |"
        )
    md.append("")
    return md


def mean_link_kbit(steps, seconds=None):
    """Time-weighted mean rate of profile_steps() over their first `seconds` (the whole trace
    by default); 0 (unconstrained) steps make it None."""
    if any(kbit == 0 for (_, _, kbit) in steps):
        return None
    total = steps[-1][1] if steps else 0.0
    limit = min(seconds or total, total)
    weighted = sum(kbit * max(0.0, min(end, limit) - start) for (start, end, kbit) in steps)
    return weighted / limit if limit else None


ADAPTIVE = ["moq-adaptive", "moq-adaptive-delay"]
WEBRTC = "webrtc-gcc"
# The adaptive-delivery issue's targets per profile: (least share of frames, mean ms, p95 ms, most stalls).
ADAPTIVE_TARGETS = {
    "const_500": (0.95, 450, 600, 0),
    "cascade": (0.95, 500, None, None),
    "spike": (0.95, 500, None, None),
    "slow_jitters": (0.95, 500, None, None),
    "intra_cascade": (0.90, 600, None, 2),
}


def webrtc_comparison(summaries):
    """Our adaptive systems against `webrtc-gcc` on each congested profile of the run (medians
    over the repetitions): at least its share of frames intact, at most its p95 latency, at least
    90 % of its delivered (intact) bitrate."""
    first = typical_runs(summaries)
    profiles = sorted({p for (system, p) in first if system == WEBRTC and not p.startswith("loss")})
    rows = []
    for profile in profiles:
        theirs = first[(WEBRTC, profile)]
        for system in ADAPTIVE:
            ours = first.get((system, profile))
            if not ours:
                continue
            frames_ok = intact_share(ours) >= intact_share(theirs)
            p95_ok = ours["latency_p95_ms"] <= theirs["latency_p95_ms"]
            kbit = (ours.get("intact_kbit"), theirs.get("intact_kbit"))
            rate_ok = None if None in kbit else kbit[0] >= 0.9 * kbit[1]
            verdict = "met" if frames_ok and p95_ok and rate_ok else "not met"
            rows.append(
                f"| {profile} | {system} | {intact_share(ours):.1%} vs {intact_share(theirs):.1%} "
                f"| {ours['latency_p95_ms']:.0f} vs {theirs['latency_p95_ms']:.0f} "
                f"| {fmt(kbit[0])} vs {fmt(kbit[1])} | {verdict} |"
            )
    if not rows:
        return []
    return [
        "## Against WebRTC",
        "",
        f"Our adaptive systems against `{WEBRTC}` in the same run, each congested profile (medians over the "
        "repetitions): at least its share of frames rendered intact, at most its p95 latency, at least 90 % of "
        "its delivered bitrate (frames rendered intact).",
        "",
        f"| profile | system | frames intact (ours vs {WEBRTC}) | p95 ms | delivered kbit/s | verdict |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def adaptive_goals(summaries, profiles_dir):
    """The adaptive-delivery goals, each checked against this run's figures (medians over the
    repetitions)."""
    first = typical_runs(summaries)
    if not any(system in ADAPTIVE for system, _ in first):
        return []
    md = ["## Rate adaptation goals", ""]
    md.append("1. Frames, latency and stalls per profile (frames = rendered intact ÷ captured):")
    md.append("")
    md.append("   | profile | system | frames | mean (ms) | p95 (ms) | stalls | target | verdict |")
    md.append("   |---|---|---|---|---|---|---|---|")
    for profile, (share, mean, p95, stalls) in ADAPTIVE_TARGETS.items():
        for system in ADAPTIVE:
            s = first.get((system, profile))
            if not s:
                continue
            frames = intact_share(s)
            ok = frames >= share and s["latency_mean_ms"] <= mean
            target = f"≥ {share:.0%}, mean ≤ {mean}"
            if p95 is not None:
                ok = ok and s["latency_p95_ms"] <= p95
                target += f", p95 ≤ {p95}"
            if stalls is not None:
                ok = ok and s["stalls"] <= stalls
                target += f", stalls ≤ {stalls}"
            md.append(
                f"   | {profile} | {system} | {frames:.1%} | {s['latency_mean_ms']:.0f} | {s['latency_p95_ms']:.0f} "
                f"| {s['stalls']} | {target} | {'met' if ok else 'not met'} |"
            )
    md.append("")
    md.append("2. Delivered media bitrate (frames rendered intact) ÷ the link's mean rate over the run, target ≥ 85 %:")
    md.append("")
    for profile in ["const_500", "cascade"]:
        for system in ADAPTIVE:
            s = first.get((system, profile))
            if not s:
                continue
            seconds = s["frames_captured"] / 24.0
            link = mean_link_kbit(profile_steps(profile, profiles_dir), seconds)
            if not link:
                continue
            if s.get("intact_kbit") is None:
                continue
            share = s["intact_kbit"] / link
            md.append(
                f"   - {profile}, {system}: {s['intact_kbit']:.0f} of {link:.0f} kbit/s = {share:.1%} — "
                f"{'met' if share >= 0.85 else 'not met'}"
            )
    base = first.get(("moq-skip-gops", IDLE_LINK))
    md.append("")
    md.append(f"3. Uncongested link ({IDLE_LINK}: no rate limit, 25 ms each way), mean latency no worse than "
              "fixed-rate `moq-skip-gops` + 5 %:")
    md.append("")
    if not base or not any((system, IDLE_LINK) in first for system in ADAPTIVE):
        md.append(f"   - not measured: this run has no `moq-skip-gops` and adaptive runs on {IDLE_LINK}.")
    else:
        for system in ADAPTIVE:
            s = first.get((system, IDLE_LINK))
            if s:
                ratio = s["latency_mean_ms"] / base["latency_mean_ms"]
                md.append(
                    f"   - {system} {s['latency_mean_ms']:.0f} ms vs {base['latency_mean_ms']:.0f} ms = {ratio:.2f}× — "
                    f"{'met' if ratio <= 1.05 else 'not met'}"
                )
    walk = [(system, first[(system, "random_walk")]) for system, p in first if p == "random_walk"]
    if walk:
        md.append("")
        md.append("4. RANDOM_WALK (a rate step every second, 150–2500 kbit/s, 50 ms each way); target for the "
                  "adaptive systems ≥ 95 % of frames and ≤ 2 stalls per minute:")
        md.append("")
        md.append("   | system | frames | mean (ms) | p95 (ms) | stalls per minute | verdict |")
        md.append("   |---|---|---|---|---|---|")
        for system, s in sorted(walk):
            frames = intact_share(s)
            minutes = s["frames_captured"] / 24.0 / 60.0
            per_minute = s["stalls"] / minutes if minutes else 0.0
            verdict = ""
            if system in ADAPTIVE:
                verdict = "met" if frames >= 0.95 and per_minute <= 2 else "not met"
            md.append(
                f"   | {system} | {frames:.1%} | {s['latency_mean_ms']:.0f} | {s['latency_p95_ms']:.0f} "
                f"| {per_minute:.1f} | {verdict} |"
            )
    md.append("")
    return md


FANOUT_GOAL_SUBSCRIBERS = 100
# A thousand viewers spread over a three-node moq-relay cluster.
CLUSTER_GOAL_SUBSCRIBERS = 1000
CLUSTER_GOAL_P99_MS = 200.0


def fanout_method(f):
    """How a fan-out run measures, from its fanout.json."""
    clip = f["clip"]
    return (
        f"One sender process plays a {clip['width']}x{clip['height']} H.264 clip ({clip['kbit']:.0f} kbit/s, "
        f"{clip['fps']} fps, GoP {clip['gop']}, x264 `{clip['x264']}`; encoded once, looped) through "
        "`appsrc ! h264parse ! moqsink` (default delivery, `sync=true`). N subscribers in the benchmark process, each "
        "its own QUIC connection (moq-session, nothing decoded), take the `video` track of `live` from the sink "
        "(`direct`), through moq-relay (`relay`) or through a cluster of three moq-relay nodes (`cluster`: the sender "
        "publishes to the first, the subscribers go to the nodes in turn). Latency = the wall time an object's last byte arrived − its "
        "frame header's availability time (when the sender had the frame). After all N receive media, "
        f"{f['warmup_s']} s of warm-up, then {f['measure_s']} s measured: the frames that became available in that "
        f"window, arriving up to {fmt(f['late_grace_s'])} s after it. Expected = frames in the window × N. CPU = "
        "utime + stime (`/proc/PID/stat`) of the sender and of moq-relay, each its own process, in % of one core and "
        "per object the subscribers received; RSS = the largest `VmRSS` sample (1 s) in the window; subscribers' CPU "
        "= the benchmark process's."
    )


def fanout_section(dirs):
    """Fan-out (`moq-bench --fanout`, each DIR/fanout.json): one moqsink, N subscribers,
    directly and through moq-relay; latency, losses, CPU and memory per N. One run in full,
    several as their spread."""
    paths = [os.path.join(d, "fanout.json") for d in dirs]
    if not all(os.path.exists(p) for p in paths):
        return []
    f = load_json(paths[0])
    md = ["## Fan-out", "", fanout_method(f), ""]
    if len(dirs) > 1:
        return md + fanout_spread(dirs)
    builds = ran_builds([f])
    runs = sorted(
        f["runs"],
        key=lambda r: (r["path"] != "direct", builds.index(r["build"]) if r["build"] in builds else len(builds), r["subscribers"]),
    )
    load = " ".join(fmt(v, 2) for v in f["load_before"]) if f.get("load_before") else "–"
    load_after = " ".join(fmt(v, 2) for v in f["load_after"]) if f.get("load_after") else "–"
    md += [
        f"{f['cpus']} CPUs; load average before {load}, after {load_after}.",
        "",
        "| path | build | N | connected | latency p50 (ms) | p99 | worst subscriber p99 | received / expected | lost "
        "| sender CPU % | sender µs/object | sender RSS (MB) | relay CPU % | relay µs/object | relay RSS (MB) | subscribers' CPU % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        ratio = f"{r['received_ratio']:.2%}" if r.get("received_ratio") is not None else "–"
        md.append(
            f"| {r['path']} | {r['build']} | {r['subscribers']} | {r['connected']} | {fmt(r['latency_p50_ms'], 1)} "
            f"| {fmt(r['latency_p99_ms'], 1)} | {fmt(r['worst_subscriber_p99_ms'], 1)} "
            f"| {r['objects_received']} / {r['objects_expected']} ({ratio}) | {r['frames_lost']} "
            f"| {fmt(r['sender_cpu_pct'], 1)} | {fmt(r['sender_cpu_us_per_object'], 1)} | {fmt(r['sender_rss_mb'], 1)} "
            f"| {fmt(r['relay_cpu_pct'], 1)} | {fmt(r['relay_cpu_us_per_object'], 1)} | {fmt(r['relay_rss_mb'], 1)} "
            f"| {fmt(r['subscribers_cpu_pct'], 1)} |"
        )
    md.append("")
    md += fanout_nodes(runs)
    md += fanout_abr(runs)
    if len(builds) > 1:
        direct = {(r["build"], r["subscribers"]): r for r in runs if r["path"] == "direct"}
        counts = sorted({n for (_, n) in direct})
        md.append("Direct, the builds side by side (" + " / ".join(f"`{b}`" for b in builds) + "):")
        md.append("")
        md.append("| N | latency p99 (ms) | sender CPU % | sender µs/object | sender RSS (MB) | received / expected |")
        md.append("|---|---|---|---|---|---|")

        def cells(n, key, digits=1):
            return " / ".join(fmt(direct[(b, n)][key], digits) if (b, n) in direct else "–" for b in builds)

        for n in counts:
            received = " / ".join(
                f"{direct[(b, n)]['received_ratio']:.2%}"
                if (b, n) in direct and direct[(b, n)].get("received_ratio") is not None
                else "–"
                for b in builds
            )
            md.append(
                f"| {n} | {cells(n, 'latency_p99_ms')} | {cells(n, 'sender_cpu_pct')} "
                f"| {cells(n, 'sender_cpu_us_per_object')} | {cells(n, 'sender_rss_mb')} | {received} |"
            )
        md.append("")
    md += fanout_verdicts([f], builds)
    md.append("")
    return md


def cluster_section(dirs):
    """Fan-out through a cluster of moq-relay nodes (runs of `moq-bench --fanout --cluster`):
    the spread of the runs of each clip bitrate."""
    by_clip = {}
    for d in dirs:
        x264 = load_json(os.path.join(d, "fanout.json"))["clip"]["x264"]
        kbit = int(re.search(r"bitrate=(\d+)", x264).group(1))
        by_clip.setdefault(kbit, []).append(d)
    if not by_clip:
        return []
    md = [
        "### Through a cluster",
        "",
        "The same measure through three moq-relay nodes joined as a cluster: the sender publishes to the first, "
        "subscriber *i* goes to node *i* mod 3, the relay columns add the nodes up "
        "([benchmarks/fanout/cluster](benchmarks/fanout/cluster/README.md) has each run and node).",
        "",
    ]
    for kbit, group in sorted(by_clip.items(), reverse=True):
        md += [f"The clip encoded at {kbit} kbit/s:", ""] + fanout_spread(group)
    return md


def ran_builds(files):
    """The builds of fan-out runs (labels, first first) that have runs: a build given but
    never run (a cluster-only run runs the first) has nothing to compare."""
    builds = []
    for f in files:
        builds += [b["label"] for b in f["builds"] if b["label"] not in builds]
    return [b for b in builds if any(r["build"] == b for f in files for r in f["runs"])]


def fanout_nodes(runs):
    """Each cluster run's nodes: the subscribers sent to it, its CPU and RSS."""
    clustered = [r for r in runs if r.get("nodes")]
    if not clustered:
        return []
    md = [
        "Through the cluster, per node (the sender publishes to node 1; the relay columns above add the nodes up):",
        "",
        "| N | node | subscribers | CPU % of a core | RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    for r in clustered:
        for i, node in enumerate(r["nodes"], 1):
            md.append(
                f"| {r['subscribers']} | {i} | {node['subscribers']} | {fmt(node['cpu_pct'], 1)} "
                f"| {fmt(node.get('rss_mb'), 1)} |"
            )
    md.append("")
    return md


def fanout_abr(runs):
    """The runs with ABR players (`--abr-share`): what the players got, and the raw
    subscribers beside them against the run of the same N without players."""
    with_abr = [r for r in runs if r.get("abr")]
    if not with_abr:
        return []
    md = [
        "ABR players (`moqsrc abr=auto`, each behind its own link) among the viewers of a cluster run; "
        "the raw subscribers of the run beside the same N without players:",
        "",
        "| N | players | link (kbit/s) | ladder (kbit/s) | frames % (median, lowest) | renditions (% of player-seconds) "
        "| switches | latency p95 (ms, median, max) | players' CPU % | raw p99 (ms) with / without | raw lost with / without |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in with_abr:
        a = r["abr"]
        n = r["subscribers"] + a["count"]
        alone = next(
            (o for o in runs if not o.get("abr") and o["path"] == r["path"].removesuffix("-abr") and o["subscribers"] == n),
            None,
        )
        renditions = ", ".join(f"{name} {fmt(pct, 0)}" for name, pct in a["renditions_pct"])
        md.append(
            f"| {n} | {a['count']} | {a['link_kbit']} | {' / '.join(str(k) for k in a['ladder_kbit'])} "
            f"| {fmt(a.get('frames_pct_median'), 0)}, {fmt(a.get('frames_pct_min'), 0)} | {renditions or '–'} "
            f"| {a['switches']} | {fmt(a.get('p95_ms_median'), 0)}, {fmt(a.get('p95_ms_max'), 0)} "
            f"| {fmt(a.get('cpu_pct'), 1)} "
            f"| {fmt(r.get('latency_p99_ms'), 1)} / {fmt(alone.get('latency_p99_ms') if alone else None, 1)} "
            f"| {r['frames_lost']} / {alone['frames_lost'] if alone else '–'} |"
        )
    md.append("")
    return md


def fanout_spread(dirs):
    """Several fan-out runs (each DIR/fanout.json): per path, build and N, the median with
    min–max of each figure, and the direct cost of every other build against the first."""
    rows = {}
    files = [load_json(os.path.join(d, "fanout.json")) for d in dirs]
    builds = ran_builds(files)
    for f in files:
        for r in f["runs"]:
            rows.setdefault((r["path"], r["build"], r["subscribers"]), []).append(r)
    keys = sorted(rows, key=lambda k: (k[0] != "direct", builds.index(k[1]), k[2]))
    md = [
        f"Median of {len(dirs)} runs, (min–max) in brackets:",
        "",
        f"| path | build | N | received / expected ({len(dirs)} runs) | latency p50 (ms) | p99 (ms) "
        "| sender % of a core | sender µs/object | sender RSS (MB) | relay % of a core | relay RSS (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in keys:
        rs = rows[k]

        def cell(key):
            return spread([r.get(key) for r in rs], 1)

        received = sum(r["objects_received"] for r in rs)
        expected = sum(r["objects_expected"] for r in rs)
        md.append(
            f"| {k[0]} | {k[1]} | {k[2]} | {received} / {expected} | {cell('latency_p50_ms')} "
            f"| {cell('latency_p99_ms')} | {cell('sender_cpu_pct')} | {cell('sender_cpu_us_per_object')} "
            f"| {cell('sender_rss_mb')} | {cell('relay_cpu_pct')} | {cell('relay_rss_mb')} |"
        )
    md.append("")
    base = builds[0]
    for other in builds[1:]:
        md.append(f"Direct, per N, what `{other}` costs more than `{base}` (difference of the medians):")
        md.append("")
        md.append("| N | sender % of a core | sender µs/object | sender RSS (MB) |")
        md.append("|---|---|---|---|")
        for k in keys:
            if k[0] != "direct" or k[1] != base or ("direct", other, k[2]) not in rows:
                continue

            def more(key):
                a = median([r[key] for r in rows[k]])
                b = median([r[key] for r in rows[("direct", other, k[2])]])
                return f"{b - a:+.1f}"

            md.append(
                f"| {k[2]} | {more('sender_cpu_pct')} | {more('sender_cpu_us_per_object')} | {more('sender_rss_mb')} |"
            )
        md.append("")
    md += fanout_verdicts(files, builds)
    md.append("")
    return md


def fanout_verdicts(files, builds):
    """Over one or several fan-out runs: where p99 first passed the limit, the failures, and
    the goal (the first build, direct, at FANOUT_GOAL_SUBSCRIBERS; medians over the runs)."""
    limit = files[0]["p99_limit_ms"]
    first_over = {}
    for f in files:
        for t in f["first_p99_over_limit"]:
            first_over.setdefault((t["path"], t["build"]), []).append(t)
    md = []
    for (path, build), ts in sorted(first_over.items(), key=lambda kv: (kv[0][0] != "direct", builds.index(kv[0][1]))):
        if all(t["first_n_over"] is None for t in ts):
            first = f"none up to {max(t['largest_n'] for t in ts)}" + (" in any run" if len(ts) > 1 else "")
        else:
            first = "N = " + " / ".join(str(t["first_n_over"]) if t["first_n_over"] is not None else "none" for t in ts)
            first += " (per run)" if len(ts) > 1 else ""
        md.append(f"- p99 > {limit:.0f} ms first at ({path}, {build}): {first}")
    md += [f"- failed: {failure}" for f in files for failure in f.get("failures", [])]
    goal = [
        r
        for f in files
        for r in f["runs"]
        if (r["path"], r["build"], r["subscribers"]) == ("direct", builds[0], FANOUT_GOAL_SUBSCRIBERS)
    ]
    if goal:
        p99 = median([r["latency_p99_ms"] for r in goal])
        cpu = median([r["sender_cpu_pct"] for r in goal])
        met = p99 < limit and cpu < 100 and all(r["objects_received"] == r["objects_expected"] for r in goal)
        md.append(
            f"- Goal: {FANOUT_GOAL_SUBSCRIBERS} subscribers from one moqsink with p99 < {limit:.0f} ms and the sender "
            f"under one core: p99 {p99:.1f} ms, {cpu:.1f} % of a core — {'met' if met else 'not met'}"
        )
    cluster = [
        r for f in files for r in f["runs"] if (r["path"], r["subscribers"]) == ("cluster", CLUSTER_GOAL_SUBSCRIBERS)
    ]
    if cluster:
        p99 = median([r["latency_p99_ms"] if r["latency_p99_ms"] is not None else float("inf") for r in cluster])
        lost = sum(r["objects_expected"] - r["objects_received"] for r in cluster)
        met = p99 < CLUSTER_GOAL_P99_MS and lost == 0
        md.append(
            f"- Goal: {CLUSTER_GOAL_SUBSCRIBERS} subscribers across the cluster with p99 < {CLUSTER_GOAL_P99_MS:.0f} ms "
            f"and no object lost: p99 {fmt(p99, 1)} ms, {lost} objects lost — {'met' if met else 'not met'}"
        )
    return md


def fanout_only(out):
    """A directory with only a fan-out run: DIR/FANOUT.md."""
    md = ["# Fan-out benchmark", ""]
    md.append("Generated by `moq-bench --fanout` (tools/bench) and `tools/bench/report.py`.")
    md.append("")
    md.append(f"- {platform.platform()}, {os.cpu_count()} CPUs")
    md.append(f"- {command_output(['gst-launch-1.0', '--version'])}")
    md.append("")
    md.extend(fanout_section([out]))
    write_text(os.path.join(out, "FANOUT.md"), "\n".join(md))


def main():
    parser = argparse.ArgumentParser(description="Plots and BENCHMARKS.md from a moq-bench run.")
    parser.add_argument("out", help="the moq-bench --out directory")
    parser.add_argument("--reading", help="the reading to include (default: DIR/reading.md)")
    parser.add_argument("--publish", metavar="REPO", help="also write REPO/BENCHMARKS.md and REPO/benchmarks/")
    parser.add_argument(
        "--fanout-runs", nargs="+", metavar="DIR", help="other fan-out runs: print the spread of DIR and these"
    )
    parser.add_argument(
        "--fanout",
        nargs="+",
        metavar="DIR",
        help="the fan-out runs of the report's fan-out section, as their spread (default: DIR/fanout.json)",
    )
    parser.add_argument(
        "--cluster",
        nargs="+",
        metavar="DIR",
        help="fan-out runs through a cluster (--cluster), as their spread per clip bitrate",
    )
    args = parser.parse_args()
    out = args.out
    if args.fanout_runs:
        print("\n".join(fanout_spread([out] + args.fanout_runs)))
        return
    missing = [
        d for d in (args.fanout or []) + (args.cluster or []) if not os.path.exists(os.path.join(d, "fanout.json"))
    ]
    if missing:
        parser.error(f"no fanout.json in {', '.join(missing)}")
    reading_file = args.reading or os.path.join(out, "reading.md")
    if not os.path.exists(os.path.join(out, "summary.json")) and os.path.exists(os.path.join(out, "fanout.json")):
        fanout_only(out)
        return
    summaries = load_json(os.path.join(out, "summary.json"))
    all_runs = runs(out)
    add_intact_bitrate(summaries, all_runs)
    plots = os.path.join(out, "plots")
    os.makedirs(plots, exist_ok=True)
    profiles = []
    for (system, profile, rep) in all_runs:
        if profile not in profiles:
            profiles.append(profile)
    staged = set()
    for profile in profiles:
        by_system = {}
        for (s, p, rep), rows in sorted(all_runs.items()):
            if p == profile and rows:
                by_system.setdefault(s, []).append(rows)
        plot_latency(profile, by_system, os.path.join(plots, f"latency_{profile}.png"))
        plot_bitrate(profile, by_system, os.path.join(plots, f"bitrate_{profile}.png"))
        plot_ccdf(profile, by_system, os.path.join(plots, f"ccdf_{profile}.png"))
        if plot_stages(profile, by_system, os.path.join(plots, f"stages_{profile}.png")):
            staged.add(profile)

    queues = {}
    for profile in profiles:
        try:
            p = load_profile(profile)
            queues[profile] = p.get("queue_bytes")
        except OSError:
            queues[profile] = None

    md = ["# Benchmarks", ""]
    md.append("Generated by `moq-bench` (tools/bench) and `tools/bench/report.py`; rerun with `pipelines/bench.sh`.")
    md.append("")
    md.append("## Method")
    md.append("")
    md.append(
        "One reference stream is encoded once (x264, ~600 kbit/s, 24 fps, 320x240, GoP 15, up to 3 B frames, "
        "a noise patch over a moving ball so every frame differs) and played out live by a sender process, the "
        "same for every system; each access unit carries its frame id and a digest of its slices in an SEI "
        "message. The sender's output "
        "crosses `linkem` (userspace bottleneck: rate trace, delay, loss, drop-tail queue) to a receiver that "
        "hands each AU through `h264parse` and an unbounded `queue` (so the receiving element is never held up "
        "by the sink's wait) to `avdec_h264` and renders on the clock (`fakesink sync=true`). Latency of a frame = render "
        "wall time − the time the sender was handed it (one machine, one clock). Frames captured = frames sent "
        "from the first frame the receiver rendered on to the run's end (the sender plays on for 2 s, not "
        "scored: an encoder with lookahead hands over all it holds at the end of its stream in one burst, "
        "which a live stream never sees). Rendered intact: the frame's slices reached the decoder "
        "exactly as sent (digest checked before the decoder), and so did every reference picture before it since "
        "its GoP's keyframe; other rendered frames are damaged (decoded from altered data or concealed over a "
        "missing reference; for the systems that encode live, which frames are keyframes and which are "
        "referenced is taken from what arrived). Goals count intact frames. Stalls: no new picture for > 250 ms; frame gaps: "
        "> 83 ms but ≤ 250 ms. OTDR: frames rendered within 1 s ÷ captured. Delivered bitrate: media bitrate of the frames "
        "rendered intact (of all rendered in brackets); capacity efficiency: that ÷ min(stream bitrate, mean link "
        "rate). Jitter: RFC 3550 on arrival at the receiver's "
        "depacketizer. TS-DF: EBU 3337 per 1 s window. Overhead: UDP payload bytes linkem forwarded (both "
        "directions) ÷ media bytes sent. CPU: user+system time of the sender process and of the receiver "
        "process (which also runs linkem) per captured frame. Stages (our `moq-*` modes with a fixed-rate "
        "stream; seed 004): *queued* = availability → QUIC took the object's last byte (moqsink's "
        "`object-handoff` signal, `signal-object-handoffs=true`); *in flight* = → moqsrc had it whole (its "
        "`timestamp/x-moq-received` meta; QUIC's send buffer, the bottleneck queue, propagation, "
        "retransmissions); *reorder buffer* = → it left moqsrc for the decoder."
    )
    md.append("")
    md.append(
        "Systems: `moq-baseline` (one stream per GoP, older first; receiver `skip-forward=false`), "
        "`moq-deprioritize-b` (B frames on their own low-priority streams; `skip-forward=false`), "
        "`moq-skip-gops` and `moq-combined` (`skip-forward=true`); moqsrc `latency=100`; moqsink "
        "`max-backlog=600000`, a budget that never binds here, so every mode behaves as in the thesis (the "
        "default 3 s budget would cap the in-order modes' latency by dropping whole GoPs). "
        "`srt-125ms` / `srt-500ms`: `mpegtsmux alignment=7 ! srtsink latency=125|500` → `srtsrc latency=0 ! "
        "tsdemux latency=0`, the sink with `ts-offset=-125000000` (SRT then holds packets for the sender's "
        "latency only; tsdemux times frames by the PCR, which mpegtsmux writes a fixed 125 ms behind the PTS, "
        "and the sink takes that back; tsdemux's pads are relinked when it announces the program again). "
        "`rtp-udp`: `h264parse config-interval=-1 ! rtph264pay config-interval=-1 mtu=1200` → `rtpjitterbuffer "
        "latency=100 ! rtph264depay` (the jitter buffer's defaults otherwise: no retransmission, which plain "
        "UDP cannot carry). On the loss × RTT grid: baseline, baseline with `delivery-timeout=500` (partial "
        "reliability), SRT and RTP; its loss-free 50 ms cell checks each comparator's settings (\"Comparators "
        "on an idle link\") and also runs `moq-skip-gops` and the adaptive systems (rate adaptation's goal on "
        "an uncongested path)."
    )
    md.append("")
    if any(s["system"].startswith("moq-adaptive") for s in summaries):
        md.append(
            "`moq-adaptive` (QUIC congestion control CUBIC) and `moq-adaptive-delay` (our delay-aware controller): "
            "the encoder is in the loop. The sender decodes the reference stream and encodes it again live with "
            "x264 (`tune=zerolatency`: no B frames, no lookahead; GoP 15; `vbv-buf-capacity=120`), whose bitrate moqsink sets "
            "(`rate-control=encoder`, start 600, floor 150, ceiling 1200 kbit/s; `delivery=skip-gops`). A frame "
            "is available when its decoded picture reaches the encoder, so the encoder's latency counts and the "
            "harness's decoding does not. Sizes and delivered bitrate are those of the live encoding. The "
            "convergence tables give the seconds after each rate step until the target was below the new link "
            "rate (a drop) or at 80 % of 0.85 × the new rate (a rise)."
        )
        md.append("")
    if any(s["system"] == "moq-abr" for s in summaries):
        md.append(
            "`moq-abr`: renditions with receiver-driven ABR. The sender decodes the reference stream and encodes it "
            "again live into three x264 encoders (250, 600 and 1200 kbit/s, the reference's 320x240, "
            "`tune=zerolatency`, GoP 15, `vbv-buf-capacity=120`) on moqsink's `video_0..2` pads in one alternate group "
            "(`video_N::alt-group=1 video_N::bitrate=…`, `delivery=skip-gops`, moqsink's default controller). "
            "The viewer's moqsrc (`abr=auto`, `latency=100`, `skip-forward=true`) starts on the lowest and chooses "
            "by its path. Availability is taken before the encoders as for `moq-adaptive`; a frame's size is that "
            "of the rendition it was received in (the lowest's when it never arrived). The rendition plots show the "
            "rendition played (from moqsrc's `moq-rendition` messages, taken within 100 ms) against the link rate."
        )
        md.append("")
    if any(s["system"] == "moq-skip-gops-delay" for s in summaries):
        md.append(
            "`moq-skip-gops-delay`: `moq-skip-gops` with moqsink `congestion-control=delay` and no rate control, "
            "the fixed-rate reference stream: what the controller alone changes."
        )
        md.append("")
    if any(s["system"] == "moq-gst" for s in summaries):
        md.append(
            "`moq-gst`: moq-dev's GStreamer plugin (moq-gst 0.4.20, moq-lite) publishing to moq-relay next to the "
            "sender; its `moqsrc` plays from the relay across the link (`moqsrc ! h264parse ! avdec_h264`), as "
            "its documentation shows: `url`, `broadcast` and TLS are its only settings, it has no receiver buffer "
            "or latency to set. Its sender CPU includes moq-relay's."
        )
        md.append("")
    if any(s["system"] == WEBRTC for s in summaries):
        md.append(WEBRTC_METHOD)
        md.append("")
    unavailable = os.path.join(out, "moq-gst-unavailable.txt")
    if os.path.exists(unavailable):
        md.append("moq-gst was not compared: it did not build on this machine. The end of its build log:")
        md.append("")
        md.append("```")
        md.append(read_text(unavailable).strip())
        md.append("```")
        md.append("")
    md.extend(webrtc_unavailable(out))
    md.append("## Machine")
    md.append("")
    md.append(f"- {platform.platform()}, {os.cpu_count()} CPUs")
    md.append(f"- {command_output(['gst-launch-1.0', '--version'])}")
    md.append(f"- {command_output(['rustc', '--version'])}")
    md.append("")
    md.append("## Profiles and queue sizes")
    md.append("")
    md.append("| profile | queue (bytes) |")
    md.append("|---|---|")
    for profile in profiles:
        md.append(f"| {profile} | {queues.get(profile) or '–'} |")
    md.append("")
    md.append("## Results")
    md.append("")
    reps = sorted({s["repetition"] for s in summaries})
    md.append(
        f"Repetitions: {len(reps)}. Latency mean and p95, frames rendered intact and stalls are the median over the "
        "repetitions with their min–max in brackets; every other figure is the median. Plots show every repetition."
    )
    md.append("")
    first = [s for s in summaries if s["repetition"] == 0]
    for profile in profiles:
        md.append(f"### {profile}")
        md.append("")
        md.append(table(summaries, profile))
        md.append("")
        md.extend(stages_table(summaries, profile))
        if os.path.exists(os.path.join(plots, f"latency_{profile}.png")):
            md.append(f"![latency {profile}](plots/latency_{profile}.png)")
            md.append(f"![bitrate {profile}](plots/bitrate_{profile}.png)")
            md.append(f"![ccdf {profile}](plots/ccdf_{profile}.png)")
            if profile in staged:
                md.append(f"![stages {profile}](plots/stages_{profile}.png)")
            md.append("")
        md.extend(adaptation_section(out, first, profile, plots, all_runs))
        md.extend(recovery_section(summaries, all_runs, profile))
        md.extend(abr_section(out, first, profile, plots))
    md.extend(av_section(summaries))
    md.extend(comparator_check(summaries, all_runs, PROFILES))
    md.extend(goals(summaries, all_runs, PROFILES))
    md.extend(adaptive_goals(summaries, PROFILES))
    md.extend(webrtc_comparison(summaries))
    md.extend(variants_section(out, summaries, profiles))
    md.extend(abr_goals(summaries))
    md.extend(fanout_section(args.fanout or [out]))
    md.extend(cluster_section(args.cluster or []))
    md.append("## Reading")
    md.append("")
    if os.path.exists(reading_file):
        md.append(read_text(reading_file).strip())
    else:
        md.append("_No reading written for this run yet._")
    md.append("")
    report = "\n".join(md)
    write_text(os.path.join(out, "BENCHMARKS.md"), report)
    if args.publish:
        publish(out, plots, report, args.publish)


WEBRTC_METHOD = (
    f"`{WEBRTC}`: WebRTC as users run it for low latency, gst-plugins-rs 0.15 (`pipelines/install-webrtc.sh`). "
    "The sender decodes the reference stream and hands the pictures to `webrtcsink` (`congestion-control=gcc`: "
    "Google Congestion Control, `rtpgccbwe`, sets the encoder's bitrate; start 600, floor 150, ceiling "
    "1200 kbit/s as `moq-adaptive`; FEC and retransmission as webrtcsink's defaults; its mitigation modes, which "
    "halve the frame rate or scale the picture down on slow links, off). webrtcsink encodes with x264enc set as "
    "`moq-adaptive`'s encoder (`tune=zerolatency`, GoP 15, `speed-preset=veryfast`, `vbv-buf-capacity=120`) in the constrained-baseline "
    "profile WebRTC negotiates for H.264; SPS and PPS go once per keyframe from webrtcsink's parser, not from the "
    "payloader (GStreamer 1.22's `rtph264pay` repeats them before every slice of an IDR picture, and x264's "
    "zero-latency pictures have several, which splits keyframes at the depayloader; a browser would not "
    "notice). The receiver is `webrtcsrc` up to RTP (webrtcbin's jitter buffer at "
    "`latency=100`, NACK), then `rtph264depay` and the common probe, decoder and sink. They meet through "
    "gst-plugins-rs's signalling server; ICE runs on 127.0.0.1 only with no STUN or TURN server, the sender's "
    "agent on the port linkem forwards to, and the receiver given linkem's address as the sender's candidate, "
    "so media and feedback cross the link (checked on linkem's byte counters). Availability is taken before "
    "the encoder as for `moq-adaptive`; sizes and delivered bitrate are those of the live encoding; its "
    "adaptation plot shows the bitrate GCC set and rtpgccbwe's estimate."
)


def webrtc_unavailable(out):
    """The note that `webrtc-gcc` was not compared, from OUT/webrtc-unavailable.txt."""
    path = os.path.join(out, "webrtc-unavailable.txt")
    if not os.path.exists(path):
        return []
    return [
        f"**`{WEBRTC}` was not compared**: its plugins could not be had on this machine. Why, and the end of "
        "their build log:",
        "",
        "```",
        read_text(path).strip(),
        "```",
        "",
    ]


def publish(out, plots, report, repo):
    """Copies the report into the repository, plot links pointing at benchmarks/plots/."""
    dest = os.path.join(repo, "benchmarks")
    shutil.rmtree(os.path.join(dest, "plots"), ignore_errors=True)
    shutil.copytree(plots, os.path.join(dest, "plots"))
    shutil.copy(os.path.join(out, "summary.json"), os.path.join(dest, "summary.json"))
    report = report.replace("](plots/", "](benchmarks/plots/")
    write_text(os.path.join(repo, "BENCHMARKS.md"), report)


if __name__ == "__main__":
    main()
