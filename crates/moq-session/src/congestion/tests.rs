//! The tap around quinn's controllers, and the delay-aware controller on the link model
//! of `estimate/sim.rs`.

use std::time::{Duration, Instant};

use super::*;
use crate::estimate::sim::{self, Fixed, Outcome, Rtt, Scenario, constant};

const S: Duration = Duration::from_secs(1);
const MTU: u16 = 1200;
const ACK_DELAY: Duration = Duration::from_millis(25);

#[test]
fn names_parse_back() {
    for cc in CongestionControl::ALL {
        assert_eq!(cc.name().parse::<CongestionControl>(), Ok(cc));
        assert_eq!(cc.to_string(), cc.name());
    }
    assert_eq!(
        " BBR ".parse::<CongestionControl>(),
        Ok(CongestionControl::Bbr)
    );
    assert!("vegas".parse::<CongestionControl>().is_err());
    assert_eq!(CongestionControl::default(), CongestionControl::Cubic);
}

#[test]
fn tap_forwards_every_call_and_copies_share_the_estimator() {
    let t0 = Instant::now();
    let mut plain = Arc::new(NewRenoConfig::default()).build(t0, MTU);
    let mut tapped = Arc::new(TappedFactory::new(
        Arc::new(NewRenoConfig::default()),
        ACK_DELAY,
    ))
    .build(t0, MTU);
    assert_eq!(tapped.window(), plain.window());
    assert_eq!(tapped.initial_window(), plain.initial_window());
    let steps: [(u64, bool); 3] = [(1200, false), (2400, false), (0, true)];
    for (i, (lost, persistent)) in steps.into_iter().enumerate() {
        let now = t0 + Duration::from_millis(100 * (i as u64 + 1));
        for c in [&mut plain, &mut tapped] {
            c.on_sent(now, 3600, i as u64);
            c.on_end_acks(now, 3600, false, None);
            c.on_congestion_event(now, now, persistent, lost);
            c.on_mtu_update(1400);
        }
        assert_eq!(tapped.window(), plain.window(), "after event {i}");
        assert_eq!(
            tapped.metrics().congestion_window,
            plain.metrics().congestion_window
        );
    }
    let copy = tapped.clone_box();
    let Ok(copy) = copy.into_any().downcast::<Tapped>() else {
        panic!("a copy of a tapped controller is tapped");
    };
    let Ok(original) = tapped.into_any().downcast::<Tapped>() else {
        panic!("tapped");
    };
    assert!(Arc::ptr_eq(&copy.estimator(), &original.estimator()));
    let est = lock(&original.estimator).estimate(t0 + S);
    assert!(
        est.loss_rate > 0.99,
        "losses reached the estimator: {est:?}"
    );
    assert_eq!(est.in_flight, 4800);
    // Not tapped: no estimator.
    assert!(plain.into_any().downcast::<Tapped>().is_err());
}

#[test]
fn every_kind_builds_a_tapped_controller() {
    let t0 = Instant::now();
    for cc in CongestionControl::ALL {
        let controller = cc.factory(ACK_DELAY).build(t0, MTU);
        assert!(controller.window() >= 2 * u64::from(MTU), "{cc}");
        assert!(controller.into_any().downcast::<Tapped>().is_ok(), "{cc}");
    }
    let mut transport = quinn::TransportConfig::default();
    CongestionControl::Delay.configure(&mut transport, ACK_DELAY);
}

impl sim::Window for Delay {
    fn window(&self) -> u64 {
        Controller::window(self)
    }

    fn on_sent(&mut self, now: Instant, bytes: u64, _in_flight: u64) {
        self.sent(now, bytes);
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, rtt: Rtt) {
        self.acked(now, sent, bytes, app_limited, rtt.smoothed, rtt.min);
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool) {
        self.acks_done(now, in_flight, app_limited);
    }

    fn on_loss(&mut self, now: Instant, _sent: Instant, lost_bytes: u64) {
        self.lost(now, false, lost_bytes);
    }
}

fn delay() -> Delay {
    Delay::new(Arc::new(DelayConfig::default()), Instant::now(), MTU)
}

/// Mean link queue delay, its 95th percentile, and the link's utilization over
/// `[from, to)`.
fn figures(out: &Outcome, from: Duration, to: Duration) -> (Duration, Duration, f64) {
    let samples: Vec<_> = out.between(from, to).collect();
    let mut delays: Vec<Duration> = samples.iter().map(|s| s.queue_delay).collect();
    delays.sort();
    let n = delays.len().max(1);
    let mean = delays.iter().sum::<Duration>() / n as u32;
    let p95 = delays.get(n * 95 / 100).copied().unwrap_or_default();
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return (mean, p95, 0.0);
    };
    let capacity_bytes: f64 = samples
        .windows(2)
        .map(|w| w[0].capacity as f64 / 8.0 * (w[1].t - w[0].t).as_secs_f64())
        .sum();
    let utilization = (last.served - first.served) as f64 / capacity_bytes;
    (mean, p95, utilization)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
