//! The path estimate on synthetic traces of the link model in `sim.rs`.

use std::time::{Duration, Instant};

use super::sim::{self, Fixed, Outcome, Scenario, constant, step};
use super::*;

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Smallest and largest estimate (kbit/s) over `[from, to)`; every sample must have one.
fn range(out: &Outcome, from: Duration, to: Duration) -> (f64, f64) {
    let mut lo = f64::MAX;
    let mut hi = f64::MIN;
    for s in out.between(from, to) {
        assert!(
            s.estimate.delivery_rate.is_some(),
            "no estimate at {:?}",
            s.t
        );
        lo = lo.min(s.kbit());
        hi = hi.max(s.kbit());
    }
    (lo, hi)
}

/// First time from `from` on after which every sample is within `tolerance` of `target`.
fn settled(out: &Outcome, from: Duration, target: f64, tolerance: f64) -> Option<Duration> {
    let mut since = None;
    for s in out.samples.iter().filter(|s| s.t >= from) {
        if (s.kbit() - target).abs() <= target * tolerance {
            since.get_or_insert(s.t);
        } else {
            since = None;
        }
    }
    since.map(|t| t - from)
}

fn within(value: f64, target: f64, tolerance: f64) -> bool {
    (value - target).abs() <= target * tolerance
}

#[test]
fn constant_link_is_measured_within_ten_percent_and_stays_still() {
    // 500 kbit/s, a 400 kbit/s stream (app-limited) with keyframes 6x the other frames.
    let sc = Scenario::new(constant(500_000), constant(400_000), 60 * S);
    let out = sim::run(&sc, &mut Fixed(40_000));
    let (lo, hi) = range(&out, 2 * S, 60 * S);
    let first = out
        .samples
        .iter()
        .find(|s| s.estimate.delivery_rate.is_some())
        .map(|s| s.t);
    println!(
        "constant 500 kbit/s, 400 kbit/s stream: first estimate at {first:?}, \
         2-60 s: {lo:.1}..{hi:.1} kbit/s, peak-to-peak {:.1}%",
        (hi - lo) / 5.0
    );
    assert!(
        within(lo, 500.0, 0.10) && within(hi, 500.0, 0.10),
        "{lo} {hi}"
    );
    assert!((hi - lo) / 500.0 < 0.10, "peak-to-peak {lo}..{hi}");
    // Bursts measure the path: the estimate is not the stream's rate.
    assert!(out.samples.last().is_some_and(|s| s.estimate.confirmed));
}

#[test]
fn short_bursts_keep_the_estimate_current() {
    // 400 kbit/s on a 500 kbit/s link with keyframes 4 times the other frames: at times
    // too few busy intervals for the 1 s window alone (its estimate was once 1.5 s old);
    // acknowledgements prompt (2 ms), as a media sender asks for.
    let mut sc = Scenario::new(constant(500_000), constant(400_000), 60 * S);
    sc.max_ack_delay = Duration::from_millis(2);
    sc.key_ratio = 4.0;
    let out = sim::run(&sc, &mut Fixed(40_000));
    let (lo, hi) = range(&out, 5 * S, 60 * S);
    let oldest = out
        .between(5 * S, 60 * S)
        .filter_map(|s| s.estimate.path_sample_age)
        .max();
    println!("400 kbit/s stream on 500: {lo:.1}..{hi:.1} kbit/s, oldest sample {oldest:?}");
    assert!(
        within(lo, 500.0, 0.10) && within(hi, 500.0, 0.10),
        "{lo} {hi}"
    );
    assert!(oldest.is_some_and(|age| age < PATH_WINDOW), "{oldest:?}");
}

#[test]
fn step_down_is_followed_within_two_seconds() {
    // 1200 -> 400 kbit/s at 10 s. The 600 kbit/s stream then exceeds the link (the
    // window holds it back, the queue fills); the 300 kbit/s one stays below it, and only
    // its bursts show the new rate.
    for media in [600_000, 300_000] {
        let sc = Scenario::new(step(1_200_000, 10 * S, 400_000), constant(media), 20 * S);
        let out = sim::run(&sc, &mut Fixed(30_000));
        let (lo, hi) = range(&out, 3 * S, 10 * S);
        let after = settled(&out, 10 * S, 400.0, 0.15);
        let (lo2, hi2) = range(&out, 12 * S, 20 * S);
        println!(
            "step 1200->400 kbit/s, {} kbit/s stream: before {lo:.1}..{hi:.1}, within 15% of \
             400 after {after:?}, 12-20 s: {lo2:.1}..{hi2:.1} kbit/s",
            media / 1000
        );
        assert!(within(lo, 1200.0, 0.10) && within(hi, 1200.0, 0.10));
        assert!(after.is_some_and(|d| d <= 2 * S), "{after:?}");
        assert!(within(lo2, 400.0, 0.15) && within(hi2, 400.0, 0.15));
    }
}

