//! How long objects wait at the publisher before QUIC takes them.
//!
//! A delay-based congestion window keeps the network's queue short: when the path falls
//! below the stream, the excess waits here, in the scheduler, where the path estimate (the
//! round trips of packets already sent) cannot see it. The rate controller counts this wait
//! with the network's queue. As with the network's queue, the smallest wait over a short
//! window is a queue that stands (a keyframe's own wait is not one), and the smallest over
//! a second is a queue that does not empty.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The smallest wait over this long is the standing queue.
pub const STANDING_WINDOW: Duration = Duration::from_millis(200);
/// The smallest wait over this long is the queue's trough.
pub const TROUGH_WINDOW: Duration = Duration::from_secs(1);
/// Waits are kept as the smallest of each bin of this long.
const BIN: Duration = Duration::from_millis(50);

/// The publisher's own queue toward one peer: how long the data QUIC took lately had
/// waited for it, the oldest data still waiting counted at its wait so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendQueue {
    /// The smallest wait over the last [`STANDING_WINDOW`].
    pub standing: Duration,
    /// The smallest wait over the last [`TROUGH_WINDOW`].
    pub trough: Duration,
}

impl SendQueue {
    /// The longer of two queues, each figure on its own: a session's queue is that of the
    /// subscription that waits longest.
    pub fn max(self, other: SendQueue) -> SendQueue {
        SendQueue {
            standing: self.standing.max(other.standing),
            trough: self.trough.max(other.trough),
        }
    }
}

/// The waits of one subscription's objects, as the smallest of each [`BIN`] of the time
/// QUIC took them: bounded memory whatever the object rate.
#[derive(Debug, Default)]
pub(crate) struct SendWaits {
    /// (start of the bin, smallest wait in it), oldest first.
    bins: VecDeque<(Instant, Duration)>,
}

impl SendWaits {
    /// QUIC took the last byte of an object at `taken`, `waited` after it was queued.
    pub fn record(&mut self, taken: Instant, waited: Duration) {
        match self.bins.back_mut() {
            Some((start, least)) if taken < *start + BIN => *least = (*least).min(waited),
            _ => self.bins.push_back((taken, waited)),
        }
        while self
            .bins
            .front()
            .is_some_and(|(start, _)| *start + BIN + TROUGH_WINDOW < taken)
        {
            self.bins.pop_front();
        }
    }

    /// The queue at `now`, the oldest object still waiting queued at `oldest_waiting`
    /// (`None`: nothing waits, so there is no queue now).
    pub fn queue(&self, now: Instant, oldest_waiting: Option<Instant>) -> SendQueue {
        let Some(oldest) = oldest_waiting else {
            return SendQueue::default();
        };
        let waiting = now.saturating_duration_since(oldest);
        let least_over = |window: Duration| {
            self.bins
                .iter()
                .filter(|(start, _)| *start + BIN + window > now)
                .map(|&(_, wait)| wait)
                .fold(waiting, Duration::min)
        };
        SendQueue {
            standing: least_over(STANDING_WINDOW),
            trough: least_over(TROUGH_WINDOW),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn nothing_waiting_is_no_queue() {
        let t0 = Instant::now();
        let mut waits = SendWaits::default();
        waits.record(t0, 300 * MS);
        assert_eq!(waits.queue(t0 + 10 * MS, None), SendQueue::default());
    }

    #[test]
    fn the_standing_queue_is_the_least_wait_of_the_short_window() {
        let t0 = Instant::now();
        let mut waits = SendWaits::default();
        waits.record(t0, 20 * MS);
        for i in 1..=10 {
            waits.record(t0 + i * 60 * MS, 250 * MS);
        }
        let now = t0 + 610 * MS;
        let q = waits.queue(now, Some(now - 400 * MS));
        assert_eq!(q.standing, 250 * MS);
        assert_eq!(q.trough, 20 * MS);
        // A second later the short wait is forgotten by the trough too.
        let later = t0 + 1_200 * MS;
        waits.record(later, 260 * MS);
        assert_eq!(waits.queue(later, Some(later - 300 * MS)).trough, 250 * MS);
    }

    #[test]
    fn an_object_still_waiting_counts_at_its_wait_so_far() {
        let t0 = Instant::now();
        let mut waits = SendWaits::default();
        waits.record(t0, 400 * MS);
        // Nothing taken since: the oldest object waiting bounds the queue.
        let now = t0 + 2 * TROUGH_WINDOW;
        let q = waits.queue(now, Some(now - 90 * MS));
        assert_eq!(
            q,
            SendQueue {
                standing: 90 * MS,
                trough: 90 * MS,
            }
        );
    }

    #[test]
    fn memory_stays_bounded_at_any_object_rate() {
        let t0 = Instant::now();
        let mut waits = SendWaits::default();
        for i in 0..100_000u32 {
            waits.record(t0 + i * MS, MS);
        }
        assert!(waits.bins.len() <= (TROUGH_WINDOW.as_millis() / BIN.as_millis()) as usize + 2);
    }
}
