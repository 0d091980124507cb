"""Tests of report.py's figures, on small made-up runs (`python3 -m unittest` in tools/bench).

The benchmark's quick run has one repetition, so what only goes wrong with several (which
repetition stands for a run, which frames go with it) is checked here.
"""

import json
import os
import tempfile
import unittest

import report

PROFILES = os.path.normpath(report.PROFILES)


def summary(system, profile, repetition, mean_ms, trace_start_us=0, **extra):
    """A run's summary with the figures the goal tables read."""
    s = {
        "system": system,
        "profile": profile,
        "repetition": repetition,
        "trace_start_us": trace_start_us,
        "latency_mean_ms": mean_ms,
        "latency_p50_ms": mean_ms,
        "latency_p95_ms": mean_ms * 1.5,
        "latency_p99_ms": mean_ms * 2,
        "frames_captured": 100,
        "frames_rendered": 100,
        "frames_rendered_intact": 100,
        "stalls": 0,
    }
    s.update(extra)
    return s


def frame(available, rendered, intact=True, size=1000):
    return {
        "id": 0,
        "kind": "reference",
        "size": size,
        "available": available,
        "arrived": rendered,
        "rendered": rendered,
        "intact": intact and rendered is not None,
        "handed_off": None,
        "received": None,
    }


def steady_frames(trace_start, first_s, last_s, latency_s, fps=24):
    """A frame every 1/fps s over [first_s, last_s) of a trace, each rendered latency_s later."""
    count = int((last_s - first_s) * fps)
    return [frame(trace_start + first_s + i / fps, trace_start + first_s + i / fps + latency_s) for i in range(count)]


class Spread(unittest.TestCase):
    def test_one_value_or_equal_values_print_alone(self):
        self.assertEqual(report.spread([412.4]), "412")
        self.assertEqual(report.spread([5, 5, 5]), "5")

    def test_several_values_print_median_with_min_and_max(self):
        self.assertEqual(report.spread([610, 588, 635]), "610 (588–635)")
        self.assertEqual(report.spread([1.0, 2.0], digits=1), "1.5 (1.0–2.0)")

    def test_missing_values_are_left_out(self):
        self.assertEqual(report.spread([None, 3, None]), "3")
        self.assertEqual(report.spread([None]), "–")


class Typical(unittest.TestCase):
    def runs(self):
        # Mean latencies 900, 300, 600: the median repetition is 2. Trace starts far apart, so a
        # median over them would match none of the repetitions.
        return [
            summary("sys", "p", 0, 900, trace_start_us=1_000_000_000, stalls=4),
            summary("sys", "p", 1, 300, trace_start_us=9_000_000_000, stalls=0),
            summary("sys", "p", 2, 600, trace_start_us=2_000_000_000, stalls=1, stages={"queued_p50_ms": 7}),
        ]

    def test_measured_numbers_are_the_median_over_the_repetitions(self):
        t = report.typical(self.runs())
        self.assertEqual(t["latency_mean_ms"], 600)
        self.assertEqual(t["stalls"], 1)

    def test_the_repetition_and_its_trace_start_come_from_the_median_repetition(self):
        t = report.typical(self.runs())
        self.assertEqual(t["repetition"], 2)
        self.assertEqual(t["trace_start_us"], 2_000_000_000)
        self.assertEqual(t["stages"], {"queued_p50_ms": 7})

    def test_a_number_some_repetitions_lack_is_taken_from_the_median_repetition(self):
        runs_ = self.runs()
        runs_[2]["intact_kbit"] = 420.0
        self.assertEqual(report.typical(runs_)["intact_kbit"], 420.0)