#[test]
fn the_recent_rate_shows_a_fall_before_the_one_second_rate() {
    // 1200 -> 300 kbit/s at 10 s under a 600 kbit/s stream in a window large enough to
    // fill the link's queue: the link is busy from the fall on.
    let sc = Scenario::new(step(1_200_000, 10 * S, 300_000), constant(600_000), 14 * S);
    let out = sim::run(&sc, &mut Fixed(60_000));
    // Time after the fall until a figure came within 20 % of the new link.
    let near = |figure: fn(&PathEstimate) -> Option<u64>| {
        out.between(10 * S, 14 * S)
            .find(|s| figure(&s.estimate).is_some_and(|r| within(r as f64, 300e3, 0.2)))
            .map(|s| s.t - 10 * S)
    };
    let recent = near(|e| e.recent_delivery_rate);
    let path = near(|e| e.delivery_rate);
    println!("within 20 % of the new link after: recent rate {recent:?}, 1 s rate {path:?}");
    assert!(recent.is_some_and(|d| d <= 600 * MS), "{recent:?}");
    assert!(
        path.is_none_or(|p| recent.is_some_and(|r| r < p)),
        "{recent:?} {path:?}"
    );
    // Before the fall the stream is below the link: its bursts are too short for a
    // recent rate, which therefore speaks only of a saturated link.
    let before = out.between(3 * S, 10 * S).filter(|s| {
        s.estimate
            .recent_delivery_rate
            .is_some_and(|r| (r as f64) < 0.8 * 1200e3)
    });
    assert_eq!(before.count(), 0);
}

#[test]
fn slow_links_where_every_packet_is_acknowledged_alone_are_measured() {
    // Below ~400 kbit/s a 1200-byte packet takes longer than the receiver's 25 ms ack
    // delay: every acknowledgement covers one packet, held for that delay.
    let sc = Scenario::new(step(500_000, 10 * S, 300_000), constant(600_000), 20 * S);
    let out = sim::run(&sc, &mut Fixed(30_000));
    let (lo, hi) = range(&out, 3 * S, 10 * S);
    let after = settled(&out, 10 * S, 300.0, 0.15);
    let (lo2, hi2) = range(&out, 12 * S, 20 * S);
    println!(
        "step 500->300 kbit/s, 600 kbit/s stream: before {lo:.1}..{hi:.1}, within 15% of 300 \
         after {after:?}, 12-20 s: {lo2:.1}..{hi2:.1} kbit/s"
    );
    assert!(within(lo, 500.0, 0.10) && within(hi, 500.0, 0.10));
    assert!(after.is_some_and(|d| d <= 2 * S), "{after:?}");
    assert!(within(lo2, 300.0, 0.10) && within(hi2, 300.0, 0.10));
}

#[test]
fn an_app_limited_stream_acknowledged_packet_by_packet_is_measured_on_every_keyframe() {
    // A receiver asked for a 2 ms ack delay (as publishers ask theirs) acknowledges each
    // packet of a keyframe crossing a 1200 kbit/s link alone, a run of about 100 ms: the
    // estimate, told that bound, measures the path on each of them, never holding an old
    // figure.
    let mut sc = Scenario::new(constant(1_200_000), constant(600_000), 20 * S);
    sc.max_ack_delay = Duration::from_millis(2);
    let out = sim::run(&sc, &mut Fixed(60_000));
    let (lo, hi) = range(&out, 2 * S, 20 * S);
    let samples = out.between(2 * S, 20 * S).count();
    let confirmed = out
        .between(2 * S, 20 * S)
        .filter(|s| s.estimate.confirmed)
        .count();
    println!(
        "1200 kbit/s, 600 kbit/s stream, 2 ms ack delay: 2-20 s {lo:.1}..{hi:.1} kbit/s, \
         {confirmed} of {samples} samples measured within the last second"
    );
    assert!(within(lo, 1200.0, 0.10) && within(hi, 1200.0, 0.10));
    assert_eq!(confirmed, samples);
}