fn delay_keeps_the_queue_near_its_target_on_a_constant_link() {
    // A sender with more than the link carries (1000 kbit/s into 500).
    let sc = Scenario::new(constant(500_000), constant(1_000_000), 30 * S);
    let mut cc = delay();
    let out = sim::run(&sc, &mut cc);
    let (mean, p95, utilization) = figures(&out, 5 * S, 30 * S);
    let windows: Vec<u64> = out.between(10 * S, 30 * S).map(|s| s.window).collect();
    let (lo, hi) = (
        windows.iter().copied().min().unwrap_or(0),
        windows.iter().copied().max().unwrap_or(0),
    );
    // The same with a fixed 60 kB window, as a loss-based controller would reach.
    let big = sim::run(&sc, &mut Fixed(60_000));
    let (big_mean, _, big_utilization) = figures(&big, 5 * S, 30 * S);
    println!(
        "delay, 1000 kbit/s into 500: link queue mean {:.0} ms, p95 {:.0} ms, utilization \
         {:.1}%, window {lo}..{hi} B; a 60 kB window: queue {:.0} ms, utilization {:.1}%",
        ms(mean),
        ms(p95),
        utilization * 100.0,
        ms(big_mean),
        big_utilization * 100.0
    );
    assert!(utilization >= 0.9, "{utilization}");
    assert!(
        mean >= Duration::from_millis(20) && mean <= Duration::from_millis(80),
        "{mean:?}"
    );
    assert!(p95 <= Duration::from_millis(120), "{p95:?}");
    // Still: no probing cycle.
    assert!((hi - lo) as f64 / hi as f64 <= 0.2, "{lo}..{hi}");
}

#[test]
fn delay_follows_a_capacity_drop_and_rise() {
    // 1200 -> 400 kbit/s at 10 s, back to 1200 at 20 s, with a sender of 1500 kbit/s.
    let capacity = vec![
        (Duration::ZERO, 1_200_000),
        (10 * S, 400_000),
        (20 * S, 1_200_000),
    ];
    let sc = Scenario::new(capacity, constant(1_500_000), 30 * S);
    let mut cc = delay();
    let out = sim::run(&sc, &mut cc);
    let (_, peak_after_drop, _) = figures(&out, 10 * S, 12 * S);
    let (mean_low, p95_low, util_low) = figures(&out, 12 * S, 20 * S);
    let (mean_high, _, util_high) = figures(&out, 22 * S, 30 * S);
    println!(
        "delay, 1200 -> 400 -> 1200 kbit/s: queue p95 {:.0} ms in the 2 s after the drop; \
         at 400: mean {:.0} ms, p95 {:.0} ms, utilization {:.1}%; back at 1200: mean {:.0} \
         ms, utilization {:.1}%",
        ms(peak_after_drop),
        ms(mean_low),
        ms(p95_low),
        util_low * 100.0,
        ms(mean_high),
        util_high * 100.0
    );
    assert!(
        util_low >= 0.9 && util_high >= 0.9,
        "{util_low} {util_high}"
    );
    assert!(mean_low <= Duration::from_millis(80), "{mean_low:?}");
    assert!(mean_high <= Duration::from_millis(80), "{mean_high:?}");
}

#[test]
fn delay_lets_an_app_limited_stream_through_and_tolerates_loss() {
    // 400 kbit/s with keyframes on 500 kbit/s: nothing piles up at the sender.
    let sc = Scenario::new(constant(500_000), constant(400_000), 30 * S);
    let mut cc = delay();
    let out = sim::run(&sc, &mut cc);
    let (mean, p95, _) = figures(&out, 5 * S, 30 * S);
    println!(
        "delay, 400 kbit/s stream on 500: backlog at the end {} B, link queue mean {:.0} ms, \
         p95 {:.0} ms",
        out.backlog,
        ms(mean),
        ms(p95)
    );
    assert!(out.backlog < 20_000, "{}", out.backlog);

    // 1% random loss with a sender that fills the link.
    let mut sc = Scenario::new(constant(500_000), constant(1_000_000), 30 * S);
    sc.loss = 0.01;
    sc.seed = 3;
    let mut cc = delay();
    let out = sim::run(&sc, &mut cc);
    let (mean, _, utilization) = figures(&out, 5 * S, 30 * S);
    println!(
        "delay, 1% loss, 1000 kbit/s into 500: {} packets lost, utilization {:.1}%, queue mean \
         {:.0} ms",
        out.lost_packets,
        utilization * 100.0,
        ms(mean)
    );
    assert!(out.lost_packets > 0);
    assert!(utilization >= 0.9, "{utilization}");
}

