//! Delivery-rate estimate from a connection's byte counter sampled over time.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Rate estimate horizon.
const RATE_WINDOW: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub(crate) struct RateEstimator {
    samples: VecDeque<(Instant, u64)>,
}

impl RateEstimator {
    /// Adds a sample of bytes delivered so far; returns bytes per second over the window,
    /// once it spans at least half of it.
    pub fn update(&mut self, now: Instant, delivered: u64) -> Option<f64> {
        self.samples.push_back((now, delivered));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
        let (t0, b0) = *self.samples.front()?;
        let span = now.saturating_duration_since(t0).as_secs_f64();
        (span >= RATE_WINDOW.as_secs_f64() / 2.0)
            .then(|| delivered.saturating_sub(b0) as f64 / span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_estimate_needs_half_a_window_of_samples() {
        let mut r = RateEstimator::default();
        let t0 = Instant::now();
        assert_eq!(r.update(t0, 0), None);
        assert_eq!(r.update(t0 + Duration::from_millis(100), 10_000), None);
        let rate = r.update(t0 + Duration::from_millis(500), 50_000).unwrap();
        assert!((rate - 100_000.0).abs() < 1.0, "{rate}");
        // Old samples fall out of the window.
        let rate = r
            .update(t0 + Duration::from_millis(2_000), 50_000)
            .unwrap_or(0.0);
        assert_eq!(rate, 0.0);
    }
}