#[test]
fn step_up_with_an_app_limited_sender_never_falls_below_what_it_sends() {
    // 400 -> 1200 kbit/s at 10 s. The sender makes 360 kbit/s before, 600 after, probes
    // 900 from 25 s and 1500 (more than the link) from 35 s. Paced: no burst ever shows
    // the path, only the acknowledged rate can raise the estimate.
    let media = vec![
        (Duration::ZERO, 360_000),
        (10 * S, 600_000),
        (25 * S, 900_000),
        (35 * S, 1_500_000),
    ];
    for paced in [true, false] {
        let mut sc = Scenario::new(step(400_000, 10 * S, 1_200_000), media.clone(), 45 * S);
        sc.paced = paced;
        let out = sim::run(&sc, &mut Fixed(60_000));
        let (lo_600, hi_600) = range(&out, 11 * S, 25 * S);
        let (lo_900, hi_900) = range(&out, 27 * S, 35 * S);
        let over = settled(&out, 35 * S, 1200.0, 0.15);
        let (lo_over, hi_over) = range(&out, 38 * S, 45 * S);
        let unconfirmed = out
            .between(11 * S, 25 * S)
            .filter(|s| !s.estimate.confirmed)
            .count();
        println!(
            "step 400->1200 kbit/s, {} sender: 600 kbit/s stream {lo_600:.1}..{hi_600:.1} \
             ({unconfirmed} of 140 samples unconfirmed), 900: {lo_900:.1}..{hi_900:.1}, \
             1500: within 15% of 1200 after {over:?}, then {lo_over:.1}..{hi_over:.1} kbit/s",
            if paced { "paced" } else { "bursty" }
        );
        assert!(lo_600 >= 540.0, "{lo_600}");
        assert!(lo_900 >= 810.0, "{lo_900}");
        assert!(hi_600 <= 1200.0 * 1.1 && hi_900 <= 1200.0 * 1.1);
        assert!(within(lo_over, 1200.0, 0.15) && within(hi_over, 1200.0, 0.15));
        if paced {
            // Nothing but the sender's rate was seen: the estimate says so.
            assert!(unconfirmed > 100, "{unconfirmed}");
        } else {
            // Keyframes measure the new capacity long before the sender needs it.
            assert!(within(hi_600, 1200.0, 0.10), "{hi_600}");
        }
    }
}

#[test]
fn a_rate_measured_on_old_busy_time_says_how_old_it_is() {
    // A saturated second, then (1.5 s later) one short burst: too little for the 1 s
    // window, so the rate is computed again over the sparse window, whose busy time is
    // nearly all the old second's. Computed just now, measured on time 2 s old.
    let t0 = Instant::now();
    let at = |s: f64| t0 + secs(s);
    let mut e = PathEstimator::new();
    e.on_sent(at(0.0), 1200, 1200);
    e.on_ack(at(0.05), at(0.0), 1200, false);
    e.on_rtt(at(0.05), secs(0.05), secs(0.05), secs(0.05));
    let ack_event = |e: &mut PathEstimator, t: f64, queue: f64| {
        for _ in 0..2 {
            e.on_ack(at(t), at(t - 0.05 - queue), 1200, false);
        }
    };
    for i in 0..45 {
        ack_event(&mut e, 0.1 + 0.02 * i as f64, 0.03);
    }
    for i in 0..3 {
        ack_event(&mut e, 2.5 + 0.01 * i as f64, 0.015);
    }
    let now = at(2.55);
    let estimate = e.estimate(now);
    println!(
        "rate {:?}, computed {:?} ago on busy time {:?} old",
        estimate.delivery_rate, estimate.path_sample_age, estimate.path_busy_age
    );
    assert!(estimate.path_sample_age.is_some_and(|age| age < secs(0.1)));
    assert!(estimate.path_busy_age.is_some_and(|age| age >= secs(1.2)));
}

#[test]
fn random_loss_and_an_outage_do_not_collapse_the_estimate() {
    let mut sc = Scenario::new(constant(500_000), constant(400_000), 30 * S);
    sc.loss = 0.01;
    sc.seed = 7;
    let out = sim::run(&sc, &mut Fixed(40_000));
    let (lo, hi) = range(&out, 2 * S, 30 * S);
    let loss = out.samples.last().map_or(0.0, |s| s.estimate.loss_rate);
    println!(
        "1% loss on 500 kbit/s: {} packets lost, 2-30 s: {lo:.1}..{hi:.1} kbit/s, \
         loss rate at the end {:.2}%",
        out.lost_packets,
        loss * 100.0
    );
    assert!(
        within(lo, 500.0, 0.10) && within(hi, 500.0, 0.10),
        "{lo} {hi}"
    );
    assert!(out.lost_packets > 0);

    let mut sc = Scenario::new(constant(500_000), constant(400_000), 30 * S);
    sc.outages = vec![(10 * S, secs(10.2))];
    let out = sim::run(&sc, &mut Fixed(40_000));
    let (lo, hi) = range(&out, 2 * S, 30 * S);
    let (lo_out, _) = range(&out, 10 * S, 12 * S);
    let peak_loss = out
        .samples
        .iter()
        .map(|s| s.estimate.loss_rate)
        .fold(0.0, f64::max);
    println!(
        "200 ms outage at 10 s on 500 kbit/s: {} packets lost, 10-12 s: lowest {lo_out:.1}, \
         2-30 s: {lo:.1}..{hi:.1} kbit/s, peak loss rate {:.1}%",
        out.lost_packets,
        peak_loss * 100.0
    );
    assert!(out.lost_packets > 0 && peak_loss > 0.0);
    assert!(
        within(lo, 500.0, 0.10) && within(hi, 500.0, 0.10),
        "{lo} {hi}"
    );
}