class StepRendering(unittest.TestCase):
    def test_counts_intact_fresh_and_damaged_pictures_in_the_window(self):
        t0 = 1000.0
        rows = [
            frame(t0 + 5.0, t0 + 10.5),  # sent before the window, shown in it: not fresh
            frame(t0 + 10.2, t0 + 10.8),  # sent and shown in it: fresh
            frame(t0 + 10.4, t0 + 11.9, intact=False),  # damaged
            frame(t0 + 11.0, None),  # never shown
            frame(t0 + 11.5, t0 + 12.5),  # shown after the window
        ]
        r = report.step_rendering(rows, t0, 10.0, 12.0)
        self.assertEqual((r["rendered"], r["fresh"], r["damaged"]), (2, 1, 1))
        self.assertAlmostEqual(r["median_s"], 5.5)
        # Gaps: 10.0→10.5, 10.5→10.8, 10.8→12.0 (the damaged picture does not end a gap).
        self.assertAlmostEqual(r["longest_gap_s"], 1.2)

    def test_a_window_without_pictures_is_one_gap(self):
        r = report.step_rendering([frame(1.0, 2.0)], 0.0, 10.0, 25.0)
        self.assertEqual((r["rendered"], r["median_s"]), (0, None))
        self.assertAlmostEqual(r["longest_gap_s"], 15.0)


class RenderedBeforeTail(unittest.TestCase):
    def test_counts_from_the_first_rendered_frame_up_to_the_tail(self):
        rows = [frame(0.0, None)] + [frame(i / 10, i / 10 + 0.3, intact=i != 5) for i in range(1, 51)]
        # Captured from frame 1 (0.1 s); the last frame is at 5.0 s, so counted up to 3.0 s: 30 frames.
        self.assertEqual(report.rendered_before_tail(rows, tail_s=2.0), (29, 30))

    def test_nothing_rendered_counts_nothing(self):
        self.assertEqual(report.rendered_before_tail([frame(0.0, None)]), (0, 0))


class Convergence(unittest.TestCase):
    STEPS = [(0.0, 10.0, 1000), (10.0, 20.0, 300), (20.0, 30.0, 300), (30.0, 40.0, 1000)]

    def test_a_drop_settles_when_the_target_is_below_the_new_rate_and_a_rise_at_80_percent_of_its_share(self):
        rows = [(11.0, 900, 0), (12.5, 280, 0), (31.0, 500, 0), (33.0, 700, 0)]
        got = report.convergence(rows, self.STEPS)
        # The 300 → 300 step is no change; the rise's goal is 0.8 × 0.85 × 1000 = 680 kbit/s.
        self.assertEqual([(a, p, k) for (a, p, k, _) in got], [(10.0, 1000, 300), (30.0, 300, 1000)])
        self.assertAlmostEqual(got[0][3], 2.5)
        self.assertAlmostEqual(got[1][3], 3.0)

    def test_a_target_that_never_settles_within_the_step_is_none(self):
        got = report.convergence([(12.0, 400, 0), (21.0, 200, 0)], self.STEPS)
        self.assertIsNone(got[0][3])


class MeanLinkRate(unittest.TestCase):
    def test_time_weighted_over_the_first_seconds(self):
        steps = [(0.0, 10.0, 1000), (10.0, 20.0, 200)]
        self.assertAlmostEqual(report.mean_link_kbit(steps), 600.0)
        self.assertAlmostEqual(report.mean_link_kbit(steps, seconds=15), (10 * 1000 + 5 * 200) / 15)

    def test_an_unconstrained_step_has_no_mean(self):
        self.assertIsNone(report.mean_link_kbit([(0.0, 10.0, 0)]))
        self.assertIsNone(report.mean_link_kbit([(0.0, 10.0, 500), (10.0, 20.0, 0)], seconds=5))


class ProfileSteps(unittest.TestCase):
    def test_steps_run_back_to_back_and_the_first_lowest_rate_step_is_chosen(self):
        steps = [(1000, 10), (200, 5), (800, 10), (200, 5)]
        with tempfile.TemporaryDirectory() as profiles:
            with open(os.path.join(profiles, "trace.json"), "w") as f:
                json.dump({"steps": [{"rate_kbit": k, "duration_s": d} for k, d in steps]}, f)
            found = report.profile_steps("trace", profiles)
        self.assertEqual(found, [(0.0, 10.0, 1000), (10.0, 15.0, 200), (15.0, 25.0, 800), (25.0, 30.0, 200)])
        self.assertEqual(report.lowest_rate_step(found), (10.0, 15.0, 200))


