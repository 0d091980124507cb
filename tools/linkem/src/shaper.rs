//! The bottleneck model of one direction, as a pure state machine over trace time.
//!
//! Order of effects for an arriving packet: loss (Bernoulli of the current step, then
//! Gilbert–Elliott) → drop-tail FIFO served at the trace's rate → one-way delay (+ jitter) →
//! emission. Because the link is deterministic once arrivals are known, each packet's fate and
//! emission time are decided the moment it arrives; the relay only holds packets until then.

use std::collections::VecDeque;
use std::time::Duration;

use crate::profile::Profile;
use crate::rng::Rng;

/// What happens to an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Removed by the loss model before it reached the queue.
    Lost,
    /// The queue was full (drop-tail).
    Dropped,
    /// Leaves the link at this trace time.
    Emit(Duration),
}

pub(crate) struct Shaper {
    profile: Profile,
    loss_rng: Rng,
    jitter_rng: Rng,
    /// Gilbert–Elliott state: true while in the bad state.
    bad: bool,
    /// Packets accepted but not yet fully serialised, as (serialisation end, bytes).
    backlog: VecDeque<(Duration, usize)>,
    backlog_bytes: usize,
    /// When the last accepted packet finishes serialising.
    link_free_at: Duration,
    /// Emission time of the last accepted packet; later packets never leave before it.
    last_emit: Duration,
}

impl Shaper {
    /// `stream` separates the random draws of the two directions of one link.
    pub(crate) fn new(profile: Profile, seed: u64, stream: u64) -> Shaper {
        Shaper {
            profile,
            loss_rng: Rng::new(seed, 2 * stream),
            jitter_rng: Rng::new(seed, 2 * stream + 1),
            bad: false,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            link_free_at: Duration::ZERO,
            last_emit: Duration::ZERO,
        }
    }

    /// Decides the fate of a packet of `len` bytes arriving at trace time `t`. Calls must come
    /// in non-decreasing `t`.
    pub(crate) fn arrive(&mut self, t: Duration, len: usize) -> Fate {
        if self.lose(t) {
            return Fate::Lost;
        }
        self.drain(t);
        let done = self.profile.serialised_at(t.max(self.link_free_at), len);
        // A packet the link takes at once (unlimited rate, idle link) never occupies the queue.
        if done > t {
            if self.backlog_bytes + len > self.profile.queue_bytes() {
                return Fate::Dropped;
            }
            self.backlog.push_back((done, len));
            self.backlog_bytes += len;
        }
        self.link_free_at = done;
        let emit = (done + self.delay(done)).max(self.last_emit);
        self.last_emit = emit;
        Fate::Emit(emit)
    }

    /// Draws the same number of random values per packet whatever the probabilities, so the
    /// pattern for a seed depends only on the packet sequence.
    fn lose(&mut self, t: Duration) -> bool {
        let mut lost = self.loss_rng.next_f64() < self.profile.step(t).loss;
        if let Some(g) = self.profile.gilbert().copied() {
            let p = if self.bad { g.loss_bad } else { g.loss_good };
            lost |= self.loss_rng.next_f64() < p;
            let u = self.loss_rng.next_f64();
            self.bad = if self.bad {
                u >= g.p_bad_to_good
            } else {
                u < g.p_good_to_bad
            };
        }
        lost
    }

    /// Delay of the step in force when the packet leaves the bottleneck, plus uniform jitter
    /// in ±jitter (clamped at zero).
    fn delay(&mut self, done: Duration) -> Duration {
        let step = self.profile.step(done);
        let (delay, jitter) = (step.delay, step.jitter);
        let u = self.jitter_rng.next_f64();
        if jitter.is_zero() {
            return delay;
        }
        let d = delay.as_secs_f64() + jitter.as_secs_f64() * (2.0 * u - 1.0);
        Duration::from_secs_f64(d.max(0.0))
    }

