//! How late a track's frames arrive, and the playout offset that would have them on time.
//!
//! A frame's transit is its arrival (running time) minus its media time: what it took
//! from the encoder to here, plus the fixed offset between the two clocks. The timeline
//! plays media at an offset (running − media); a frame whose transit is at most that
//! offset arrives before its slot. The offset a track needs is the largest transit of
//! its recent frames, each asked for in full for a second after it arrived and less as
//! it ages, so the delay of a congestion episode that is over drains from then on.
//!
//! Part of a frame's transit is its size over the path's rate: on a slow link a
//! keyframe takes several frame intervals to cross. That delay comes back with every
//! keyframe, so it is expected, not jitter: the estimator learns the path's transfer time
//! per byte from each large frame (how much later it arrived than the smallest-delay
//! small frame just before it, over the difference of their sizes) and keeps the last
//! large frame's size. The need is then the larger of the recent transits and what the
//! next frame of that size would take (the least size-free transit of the window plus its
//! transfer), so a long GoP's keyframe is planned for even after the last one has left
//! the window, and a path whose queue drained stops asking for the keyframes of before.
//! A large frame is planned for only so long: a stream whose keyframes shrank (an
//! encoder that started above its link and was brought down) must not keep the delay of
//! its first seconds.
//!
//! No clock is read: times are ns of running time, media times µs.

use std::collections::VecDeque;

/// How far back transits count: long enough to hold a keyframe of a usual GoP, short
/// enough that latency comes back within seconds once the path recovers.
const WINDOW_NS: u64 = 2_000_000_000;
/// A frame at least this many times the size of the smallest recent one is large: it
/// measures the transfer time per byte.
const LARGE_RATIO: u64 = 3;
/// A size difference below this says too little about the transfer time per byte.
const MIN_SIZE_DIFFERENCE: u64 = 2_000;
/// Weight of a new transfer-time sample: keyframes are rare, the estimate must follow a
/// path that changed within a few of them.
const PER_BYTE_WEIGHT: f64 = 0.4;
/// Transfer time per byte at most (ns): 8 kbit/s. A hostile peer's timestamps cannot
/// drive the estimate further.
const MAX_PER_BYTE_NS: f64 = 1_000_000.0;
/// Samples kept at most, whatever the frame rate a peer claims.
const MAX_SAMPLES: usize = 1_024;
/// How long after the last large frame one of its size is still planned for: a keyframe
/// interval up to this long keeps its keyframes' transfer in the need.
const LARGE_MEMORY_NS: u64 = 10_000_000_000;
/// A transit asks for its full delay this long after it arrived, and then for less...
const HOLD_NS: u64 = 1_000_000_000;
/// ...by this much per unit of age: the late frames of a congestion episode that is over
/// give their delay back gradually from a second after the path recovered, not all at
/// once when they leave the window (which kept the whole episode's delay two seconds
/// after its last late frame).
const RELEASE: f64 = 0.2;
/// How much arrival time the window must span before its need is taken as settled: right
/// after a clear, a few frames say little of what the next seconds bring.
const SETTLE_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, Copy)]
struct Large {
    size: u64,
    arrival: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Arrival, running time ns.
    arrival: u64,
    /// Arrival − media time, ns.
    transit: i64,
    size: u64,
}

impl Sample {
    /// The transit it still asks for at `now`: all of it for [`HOLD_NS`], then less by
    /// [`RELEASE`] of its age beyond.
    fn held_transit(&self, now: u64) -> i64 {
        let released = now.saturating_sub(self.arrival).saturating_sub(HOLD_NS) as f64 * RELEASE;
        self.transit.saturating_sub(released as i64)
    }
}

/// One track's transits, and what the next frames will need.
#[derive(Debug, Clone, Default)]
pub struct DelayEstimator {
    samples: VecDeque<Sample>,
    /// The path's transfer time per byte, ns.
    per_byte_ns: Option<f64>,
    /// The size and arrival of the latest large frame.
    large: Option<Large>,
}

impl DelayEstimator {
    /// Forgets the path: after a jump or a new timeline, earlier transits describe media
    /// the player gave up on.
    pub fn clear(&mut self) {
        self.samples.clear();
    }