class Goals(unittest.TestCase):
    def intra_cascade_runs(self):
        """moq-skip-gops over three repetitions whose trace starts are hours apart; each shows
        pictures all through its own trace. The median repetition by latency (1) is not the
        one whose start is the median start (2)."""
        starts = {0: 1_000.0, 1: 50_000.0, 2: 9_000.0}
        means = {0: 400, 1: 500, 2: 700}
        summaries = [
            summary("moq-skip-gops", "intra_cascade", rep, means[rep], trace_start_us=int(start * 1e6))
            for rep, start in starts.items()
        ]
        frames = {
            ("moq-skip-gops", "intra_cascade", rep): steady_frames(start, 0, 135, latency_s=0.51)
            for rep, start in starts.items()
        }
        return summaries, frames

    def test_goal_three_reads_the_frames_of_the_median_repetition_against_its_own_trace_start(self):
        summaries, frames = self.intra_cascade_runs()
        md = "\n".join(report.goals(summaries, frames, PROFILES))
        self.assertIn("INTRA_CASCADE mean ≤ 1.0 s: moq-skip-gops 500 ms — met", md)
        row = next(line for line in md.splitlines() if line.strip().startswith("| moq-skip-gops |"))
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        # The 200 kbit/s step lasts 15 s: 15 × 24 pictures shown in it, all intact, 0.51 s old; the
        # 12 sent in the 0.51 s before it are not fresh.
        self.assertEqual(cells[1:4], ["360", "348", "0.51"])
        self.assertEqual(cells[5], "0")

    def test_goal_one_compares_the_medians_of_our_skipping_mode_and_the_baseline(self):
        summaries = [summary("moq-baseline", "cascade", rep, ms) for rep, ms in enumerate([4000, 5000, 6000])]
        summaries += [summary("moq-skip-gops", "cascade", rep, ms) for rep, ms in enumerate([300, 500, 2000])]
        md = "\n".join(report.goals(summaries, {}, PROFILES))
        self.assertIn("cascade: moq-skip-gops 500 ms vs baseline 5000 ms = 0.10× — met", md)


class AdaptiveGoals(unittest.TestCase):
    def test_the_uncongested_goal_says_when_it_was_not_measured(self):
        summaries = [summary("moq-adaptive", "const_500", 0, 400)]
        md = "\n".join(report.adaptive_goals(summaries, PROFILES))
        self.assertIn("not measured", md)

    def test_the_uncongested_goal_compares_with_fixed_rate_skip_gops_on_the_idle_link(self):
        summaries = [
            summary("moq-skip-gops", report.IDLE_LINK, 0, 200),
            summary("moq-adaptive", report.IDLE_LINK, 0, 206),
            summary("moq-adaptive-delay", report.IDLE_LINK, 0, 220),
        ]
        md = "\n".join(report.adaptive_goals(summaries, PROFILES))
        self.assertIn("moq-adaptive 206 ms vs 200 ms = 1.03× — met", md)
        self.assertIn("moq-adaptive-delay 220 ms vs 200 ms = 1.10× — not met", md)
        self.assertNotIn("not measured", md)

    def test_targets_use_intact_frames(self):
        s = summary("moq-adaptive", "const_500", 0, 400, frames_rendered_intact=90)
        md = "\n".join(report.adaptive_goals([s], PROFILES))
        self.assertIn("| const_500 | moq-adaptive | 90.0% | 400 | 600 | 0 | ≥ 95%, mean ≤ 450, p95 ≤ 600, stalls ≤ 0 | not met |", md)


