//! The encoder's target bitrate, from what the network paths to the subscribers carry.
//!
//! A fixed-rate stream above the path rate can only lose frames (the delivery modes choose
//! which); matching the media rate to the path keeps them all. The rule, per update:
//!
//! - each path allows a media rate: a share of its measured delivery rate (QUIC and the
//!   frame headers take a few percent, and a keyframe must fit through without building a
//!   standing queue); a path whose queue delay or loss shows it is overloaded allows less
//!   than what it carries now, at once;
//! - the paths' allowances are combined by the policy (the slowest subscriber, or the
//!   median one when a few slow viewers must not degrade everyone);
//! - the target drops to that at once, and rises toward it, not within a hold time after
//!   a cut: half the gap per second toward what a path was measured to carry; a path not
//!   measured lately is probed a few percent above its last allowance, and one not measured
//!   for long is probed freely, a few percent per second, so a constant link converges
//!   without oscillating;
//! - it always stays within the configured minimum and maximum.
//!
//! No clock is read: callers pass times in µs.

/// Share of a path's delivery rate the media may use.
const HEADROOM: f64 = 0.85;
/// Queue delay above which a path is overloaded (roughly two frame intervals).
const QUEUE_HIGH_US: u64 = 80_000;
/// Below this queue delay a path has room to probe upward.
const QUEUE_LOW_US: u64 = 30_000;
/// Loss above which a path is overloaded.
const LOSS_HIGH: f64 = 0.05;
/// What an overloaded path allows, as a share of what it carries.
const BACKOFF: f64 = 0.8;
/// Rise per second, as a share of the target, while probing above what was measured.
const RISE_PER_S: f64 = 0.12;
/// Share of the gap to a measured allowance closed per second: a path just measured to
/// carry more is taken up within a few seconds.
const CATCH_UP_PER_S: f64 = 0.5;
/// No rise for this long after a cut.
const HOLD_US: u64 = 2_000_000;
/// A path not measured for this long may carry more than it showed: probe a little above.
const STALE_US: u64 = 3_000_000;
/// How far above a stale path's allowance a probe may go; small, so that on a constant link
/// (whose measurements come and go) the target moves less than 10 %.
const PROBE_MARGIN: f64 = 0.08;
/// A path not measured for this long says nothing about now: probe freely (a stream too
/// small to show the path's rate, on a path that has grown).
const LOST_US: u64 = 6_000_000;
/// Changes smaller than this are not worth an encoder reconfiguration.
const MIN_CHANGE: f64 = 0.02;

/// How several subscribers' paths make one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RatePolicy {
    /// The slowest path: every subscriber gets every frame.
    #[default]
    Minimum,
    /// The median path: a few slow subscribers rely on skip-forward instead.
    Median,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateConfig {
    pub min_bps: u64,
    pub max_bps: u64,
    pub start_bps: u64,
    pub policy: RatePolicy,
}

/// What is known of one path, as the session's estimator reports it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathReport {
    /// Delivery rate measured while the path was busy, bit/s.
    pub delivery_bps: Option<u64>,
    /// How long ago the delivery rate was last measured on a busy path, µs.
    pub sample_age_us: Option<u64>,
    /// Queueing delay now (smoothed RTT − minimum RTT), µs.
    pub queue_delay_us: u64,
    /// Fraction of bytes lost recently.
    pub loss_rate: f64,
    /// Bits per second the path carried recently (acknowledged): what an overloaded path
    /// is taken to deliver until its delivery rate is measured.
    pub acked_bps: Option<u64>,
}

/// Why the target changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A path carries less than the target: cut at once.
    Cut,
    /// Every path has room: a gradual rise.
    Rise,
}

#[derive(Debug, Clone)]
pub struct RateController {
    config: RateConfig,
    /// The target as it moves, bit/s.
    target: f64,
    /// The target last handed to the encoder.
    reported_bps: u64,
    last_update_us: Option<u64>,
    last_cut_us: Option<u64>,
}

impl RateController {
    pub fn new(config: RateConfig) -> RateController {
        let (min, max) = (config.min_bps.min(config.max_bps), config.max_bps);
        let start = config.start_bps.clamp(min, max);
        RateController {
            config: RateConfig {
                min_bps: min,
                ..config
            },
            target: start as f64,
            reported_bps: start,
            last_update_us: None,
            last_cut_us: None,
        }
    }

    /// The target the encoder was last given, bit/s.
    pub fn target_bps(&self) -> u64 {
        self.reported_bps
    }

