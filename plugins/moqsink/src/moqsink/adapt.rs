//! Rate adaptation: the subscribers' path estimates, combined by the rate policy, drive
//! the encoder's bitrate, with what the encoder produces (the access units reaching the
//! sink) teaching the controller how the encoder answers. Free of the element: it is told
//! the estimates, the frames and the time and says what to set; the element finds the
//! encoder and posts the messages.

use moq_media::rate_control::{PathReport, RateConfig, RateController, RatePolicy};
use moq_session::estimate::PathEstimate;
use moq_session::send_queue::SendQueue;

/// The path report the rate controller reads, from a session's estimate and the time our
/// data waits before QUIC takes it.
pub fn path_report(estimate: &PathEstimate, send_queue: SendQueue) -> PathReport {
    let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    PathReport {
        delivery_bps: estimate.delivery_rate,
        // As old as the busy time it was measured on: a rate computed just now over the
        // sparse window may speak of seconds ago.
        sample_age_us: estimate.path_busy_age.or(estimate.path_sample_age).map(us),
        // The smallest recent delay: a keyframe's own burst is not a standing queue.
        queue_delay_us: estimate
            .standing_queue_delay
            .map_or_else(|| us(estimate.queue_delay), us),
        // The smallest over a second: a queue that never empties, not a keyframe's wave.
        queue_trough_us: estimate.queue_trough.map(us),
        loss_rate: estimate.loss_rate,
        acked_bps: estimate.acked_rate,
        held_back: !estimate.app_limited,
        send_queue_us: us(send_queue.standing),
        send_queue_trough_us: us(send_queue.trough),
        recent_delivery_bps: estimate.recent_delivery_rate,
        recent_queue_us: estimate.recent_queue_delay.map(us),
    }
}

/// The subscribers' delivery rate as the policy sees it (the slowest, or the median), bit/s.
pub fn combined_rate(reports: &[PathReport], policy: RatePolicy) -> Option<u64> {
    let mut rates: Vec<u64> = reports.iter().filter_map(|r| r.delivery_bps).collect();
    rates.sort_unstable();
    match policy {
        RatePolicy::Minimum => rates.first().copied(),
        RatePolicy::Median => rates.get(rates.len().checked_sub(1)? / 2).copied(),
    }
}

/// A new target for the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub bitrate: u64,
    pub reason: &'static str,
}

/// The rate loop's state while the element runs with `rate-control=encoder`.
#[derive(Debug)]
pub struct Adaptation {
    controller: RateController,
}

impl Adaptation {
    pub fn new(config: RateConfig) -> Adaptation {
        Adaptation {
            controller: RateController::new(config),
        }
    }

    pub fn target_bps(&self) -> u64 {
        self.controller.target_bps()
    }

    /// An access unit of `bytes` from the driven encoder reached the sink at `now_us`.
    pub fn on_frame(&mut self, now_us: u64, bytes: u64, key: bool) {
        self.controller.on_frame(now_us, bytes, key);
    }

    /// What the encoder produces (bit/s over its last whole GoPs), its lag between a new
    /// target and its output following (µs) and its output over its target, as learned.
    pub fn encoder(&self, now_us: u64) -> (Option<u64>, u64, Option<f64>) {
        let model = self.controller.encoder();
        (
            model.output_bps(now_us).map(|r| r as u64),
            model.lag_us(),
            model.ratio(),
        )
    }

    /// The target for the paths' reports at `now_us`, when it changed.
    pub fn update(&mut self, now_us: u64, reports: &[PathReport]) -> Option<Target> {
        let (bitrate, change) = self.controller.update(now_us, reports)?;
        Some(Target {
            bitrate,
            reason: change.name(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_standing_queue_is_the_delay_that_counts() {
        let estimate = PathEstimate {
            delivery_rate: Some(500_000),
            queue_delay: Duration::from_millis(120),
            standing_queue_delay: Some(Duration::from_millis(8)),
            queue_trough: Some(Duration::from_millis(5)),
            path_sample_age: Some(Duration::from_millis(300)),
            path_busy_age: Some(Duration::from_millis(900)),
            ..PathEstimate::default()
        };
        let r = path_report(&estimate, SendQueue::default());
        assert_eq!(r.queue_delay_us, 8_000);
        assert_eq!(r.queue_trough_us, Some(5_000));
        // The age of the busy time measured on, not of the computation.
        assert_eq!(r.sample_age_us, Some(900_000));
        let without = PathEstimate {
            standing_queue_delay: None,
            ..estimate
        };
        assert_eq!(
            path_report(&without, SendQueue::default()).queue_delay_us,
            120_000
        );
        // The sender's own queue goes with it, each figure on its own.
        let waiting = SendQueue {
            standing: Duration::from_millis(70),
            trough: Duration::from_millis(40),
        };
        let r = path_report(&estimate, waiting);
        assert_eq!((r.send_queue_us, r.send_queue_trough_us), (70_000, 40_000));
    }

    #[test]
    fn a_transport_with_data_waiting_holds_the_stream_back() {
        let waiting = PathEstimate::default();
        assert!(path_report(&waiting, SendQueue::default()).held_back);
        let app_limited = PathEstimate {
            app_limited: true,
            ..waiting
        };
        assert!(!path_report(&app_limited, SendQueue::default()).held_back);
    }

    #[test]
    fn the_policy_combines_the_paths() {
        let at = |kbit: u64| PathReport {
            delivery_bps: Some(kbit * 1000),
            ..PathReport::default()
        };
        let paths = [at(900), at(300), PathReport::default(), at(1000)];
        assert_eq!(combined_rate(&paths, RatePolicy::Minimum), Some(300_000));
        assert_eq!(combined_rate(&paths, RatePolicy::Median), Some(900_000));
        assert_eq!(combined_rate(&[], RatePolicy::Median), None);
    }
}