#[test]
fn delay_grows_out_of_its_smallest_window_when_nothing_queues() {
    // quinn sends a packet only while a full one leaves the bytes in flight below the
    // window, so the smallest window (two packets) carries one per round trip. Its
    // acknowledged rate is then half the window per round trip: following it alone, the
    // window stays at its smallest on any link (here 100 ms of path plus 35 ms of
    // serialisation and ack delay per packet, no queue), with a sender that always has
    // data (as in a mobile dip, where a stale estimate kept it there for a minute).
    let mtu = u64::from(MTU);
    let min = Duration::from_millis(100);
    let mut cc = delay();
    let t0 = Instant::now();
    let mut now = t0 + min;
    // The path measured busy at about 1.9 Mbit/s: prompt acknowledgements of two packets
    // every 10 ms, each packet 40 ms over the minimum round trip.
    cc.acked(now, now - min, mtu, false, min, min);
    cc.acks_done(now, 20 * mtu, false);
    for _ in 0..150 {
        now += Duration::from_millis(10);
        for _ in 0..2 {
            cc.sent(now, mtu);
            cc.acked(
                now,
                now - min - Duration::from_millis(40),
                mtu,
                false,
                min,
                min,
            );
        }
        cc.acks_done(now, 20 * mtu, false);
    }
    assert!(cc.path(now).confirmed);
    // Persistent congestion: the smallest window.
    cc.lost(now, true, 20 * mtu);
    assert_eq!(Controller::window(&cc), 2 * mtu);
    let per_packet = Duration::from_millis(35);
    let mut rounds = Vec::new();
    while now < t0 + Duration::from_secs(12) {
        // A round trip: every packet the window lets out, acknowledged alone 10 ms apart.
        let mut in_flight = 0;
        while in_flight + mtu < Controller::window(&cc) {
            cc.sent(now, mtu);
            in_flight += mtu;
        }
        let sent = now;
        let packets = in_flight / mtu;
        for i in 0..packets {
            let at = sent + min + per_packet + Duration::from_millis(10 * i);
            in_flight -= mtu;
            cc.acked(at, sent, mtu, false, min + per_packet, min);
            cc.acks_done(at, in_flight, false);
            now = at;
        }
        rounds.push(packets);
    }
    let last: Vec<u64> = rounds.iter().rev().take(5).copied().collect();
    println!(
        "delay from its smallest window, no queue: packets per round trip {:?} .. {:?}, \
         window {} B",
        &rounds[..5.min(rounds.len())],
        last,
        Controller::window(&cc)
    );
    assert!(
        last.iter().all(|&p| p >= 4),
        "stuck at its smallest window: {rounds:?}"
    );
}

#[test]
fn delay_window_arithmetic_saturates() {
    assert_eq!(scale(u64::MAX, Duration::MAX, Duration::ZERO), u64::MAX);
    assert_eq!(bytes_in(8_000_000, S), 1_000_000);
    assert_eq!(bytes_in(u64::MAX, Duration::MAX), u64::MAX);
    let mut cc = delay();
    let t0 = Instant::now();
    cc.lost(t0, true, u64::MAX);
    assert_eq!(Controller::window(&cc), 2 * u64::from(MTU));
    cc.acked(t0, t0 + S, u64::MAX, false, Duration::ZERO, Duration::ZERO);
    cc.acks_done(t0, u64::MAX, false);
    assert!(Controller::window(&cc) <= MAX_WINDOW);
}

#[test]
fn delay_keeps_a_usable_window_through_a_one_second_dip_and_fills_the_link_after_it() {
    // A mobile-like path, 50 ms each way: 670 kbit/s, a second at 280, then 790; the
    // sender has 600 kbit/s of media, GoPs of 15 frames.
    let capacity = vec![
        (Duration::ZERO, 670_000),
        (10 * S, 280_000),
        (11 * S, 790_000),
    ];
    let mut sc = Scenario::new(capacity, constant(600_000), 16 * S);
    sc.forward_delay = Duration::from_millis(50);
    sc.return_delay = Duration::from_millis(50);
    let mut cc = delay();
    let out = sim::run(&sc, &mut cc);
    let smallest = out
        .between(10 * S, 13 * S)
        .map(|s| s.window)
        .min()
        .unwrap_or(0);
    let (_, _, util_after) = figures(&out, 11 * S + S / 2, 13 * S);
    let served = |from: Duration, to: Duration| {
        let mut window = out.between(from, to);
        let first = window.next().map_or(0, |s| s.served);
        window.last().map_or(0, |s| s.served) - first
    };
    let after_kbit = served(11 * S, 12 * S) as f64 * 8.0 / 1000.0;
    println!(
        "delay, a second at 280 kbit/s between 670 and 790: smallest window {smallest} B, \
         {after_kbit:.0} kbit through the second after the dip, utilization {:.1}% from 11.5 to 13 s",
        util_after * 100.0
    );
    // The media (600 kbit/s) fits the link again after the dip: the window does not sit
    // at a packet or two while the link idles.
    assert!(smallest >= 4 * u64::from(MTU), "{smallest}");
    assert!(after_kbit >= 450.0, "{after_kbit}");
}