    fn drain(&mut self, t: Duration) {
        while let Some(&(done, len)) = self.backlog.front() {
            if done > t {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= len;
        }
    }

    /// Queue state at trace time `t`: bytes waiting or being serialised, and how long a packet
    /// arriving now would wait before its own serialisation starts (exact, from the trace).
    pub(crate) fn backlog(&mut self, t: Duration) -> (usize, Duration) {
        self.drain(t);
        (self.backlog_bytes, self.link_free_at.saturating_sub(t))
    }

    pub(crate) fn rate_kbit(&self, t: Duration) -> u64 {
        self.profile.rate_kbit_at(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn fates(profile: &Profile, seed: u64, n: usize) -> Vec<Fate> {
        let mut s = Shaper::new(profile.clone(), seed, 0);
        (0..n).map(|i| s.arrive(ms(i as u64), 100)).collect()
    }

    #[test]
    fn drop_tail_counts_the_packet_in_service() {
        let mut s = Shaper::new(Profile::constant(1000, 10_000), 0, 0);
        let got: Vec<Fate> = (0..100).map(|_| s.arrive(Duration::ZERO, 1000)).collect();
        let sent: Vec<Duration> = got
            .iter()
            .filter_map(|f| match f {
                Fate::Emit(t) => Some(*t),
                _ => None,
            })
            .collect();
        // 1000 bytes at 1000 kbit/s take 8 ms each; ten fill the 10 kB queue.
        assert_eq!(sent, (1..=10).map(|i| ms(8 * i)).collect::<Vec<_>>());
        assert_eq!(s.backlog(Duration::ZERO), (10_000, ms(80)));
        // Once the first has left there is room for exactly one more.
        assert_eq!(s.arrive(ms(8), 1000), Fate::Emit(ms(88)));
        assert_eq!(s.arrive(ms(8), 1000), Fate::Dropped);
    }

    #[test]
    fn unlimited_rate_never_queues() {
        let p = Profile::constant(0, 0).with_delay(ms(20));
        let mut s = Shaper::new(p, 0, 0);
        for i in 0..10 {
            assert_eq!(s.arrive(ms(i), 65535), Fate::Emit(ms(i + 20)));
        }
        assert_eq!(s.backlog(ms(10)), (0, Duration::ZERO));
    }

    #[test]
    fn delay_follows_serialisation() {
        let p = Profile::constant(2000, 100_000).with_delay(ms(30));
        let mut s = Shaper::new(p, 0, 0);
        // 500 bytes at 2000 kbit/s = 2 ms, then 30 ms.
        assert_eq!(s.arrive(ms(5), 500), Fate::Emit(ms(37)));
        assert_eq!(s.rate_kbit(ms(5)), 2000);
    }

    #[test]
    fn jitter_stays_in_bounds_without_reordering() {
        let json = r#"{"name": "j", "queue_bytes": 1, "steps": [{"duration_s": 10,
            "rate_kbit": 0, "delay_ms": 10, "jitter_ms": 5}]}"#;
        let mut s = Shaper::new(Profile::from_json_str(json).unwrap(), 3, 0);
        let mut last = Duration::ZERO;
        let mut spread = (ms(1000), Duration::ZERO);
        for i in 0..2000 {
            let Fate::Emit(at) = s.arrive(ms(i), 100) else {
                panic!("unexpected loss")
            };
            assert!(at >= last, "reordered at packet {i}");
            last = at;
            let d = at - ms(i);
            spread = (spread.0.min(d), spread.1.max(d));
        }
        assert!(spread.0 >= ms(5) && spread.1 <= ms(15), "{spread:?}");
        assert!(
            spread.0 < ms(6) && spread.1 > ms(14),
            "jitter too narrow: {spread:?}"
        );
    }

    #[test]
    fn loss_extremes_and_seeds() {
        let all = Profile::constant(0, 1).with_loss(1.0);
        assert!(fates(&all, 1, 100).iter().all(|f| *f == Fate::Lost));
        let none = Profile::constant(0, 1);
        assert!(fates(&none, 1, 100).iter().all(|f| *f != Fate::Lost));
        let some = Profile::constant(0, 1).with_loss(0.3);
        assert_eq!(fates(&some, 5, 1000), fates(&some, 5, 1000));
        assert_ne!(fates(&some, 5, 1000), fates(&some, 6, 1000));
    }
}