    /// A frame of `size` bytes and media time `media_us` arrived at running time
    /// `arrival`.
    pub fn on_frame(&mut self, arrival: u64, media_us: i64, size: u64) {
        let transit = i64::try_from(arrival)
            .unwrap_or(i64::MAX)
            .saturating_sub(media_us.saturating_mul(1_000));
        while self
            .samples
            .front()
            .is_some_and(|s| s.arrival.saturating_add(WINDOW_NS) < arrival)
            || self.samples.len() >= MAX_SAMPLES
        {
            self.samples.pop_front();
        }
        // The fastest of the smaller frames before it: it found the path as idle as any.
        let small = self
            .samples
            .iter()
            .filter(|s| s.size.saturating_mul(LARGE_RATIO) <= size)
            .min_by_key(|s| s.transit);
        if let Some(small) = small {
            let bytes = size - small.size;
            if bytes >= MIN_SIZE_DIFFERENCE {
                let extra = transit.saturating_sub(small.transit).max(0) as f64;
                let sample = (extra / bytes as f64).min(MAX_PER_BYTE_NS);
                self.per_byte_ns = Some(match self.per_byte_ns {
                    Some(old) => old + PER_BYTE_WEIGHT * (sample - old),
                    None => sample,
                });
                self.large = Some(Large { size, arrival });
            }
        }
        self.samples.push_back(Sample {
            arrival,
            transit,
            size,
        });
    }

    /// The transfer time of `size` bytes on the path, ns.
    fn transfer_ns(&self, size: u64) -> i64 {
        self.per_byte_ns.map_or(0, |p| (p * size as f64) as i64)
    }

    /// The offset (running − media, ns) at which the window's frames, and a next large
    /// frame like the last, arrive by their slots; `None` before any frame.
    pub fn need(&self) -> Option<i64> {
        let now = self.samples.back()?.arrival;
        let latest = self.samples.iter().map(|s| s.held_transit(now)).max()?;
        let Some(large) = self
            .large
            .filter(|l| now.saturating_sub(l.arrival) <= LARGE_MEMORY_NS)
        else {
            return Some(latest);
        };
        let base = self
            .samples
            .iter()
            .map(|s| s.transit.saturating_sub(self.transfer_ns(s.size)))
            .min()?;
        Some(latest.max(base.saturating_add(self.transfer_ns(large.size))))
    }

    /// Whether the window spans enough time for its need to be trusted to drain on.
    pub fn settled(&self) -> bool {
        match (self.samples.front(), self.samples.back()) {
            (Some(first), Some(last)) => last.arrival.saturating_sub(first.arrival) >= SETTLE_NS,
            _ => false,
        }
    }