    /// The media rate one path allows, if it says anything.
    fn allowance(&self, path: &PathReport) -> Option<f64> {
        let overloaded = path.queue_delay_us > QUEUE_HIGH_US || path.loss_rate > LOSS_HIGH;
        if overloaded {
            // Below what the path carries now, so the queue drains; not a share of the
            // target, so a queue that takes a while to drain does not cut it again and
            // again.
            let carried = match (path.delivery_bps, path.acked_bps) {
                (Some(d), Some(a)) => d.min(a),
                (d, a) => d.or(a)?,
            };
            return Some(BACKOFF * carried as f64);
        }
        let rate = path.delivery_bps? as f64 * HEADROOM;
        let age = path.sample_age_us.unwrap_or(u64::MAX);
        if age <= STALE_US || path.queue_delay_us >= QUEUE_LOW_US {
            return Some(rate);
        }
        // Nothing measured the path lately, and it is not queueing: it may carry more than
        // it last showed.
        Some(if age > LOST_US {
            f64::INFINITY
        } else {
            rate * (1.0 + PROBE_MARGIN)
        })
    }

    /// Updates the target from the paths at `now_us`; returns it when it changed enough to
    /// reconfigure the encoder.
    pub fn update(&mut self, now_us: u64, paths: &[PathReport]) -> Option<(u64, Change)> {
        let elapsed_us = self.last_update_us.map_or(0, |t| now_us.saturating_sub(t));
        self.last_update_us = Some(now_us);
        let mut allowed: Vec<f64> = paths.iter().filter_map(|p| self.allowance(p)).collect();
        if allowed.is_empty() {
            return None;
        }
        allowed.sort_by(f64::total_cmp);
        let goal = match self.config.policy {
            RatePolicy::Minimum => allowed[0],
            RatePolicy::Median => allowed[(allowed.len() - 1) / 2],
        };
        let (min, max) = (self.config.min_bps as f64, self.config.max_bps as f64);
        let current = self.target;
        let change = if goal < current {
            self.target = goal.max(min);
            Change::Cut
        } else {
            let held = self
                .last_cut_us
                .is_some_and(|t| now_us.saturating_sub(t) < HOLD_US);
            if held {
                return None;
            }
            let gap = if goal.is_finite() {
                goal - current
            } else {
                0.0
            };
            let step = (current * RISE_PER_S).max(gap * CATCH_UP_PER_S) * elapsed_us as f64 / 1e6;
            self.target = goal.min(current + step).min(max);
            Change::Rise
        };
        self.target = self.target.clamp(min, max);
        let reported = self.reported_bps as f64;
        let at_bound = self.target == min || self.target == max;
        let small = (self.target - reported).abs() < MIN_CHANGE * reported;
        if small && !(at_bound && self.target != reported) {
            return None;
        }
        if change == Change::Cut {
            self.last_cut_us = Some(now_us);
        }
        self.reported_bps = self.target as u64;
        Some((self.reported_bps, change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn config() -> RateConfig {
        RateConfig {
            min_bps: 150_000,
            max_bps: 1_200_000,
            start_bps: 600_000,
            policy: RatePolicy::Minimum,
        }
    }

    fn path(delivery_kbit: u64, queue_ms: u64) -> PathReport {
        PathReport {
            delivery_bps: Some(delivery_kbit * 1000),
            sample_age_us: Some(100_000),
            queue_delay_us: queue_ms * 1000,
            loss_rate: 0.0,
            acked_bps: Some(delivery_kbit * 1000),
        }
    }

    /// Runs the controller every 100 ms for `seconds` on a path that `link(t)` describes.
    fn run(
        c: &mut RateController,
        from_s: f64,
        seconds: f64,
        link: impl Fn(f64) -> Vec<PathReport>,
    ) -> Vec<(f64, u64)> {
        let mut out = Vec::new();
        let steps = (seconds * 10.0) as u64;
        for i in 0..=steps {
            let t = from_s + i as f64 / 10.0;
            c.update((t * S as f64) as u64, &link(t));
            out.push((t, c.target_bps()));
        }
        out
    }

    #[test]
    fn a_slower_path_cuts_the_target_at_once() {
        let mut c = RateController::new(config());
        let changed = c.update(S, &[path(400, 10)]);
        assert_eq!(changed, Some((340_000, Change::Cut)));
    }

    #[test]
    fn queueing_cuts_below_what_the_path_carries() {
        let mut c = RateController::new(config());
        // The estimate still says 700, but the queue grows: back off from what it carries.
        let mut p = path(700, 150);
        p.acked_bps = Some(450_000);
        let (target, why) = c.update(S, &[p]).unwrap();
        assert_eq!(why, Change::Cut);
        assert_eq!(target, 360_000);
    }

    #[test]
    fn a_queue_that_drains_slowly_is_cut_for_once() {
        let mut c = RateController::new(config());
        // The queue stays above the threshold for a second while it drains at 500 kbit/s.
        let trace = run(&mut c, 1.0, 1.0, |_| vec![path(500, 150)]);
        assert!(trace.iter().all(|(_, bps)| *bps == 400_000), "{trace:?}");
    }

    #[test]
    fn a_constant_link_converges_without_oscillating() {
        let mut c = RateController::new(config());
        let trace = run(&mut c, 0.0, 60.0, |_| vec![path(500, 5)]);
        let late: Vec<u64> = trace
            .iter()
            .filter(|(t, _)| *t >= 10.0)
            .map(|(_, r)| *r)
            .collect();
        let (lo, hi) = (*late.iter().min().unwrap(), *late.iter().max().unwrap());
        assert!(lo >= 400_000 && hi <= 430_000, "{lo}..{hi}");
        assert!((hi - lo) as f64 / lo as f64 <= 0.10, "{lo}..{hi}");
    }

    #[test]
    fn a_constant_link_measured_now_and_then_moves_less_than_ten_percent() {
        let mut c = RateController::new(config());
        // Measured every 6 s; in between the measurement ages past the stale limit.
        let trace = run(&mut c, 0.0, 90.0, |t| {
            let mut p = path(500, 5);
            p.sample_age_us = Some(((t % 6.0) * S as f64) as u64);
            vec![p]
        });
        let late: Vec<u64> = trace
            .iter()
            .filter(|(t, _)| *t >= 20.0)
            .map(|(_, r)| *r)
            .collect();
        let (lo, hi) = (*late.iter().min().unwrap(), *late.iter().max().unwrap());
        assert!((hi - lo) as f64 / (lo as f64) < 0.10, "{lo}..{hi}");
    }

    #[test]
    fn measured_capacity_is_taken_up_within_seconds_without_overshoot() {
        let mut c = RateController::new(config());
        run(&mut c, 0.0, 10.0, |_| vec![path(400, 5)]);
        let low = c.target_bps();
        let trace = run(&mut c, 10.0, 30.0, |_| vec![path(1200, 5)]);
        let at = |s: f64| trace.iter().find(|(t, _)| *t >= s).unwrap().1;
        // Half the gap to 0.85 × 1200 per second: within 10 % of it after 5 s.
        assert!(at(15.0) >= 918_000, "{low} -> {}", at(15.0));
        assert!(trace.windows(2).all(|w| w[1].1 >= w[0].1), "{trace:?}");
        assert!(trace.iter().all(|(_, bps)| *bps <= 1_020_000), "{trace:?}");
    }

    #[test]
    fn an_unmeasured_quiet_path_is_probed_gently_up_to_the_maximum() {
        let mut c = RateController::new(config());
        let quiet = PathReport {
            delivery_bps: Some(600_000),
            sample_age_us: Some(30 * S),
            ..PathReport::default()
        };
        let trace = run(&mut c, 0.0, 40.0, |_| vec![quiet]);
        assert_eq!(trace.last().unwrap().1, 1_200_000);
        let at = |s: f64| trace.iter().find(|(t, _)| *t >= s).unwrap().1;
        // Updates every 100 ms, each by a tenth of RISE_PER_S.
        let gentle = 600_000.0 * (1.0 + RISE_PER_S / 10.0).powi(50) * (1.0 + MIN_CHANGE);
        assert!((at(5.0) as f64) < gentle, "{}", at(5.0));
    }

    #[test]
    fn the_target_stays_within_the_bounds() {
        let mut c = RateController::new(config());
        run(&mut c, 0.0, 5.0, |_| vec![path(50, 300)]);
        assert_eq!(c.target_bps(), 150_000);
        let mut c = RateController::new(RateConfig {
            start_bps: 5_000_000,
            ..config()
        });
        assert_eq!(c.target_bps(), 1_200_000);
        assert_eq!(c.update(S, &[]), None);
    }

    #[test]
    fn policies_choose_the_slowest_or_the_median_subscriber() {
        let paths = [path(300, 5), path(900, 5), path(1000, 5)];
        let mut minimum = RateController::new(config());
        minimum.update(S, &paths);
        assert_eq!(minimum.target_bps(), 255_000);
        let mut median = RateController::new(RateConfig {
            policy: RatePolicy::Median,
            ..config()
        });
        run(&mut median, 0.0, 30.0, |_| paths.to_vec());
        let got = median.target_bps() as f64;
        assert!((got / 765_000.0 - 1.0).abs() <= MIN_CHANGE, "{got}");
    }

    #[test]
    fn no_rise_right_after_a_cut() {
        let mut c = RateController::new(config());
        c.update(S, &[path(400, 10)]);
        let cut = c.target_bps();
        // The path recovers at once; the target waits out the hold.
        let trace = run(&mut c, 1.1, 1.8, |_| vec![path(1200, 5)]);
        assert!(trace.iter().all(|(_, r)| *r == cut));
        run(&mut c, 3.0, 3.0, |_| vec![path(1200, 5)]);
        assert!(c.target_bps() > cut);
    }
}