#[test]
fn rtt_inflation_is_reported_as_queue_delay() {
    // 600 kbit/s into 400 kbit/s: the 30 kB window stands in the link's queue (~0.6 s).
    let sc = Scenario::new(constant(400_000), constant(600_000), 15 * S);
    let out = sim::run(&sc, &mut Fixed(30_000));
    let samples: Vec<_> = out.between(5 * S, 15 * S).collect();
    let n = samples.len() as f64;
    let actual = samples
        .iter()
        .map(|s| s.queue_delay.as_secs_f64())
        .sum::<f64>()
        / n;
    let smoothed = samples
        .iter()
        .map(|s| s.estimate.queue_delay.as_secs_f64())
        .sum::<f64>()
        / n;
    let standing = samples
        .iter()
        .map(|s| {
            s.estimate
                .standing_queue_delay
                .unwrap_or_default()
                .as_secs_f64()
        })
        .sum::<f64>()
        / n;
    println!(
        "600 kbit/s into 400 kbit/s: link queue {:.0} ms, queue_delay {:.0} ms, standing \
         {:.0} ms",
        actual * 1e3,
        smoothed * 1e3,
        standing * 1e3
    );
    assert!(within(smoothed, actual, 0.2), "{smoothed} vs {actual}");
    assert!(within(standing, actual, 0.2), "{standing} vs {actual}");

    // Below the link's rate, keyframes pass through the queue but nothing stands in it:
    // the standing queue is zero unless a keyframe's wave fills the whole window.
    let sc = Scenario::new(constant(500_000), constant(400_000), 15 * S);
    let out = sim::run(&sc, &mut Fixed(40_000));
    let mut standing: Vec<Duration> = out
        .between(5 * S, 15 * S)
        .map(|s| s.estimate.standing_queue_delay.unwrap_or_default())
        .collect();
    standing.sort();
    let median = standing[standing.len() / 2];
    let worst = standing.last().copied().unwrap_or_default();
    let smoothed = out
        .between(5 * S, 15 * S)
        .map(|s| s.estimate.queue_delay)
        .max()
        .unwrap_or_default();
    println!(
        "400 kbit/s on 500 kbit/s: standing queue median {median:?}, at most {worst:?}; \
         queue_delay at most {smoothed:?}"
    );
    assert!(median < Duration::from_millis(10), "{median:?}");
    assert!(worst < Duration::from_millis(100), "{worst:?}");
}

#[test]
fn ack_compression_and_jitter_do_not_skew_the_estimate() {
    // Acknowledgements reach the sender in bunches every 10 ms, or with ±3 ms of jitter.
    for (grid, jitter) in [(10, 0), (0, 3)] {
        let mut sc = Scenario::new(constant(2_000_000), constant(1_500_000), 30 * S);
        sc.ack_grid = (grid > 0).then(|| Duration::from_millis(grid));
        sc.return_jitter = Duration::from_millis(jitter);
        let out = sim::run(&sc, &mut Fixed(100_000));
        let (lo, hi) = range(&out, 2 * S, 30 * S);
        println!(
            "2000 kbit/s, acks on a {grid} ms grid, ±{jitter} ms jitter: 2-30 s: \
             {lo:.1}..{hi:.1} kbit/s"
        );
        assert!(
            within(lo, 2000.0, 0.10) && within(hi, 2000.0, 0.10),
            "{lo} {hi}"
        );
    }
}

#[test]
fn odd_inputs_do_not_panic() {
    let t0 = Instant::now();
    let mut e = PathEstimator::new();
    assert_eq!(e.estimate(t0).delivery_rate, None);
    assert!(!e.estimate(t0).confirmed);
    // Time going backwards, packets "sent" after their acknowledgement, huge counts.
    let later = t0 + Duration::from_secs(5);
    e.on_sent(later, u64::MAX, u64::MAX);
    e.on_ack(t0, later, u64::MAX, false);
    e.on_rtt(t0, Duration::ZERO, Duration::MAX, Duration::ZERO);
    e.on_loss(t0, u64::MAX);
    for i in 0..100u64 {
        let now = later + Duration::from_millis(i);
        e.on_ack(now, now - Duration::from_micros(1), u64::MAX, false);
    }
    let est = e.estimate(t0);
    assert!(est.loss_rate.is_finite());
    // A far future does not overflow the bins.
    let far = t0 + Duration::from_secs(100 * 365 * 24 * 3600);
    e.on_ack(far, t0, 1, true);
    let _ = e.estimate(far);
}