    /// The least transit of the window: no frame plays before it arrives, so an offset
    /// below it buys nothing.
    pub fn floor(&self) -> Option<i64> {
        self.samples.iter().map(|s| s.transit).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const FRAME_US: i64 = 41_667;

    /// Frames of `size(i)` bytes over a path of `kbit` kbit/s with `delay_ms` on top,
    /// sent every frame interval, each after the previous one has crossed.
    fn feed(
        estimator: &mut DelayEstimator,
        range: std::ops::Range<i64>,
        kbit: u64,
        delay_ms: u64,
        size: impl Fn(i64) -> u64,
    ) -> u64 {
        let mut free_at = 0u64;
        let mut last = 0;
        for i in range {
            let sent = (i * FRAME_US) as u64 * 1_000;
            let bytes = size(i);
            let start = sent.max(free_at);
            free_at = start + bytes * 8 * 1_000_000 / kbit;
            last = free_at + delay_ms * MS;
            estimator.on_frame(last, i * FRAME_US, bytes);
        }
        last
    }

    fn gop(key: u64, delta: u64, length: i64) -> impl Fn(i64) -> u64 {
        move |i| if i % length == 0 { key } else { delta }
    }

    #[test]
    fn a_keyframes_transfer_is_learned_as_the_paths_rate() {
        let mut e = DelayEstimator::default();
        // 500 kbit/s: 16 µs per byte; 12 kB keyframes take 192 ms.
        feed(&mut e, 0..120, 500, 20, gop(12_000, 800, 15));
        assert!(e.settled());
        let per_byte = e.per_byte_ns.unwrap();
        assert!((14_000.0..18_000.0).contains(&per_byte), "{per_byte}");
        let need = e.need().unwrap();
        let floor = e.floor().unwrap();
        // The keyframe's transfer is what the need is above the fastest frames.
        let extra_ms = (need - floor) as f64 / MS as f64;
        assert!((150.0..220.0).contains(&extra_ms), "{extra_ms}");
    }

    #[test]
    fn a_long_gop_keeps_planning_for_its_keyframe() {
        let mut e = DelayEstimator::default();
        // A keyframe every 5 s: 2 s after one, the window holds no keyframe, but the
        // need still covers the next.
        feed(&mut e, 0..121, 500, 20, gop(12_000, 800, 120));
        let with_key = e.need().unwrap() - e.floor().unwrap();
        feed(&mut e, 121..230, 500, 20, gop(12_000, 800, 1_000));
        let later = e.need().unwrap() - e.floor().unwrap();
        assert!(with_key > 150 * MS as i64, "{with_key}");
        assert!(
            later as f64 > 0.8 * with_key as f64,
            "{later} ns planned, {with_key} ns with the keyframe in the window"
        );
    }

    #[test]
    fn the_need_falls_once_a_queue_has_drained() {
        let mut e = DelayEstimator::default();
        // 400 ms of standing queue, then none.
        feed(&mut e, 0..48, 2_000, 400, gop(8_000, 800, 15));
        let queued = e.need().unwrap();
        feed(&mut e, 48..120, 2_000, 0, gop(8_000, 800, 15));
        let drained = e.need().unwrap();
        let fallen_ms = (queued - drained) as f64 / MS as f64;
        assert!((350.0..450.0).contains(&fallen_ms), "{fallen_ms}");
    }

    #[test]
    fn keyframes_that_stopped_being_large_are_no_longer_planned_for() {
        // Started above a 400 kbit/s link (8 kB keyframes, a queue building), then below
        // it with keyframes under three times the other frames' size: 15 s on, the
        // need is what a stream started below would have.
        let (key, delta) = (gop(8_000, 2_000, 15), gop(2_800, 1_500, 15));
        let mut started_above = DelayEstimator::default();
        feed(&mut started_above, 0..120, 400, 20, key);
        assert!(started_above.large.is_some());
        feed(&mut started_above, 120..480, 400, 20, &delta);
        let mut started_below = DelayEstimator::default();
        feed(&mut started_below, 0..480, 400, 20, &delta);
        let above = started_above.need().unwrap() - started_above.floor().unwrap();
        let below = started_below.need().unwrap() - started_below.floor().unwrap();
        assert!(
            above <= below + 5 * MS as i64,
            "{} ms above the floor, {} ms started below",
            above / MS as i64,
            below / MS as i64
        );
    }

    #[test]
    fn jitter_in_the_window_counts_in_full() {
        let mut e = DelayEstimator::default();
        for i in 0..48 {
            let jitter = if i == 30 { 90 } else { (i % 3) as u64 * 5 };
            let arrival = (i * FRAME_US) as u64 * 1_000 + (20 + jitter) * MS;
            e.on_frame(arrival, i * FRAME_US, 900);
        }
        assert_eq!(e.need().unwrap() - e.floor().unwrap(), 90 * MS as i64);
    }

    #[test]
    fn a_late_episodes_delay_is_held_a_second_then_given_back_gradually() {
        let mut e = DelayEstimator::default();
        // 20 ms transits, 300 ms for half a second (frames 24..36), then 20 ms again.
        let needs: Vec<i64> = (0..96)
            .map(|i| {
                let transit = if (24..36).contains(&i) { 300 } else { 20 };
                e.on_frame(
                    (i * FRAME_US) as u64 * 1_000 + transit * MS,
                    i * FRAME_US,
                    900,
                );
                e.need().unwrap() / MS as i64
            })
            .collect();
        // Frame 35, the last late one, arrived at 1.76 s: frame 65 arrives 1 s after it,
        // 78 1.5 s after, 90 2 s after.
        assert!(needs[36..=65].iter().all(|&n| n == 300), "{needs:?}");
        assert!((180..=220).contains(&needs[78]), "{}", needs[78]);
        assert!(needs[66..=89].windows(2).all(|w| w[1] <= w[0]), "{needs:?}");
        assert_eq!(needs[90], 20);
    }

    #[test]
    fn hostile_timestamps_neither_panic_nor_grow_memory() {
        let mut e = DelayEstimator::default();
        for i in 0..10_000u64 {
            let media = if i % 2 == 0 { i64::MIN } else { i64::MAX };
            e.on_frame(i % 7, media, u64::MAX - i);
        }
        assert!(e.samples.len() <= MAX_SAMPLES);
        let _ = (e.need(), e.floor());
        e.clear();
        assert!(e.need().is_none());
        assert!(!e.settled());
    }
}