class AgainstWebRtc(unittest.TestCase):
    def test_each_congested_profile_compares_frames_p95_and_delivered_rate(self):
        summaries = [
            summary(report.WEBRTC, "const_500", 0, 300, frames_rendered_intact=95, intact_kbit=400),
            summary("moq-adaptive-delay", "const_500", 0, 200, frames_rendered_intact=97, intact_kbit=370),
            summary(report.WEBRTC, "cascade", 0, 300, frames_rendered_intact=95, intact_kbit=600),
            summary("moq-adaptive-delay", "cascade", 0, 200, frames_rendered_intact=97, intact_kbit=500),
            # The idle link is not a congested profile.
            summary(report.WEBRTC, report.IDLE_LINK, 0, 100),
            summary("moq-adaptive-delay", report.IDLE_LINK, 0, 100),
        ]
        md = "\n".join(report.webrtc_comparison(summaries))
        self.assertIn("| const_500 | moq-adaptive-delay | 97.0% vs 95.0% | 300 vs 450 | 370 vs 400 | met |", md)
        # 500 < 90 % of 600.
        self.assertIn("| cascade | moq-adaptive-delay | 97.0% vs 95.0% | 300 vs 450 | 500 vs 600 | not met |", md)
        self.assertNotIn(report.IDLE_LINK, md)

    def test_no_section_without_webrtc(self):
        self.assertEqual(report.webrtc_comparison([summary("moq-adaptive", "const_500", 0, 400)]), [])

    def test_a_missing_webrtc_is_said_in_the_report(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(report.webrtc_unavailable(out), [])
            with open(os.path.join(out, "webrtc-unavailable.txt"), "w") as f:
                f.write("install-webrtc.sh failed\n")
            md = "\n".join(report.webrtc_unavailable(out))
            self.assertIn("was not compared", md)
            self.assertIn("install-webrtc.sh failed", md)

    def test_webrtc_has_a_rate_log_like_the_adaptive_systems(self):
        self.assertTrue(report.has_rate_log(report.WEBRTC))
        self.assertTrue(report.has_rate_log("moq-adaptive-delay"))
        self.assertFalse(report.has_rate_log("rtp-udp"))


if __name__ == "__main__":
    unittest.main()


def fanout_file(first_n_over, p99_at_100, cpu_at_100=20.0, received=2400):
    """A fan-out run's fanout.json with the direct run of 100 subscribers."""
    return {
        "p99_limit_ms": 100.0,
        "first_p99_over_limit": [
            {"path": "direct", "build": "current", "first_n_over": first_n_over, "largest_n": 200}
        ],
        "runs": [
            {
                "path": "direct",
                "build": "current",
                "subscribers": 100,
                "latency_p99_ms": p99_at_100,
                "sender_cpu_pct": cpu_at_100,
                "objects_received": received,
                "objects_expected": 2400,
            }
        ],
        "failures": [],
    }


class FanoutVerdicts(unittest.TestCase):
    def test_one_run_says_where_p99_first_passed_the_limit(self):
        md = report.fanout_verdicts([fanout_file(None, 5.0)], ["current"])
        self.assertIn("- p99 > 100 ms first at (direct, current): none up to 200", md)
        md = report.fanout_verdicts([fanout_file(50, 150.0)], ["current"])
        self.assertIn("- p99 > 100 ms first at (direct, current): N = 50", md)

    def test_several_runs_list_each_run_where_any_passed(self):
        md = report.fanout_verdicts([fanout_file(None, 5.0), fanout_file(200, 6.0)], ["current"])
        self.assertIn("- p99 > 100 ms first at (direct, current): N = none / 200 (per run)", md)

    def test_the_goal_takes_the_medians_at_100_subscribers(self):
        files = [fanout_file(None, p99) for p99 in (5.0, 120.0, 130.0)]
        goal = report.fanout_verdicts(files, ["current"])[-1]
        self.assertTrue(goal.endswith("core: p99 120.0 ms, 20.0 % of a core — not met"))
        files = [fanout_file(None, p99) for p99 in (5.0, 6.0, 130.0)]
        self.assertTrue(report.fanout_verdicts(files, ["current"])[-1].endswith("— met"))

    def test_a_lost_object_fails_the_goal(self):
        goal = report.fanout_verdicts([fanout_file(None, 5.0, received=2399)], ["current"])[-1]
        self.assertTrue(goal.endswith("— not met"))


class FanoutCluster(unittest.TestCase):
    def cluster_file(self, p99, received):
        f = fanout_file(None, 5.0)
        nodes = [{"subscribers": 334, "cpu_pct": 60.0, "rss_mb": 120.0}] + [
            {"subscribers": 333, "cpu_pct": 55.0, "rss_mb": None}
        ] * 2
        f["runs"].append(
            {
                "path": "cluster",
                "build": "current",
                "subscribers": 1000,
                "latency_p99_ms": p99,
                "objects_received": received,
                "objects_expected": 480000,
                "nodes": nodes,
            }
        )
        return f

    def test_each_node_of_a_cluster_run_has_a_row(self):
        md = report.fanout_nodes(self.cluster_file(150.0, 480000)["runs"])
        self.assertIn("| 1000 | 1 | 334 | 60.0 | 120.0 |", md)
        self.assertIn("| 1000 | 3 | 333 | 55.0 | – |", md)
        self.assertEqual(report.fanout_nodes(fanout_file(None, 5.0)["runs"]), [])

    def test_the_cluster_goal_wants_p99_under_200_ms_and_nothing_lost(self):
        goal = report.fanout_verdicts([self.cluster_file(150.0, 480000)], ["current"])[-1]
        self.assertTrue(goal.endswith("p99 150.0 ms, 0 objects lost — met"), goal)
        goal = report.fanout_verdicts([self.cluster_file(150.0, 479999)], ["current"])[-1]
        self.assertTrue(goal.endswith("— not met"), goal)
        goal = report.fanout_verdicts([self.cluster_file(None, 0)], ["current"])[-1]
        self.assertTrue(goal.endswith("— not met"), goal)


class FanoutAbr(unittest.TestCase):
    def test_players_are_shown_beside_the_run_without_them(self):
        plain = {"path": "cluster", "build": "current", "subscribers": 200, "latency_p99_ms": 30.0, "frames_lost": 0}
        players = {
            "count": 20,
            "link_kbit": 300,
            "ladder_kbit": [1000, 500, 250],
            "frames_pct_median": 99.6,
            "frames_pct_min": 97.1,
            "renditions_pct": [["video-2", 92.5], ["video-1", 7.5]],
            "switches": 3,
            "p95_ms_median": 180.0,
            "p95_ms_max": 420.0,
            "cpu_pct": 11.5,
        }
        mixed = dict(plain, path="cluster-abr", subscribers=180, latency_p99_ms=33.5, frames_lost=2, abr=players)
        md = report.fanout_abr([plain, mixed])
        row = md[4]
        self.assertTrue(row.startswith("| 200 | 20 | 300 | 1000 / 500 / 250 | 100, 97 | video-2 92, video-1 8 | 3 |"), row)
        self.assertTrue(row.endswith("| 180, 420 | 11.5 | 33.5 / 30.0 | 2 / 0 |"), row)
        self.assertEqual(report.fanout_abr([plain]), [])


class EncoderVariants(unittest.TestCase):
    def test_the_variant_is_the_name_suffix_and_plain_names_are_zerolatency(self):
        self.assertEqual(report.encoder_variant("moq-adaptive"), "zerolatency")
        self.assertEqual(report.encoder_variant("moq-adaptive-delay"), "zerolatency")
        self.assertEqual(report.encoder_variant("moq-adaptive-delay-default"), "default")
        self.assertEqual(report.encoder_variant("moq-abr-openh264"), "openh264")
        self.assertIsNone(report.encoder_variant("moq-skip-gops"))


class FloorEpisodes(unittest.TestCase):
    STEPS = [(0.0, 10.0, 1000), (10.0, 20.0, 200), (20.0, 40.0, 1000)]

    def rates(self, target_at):
        return [(i / 10, target_at(i / 10), 0.0) for i in range(400)]

    def test_the_floor_on_a_slow_link_is_not_starving(self):
        # At the floor while the link is at 200 kbit/s and a little after: no 5 s at the
        # floor has a mean link rate above 300.
        total, starved = report.floor_episodes(self.rates(lambda t: 150 if 10 <= t < 15.5 else 500), self.STEPS)
        self.assertAlmostEqual(total, 5.5, delta=0.2)
        self.assertEqual(starved, 0.0)

    def test_five_seconds_at_the_floor_on_a_fast_link_starve(self):
        total, starved = report.floor_episodes(self.rates(lambda t: 150 if t >= 10 else 500), self.STEPS)
        self.assertAlmostEqual(total, 30.0, delta=0.2)
        # The 5 s from 15.7 s on have a mean above 300 kbit/s (0.7 s at 1000): starved from
        # then to the end.
        self.assertAlmostEqual(starved, 39.9 - 15.7, delta=0.3)

    def test_the_mean_link_rate_over_a_window_holds_the_last_step_after_the_trace(self):
        self.assertAlmostEqual(report.mean_link_between(self.STEPS, 8.0, 12.0), 600.0)
        self.assertAlmostEqual(report.mean_link_between(self.STEPS, -3.0, 2.0), 1000.0)
        self.assertAlmostEqual(report.mean_link_between(self.STEPS, 38.0, 42.0), 1000.0)


class Playout(unittest.TestCase):
    def test_the_playout_log_reads_back_as_written(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.playout.csv")
            with open(path, "w") as f:
                f.write("unix_us,target_ms,delay_ms\n1000000,240.5,400.0\n2500000,180.0,350.2\n")
            self.assertEqual(report.load_playout(path), [(1.0, 240.5, 400.0), (2.5, 180.0, 350.2)])

    def test_the_variant_table_shows_the_latency_from_moqsink(self):
        runs_ = [summary("moq-adaptive-default", "const_500", r, 1400.0 + r,
                         published_latency_mean_ms=300.0 + r, stalls=0, intact_kbit=400.0) for r in range(3)]
        with tempfile.TemporaryDirectory() as d:
            rows = report.variant_rows(d, runs_, "const_500", PROFILES)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["mean_ms"], 1401.0)
        self.assertEqual(rows[0]["published_ms"], 301.0)


class Recovery(unittest.TestCase):
    # 1200 → 800 → 400 → 800 → 1200, 30 s each, as CASCADE.
    STEPS = [(0.0, 30.0, 1200), (30.0, 60.0, 800), (60.0, 90.0, 400), (90.0, 120.0, 800), (120.0, 150.0, 1200)]

    def test_each_step_back_up_pairs_with_the_latest_step_down_from_that_rate(self):
        self.assertEqual(report.recovery_episodes(self.STEPS), [(60.0, 90.0, 800), (30.0, 120.0, 1200)])

    def test_latency_back_within_the_margin_counts_from_the_step_up(self):
        # 200 ms before 60 s, 900 ms through the 400 kbit/s step, back to 200 from 96 s on.
        def ms(t):
            return 900.0 if 60.0 <= t < 96.0 else 200.0
        latency = [(i / 24, ms(i / 24)) for i in range(150 * 24)]
        (down, up, kbit, before, back), _ = report.recovery(latency, self.STEPS)
        self.assertEqual((down, up, kbit, before), (60.0, 90.0, 800, 200.0))
        # The 5 s window from t must have a median within 50 ms of 200: t ≥ 93.5 s.
        self.assertAlmostEqual(back, 3.5, delta=0.25)

    def test_latency_that_stays_up_is_not_recovered(self):
        latency = [(i / 24, 200.0 if i / 24 < 60 else 700.0) for i in range(150 * 24)]
        (_, _, _, before, back), (_, _, _, _, back_late) = report.recovery(latency, self.STEPS)
        self.assertEqual(before, 200.0)
        self.assertIsNone(back)
        self.assertIsNone(back_late)

    def test_the_section_gives_the_median_over_repetitions_and_flags_misses(self):
        runs_, frames = [], {}
        for rep, stay in enumerate([False, False, True]):
            runs_.append(summary("moq-adaptive", "cascade", rep, 300.0, trace_start_us=1_000_000))
            rows = []
            for i in range(150 * 24):
                t = i / 24
                late = 60.0 <= t < (150.0 if stay else 95.0)
                rows.append({"available": 1.0 + t, "rendered": 1.0 + t + (0.9 if late else 0.2)})
            frames[("moq-adaptive", "cascade", rep)] = rows
        md = "\n".join(report.recovery_section(runs_, frames, "cascade", PROFILES))
        self.assertIn("| moq-adaptive |", md)
        self.assertIn("1 of 3 not within 10 s", md)
