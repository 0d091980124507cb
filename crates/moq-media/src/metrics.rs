//! Delivery metrics shared by the elements' `stats` and the benchmark (docs/metrics.md).
//!
//! All times are µs on one clock; `S` is a frame's availability time at the sender and
//! `R` its arrival time at the receiver.

use std::collections::VecDeque;

/// RFC 3550 interarrival jitter: `J += (|D| − J) / 16` with
/// `D(i−1, i) = (R_i − R_{i−1}) − (S_i − S_{i−1})`.
#[derive(Debug, Clone, Default)]
pub struct InterarrivalJitter {
    last: Option<(i64, i64)>,
    jitter: f64,
}

impl InterarrivalJitter {
    pub fn push(&mut self, sent_us: i64, received_us: i64) {
        if let Some((s, r)) = self.last {
            let d = transit_change((s, r), (sent_us, received_us));
            self.jitter += ((d.unsigned_abs() as f64) - self.jitter) / 16.0;
        }
        self.last = Some((sent_us, received_us));
    }

    /// Current estimate, µs.
    pub fn value_us(&self) -> f64 {
        self.jitter
    }
}

/// EBU 3337 time-stamped delay factor over consecutive windows of receive time:
/// `D_i = (R_i − R_0) − (S_i − S_0)` within a window, TS-DF = max D − min D.
#[derive(Debug, Clone)]
pub struct TsDf {
    window_us: i64,
    start: Option<(i64, i64)>,
    min: i64,
    max: i64,
    last_complete: Option<i64>,
}

impl TsDf {
    pub fn new(window_us: i64) -> TsDf {
        TsDf {
            window_us,
            start: None,
            min: 0,
            max: 0,
            last_complete: None,
        }
    }

    /// Adds a frame; returns the TS-DF of a window that this frame closed, if any.
    pub fn push(&mut self, sent_us: i64, received_us: i64) -> Option<i64> {
        let mut closed = None;
        if self
            .start
            .is_some_and(|(_, r0)| received_us.saturating_sub(r0) >= self.window_us)
        {
            closed = Some(self.max.saturating_sub(self.min));
            self.last_complete = closed;
            self.start = None;
        }
        let (s0, r0) = match self.start {
            Some(start) => start,
            None => {
                self.start = Some((sent_us, received_us));
                self.min = 0;
                self.max = 0;
                (sent_us, received_us)
            }
        };
        let d = transit_change((s0, r0), (sent_us, received_us));
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        closed
    }

    /// TS-DF of the last complete window, µs.
    pub fn last_us(&self) -> Option<i64> {
        self.last_complete
    }
}

/// A frame's time from sender to receiver, µs: its arrival (or output) time less the
/// availability time its header carries, saturating (the header comes from the network).
pub fn transit_us(availability_us: u64, at_us: i64) -> i64 {
    at_us.saturating_sub(i64::try_from(availability_us).unwrap_or(i64::MAX))
}

/// How much longer frame `b` took than frame `a` from sender to receiver, µs: `(R_b − R_a) −
/// (S_b − S_a)` of (sent, received) pairs, saturating, since the sent times come from the
/// network and may be anything.
fn transit_change((sent_a, received_a): (i64, i64), (sent_b, received_b): (i64, i64)) -> i64 {
    let d = (i128::from(received_b) - i128::from(received_a))
        - (i128::from(sent_b) - i128::from(sent_a));
    d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Latencies over a sliding time window, for percentiles of the last second.
#[derive(Debug, Clone)]
pub struct LatencyWindow {
    span_us: i64,
    samples: VecDeque<(i64, i64)>,
}

impl LatencyWindow {
    pub fn new(span_us: i64) -> LatencyWindow {
        LatencyWindow {
            span_us,
            samples: VecDeque::new(),
        }
    }

    /// Records a latency observed at `now_us`.
    pub fn push(&mut self, now_us: i64, latency_us: i64) {
        self.samples.push_back((now_us, latency_us));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now_us.saturating_sub(*t) > self.span_us)
        {
            self.samples.pop_front();
        }
    }

    /// The `q` quantile (0..=1, nearest rank) of the window, µs.
    pub fn quantile(&self, q: f64) -> Option<i64> {
        let mut values: Vec<i64> = self.samples.iter().map(|(_, l)| *l).collect();
        quantile(&mut values, q)
    }
}

/// Nearest-rank quantile of `values` (sorted in place).
pub fn quantile(values: &mut [i64], q: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = (q.clamp(0.0, 1.0) * values.len() as f64).ceil() as usize;
    Some(values[rank.saturating_sub(1).min(values.len() - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_follows_rfc3550() {
        let mut j = InterarrivalJitter::default();
        // Perfectly paced: no jitter.
        for i in 0..10 {
            j.push(i * 40_000, 5_000 + i * 40_000);
        }
        assert_eq!(j.value_us(), 0.0);
        // One frame 16 ms late: D = 16 000 then −16 000.
        j.push(400_000, 5_000 + 400_000 + 16_000);
        assert!((j.value_us() - 1_000.0).abs() < 1e-9);
        j.push(440_000, 5_000 + 440_000);
        assert!((j.value_us() - (1_000.0 + (16_000.0 - 1_000.0) / 16.0)).abs() < 1e-9);
    }

    #[test]
    fn ts_df_is_the_delay_spread_within_each_window() {
        let mut t = TsDf::new(1_000_000);
        assert_eq!(t.push(0, 100), None);
        assert_eq!(t.push(40_000, 40_100 + 30_000), None); // 30 ms later than paced
        assert_eq!(t.push(80_000, 80_100 - 10_000), None); // 10 ms early
        // The next window starts at the first frame a second or more after the window start.
        assert_eq!(t.push(1_000_000, 1_000_100), Some(40_000));
        assert_eq!(t.last_us(), Some(40_000));
        assert_eq!(t.push(1_040_000, 1_040_100), None);
        assert_eq!(t.push(2_000_000, 2_000_100), Some(0));
    }

    #[test]
    fn latency_window_keeps_the_last_span() {
        let mut w = LatencyWindow::new(1_000_000);
        assert_eq!(w.quantile(0.5), None);
        for i in 0..100 {
            w.push(i * 10_000, i);
        }
        assert_eq!(w.quantile(0.5), Some(49));
        assert_eq!(w.quantile(0.95), Some(94));
        w.push(2_000_000, 1_000);
        assert_eq!(w.quantile(0.5), Some(1_000), "older samples aged out");
        assert_eq!(quantile(&mut [], 0.5), None);
        assert_eq!(quantile(&mut [3, 1, 2], 1.0), Some(3));
        assert_eq!(quantile(&mut [3, 1, 2], 0.0), Some(1));
    }

    #[test]
    fn timestamps_at_the_ends_of_their_range_do_not_overflow() {
        let mut j = InterarrivalJitter::default();
        let mut t = TsDf::new(1_000_000);
        let mut w = LatencyWindow::new(1_000_000);
        for (sent, received) in [(i64::MIN, i64::MAX), (i64::MAX, i64::MIN), (0, i64::MAX)] {
            j.push(sent, received);
            t.push(sent, received);
            w.push(received, received.wrapping_sub(sent));
        }
        assert!(j.value_us().is_finite());
        assert!(w.quantile(1.0).is_some());
    }
}
