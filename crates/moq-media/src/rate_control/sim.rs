//! A simulated encoder and path in virtual time, driving the controller as moqsink does:
//! an access unit every frame interval into a bottleneck, the path's report every 100 ms.
//!
//! - [`SimEncoder`]: GoP of `gop` frames, a keyframe `key_factor` times a P-frame, optional
//!   B-frames (3 between references, half a P-frame each); the frame made now spends the
//!   target set `lag_frames` frames ago (lookahead), times `ratio`, plus `floor_bps`; sizes
//!   vary by ±10 % (seeded).
//! - [`SimPath`]: a drop-tail FIFO of 1200-byte packets served at a rate trace, 1 ms steps;
//!   it reports as the session's estimator does: the delivery rate over busy intervals
//!   (packets that waited behind the previous one), the acknowledged rate over 0.5 s, the
//!   smallest queueing delay of the packets that left in the last 200 ms and 1 s (each
//!   packet's own serialisation included, as against a minimum round trip taken on a fast
//!   link), and the loss rate over 2 s.

use std::collections::VecDeque;

use super::{PathReport, RateController};

const PACKET: u64 = 1200;
const TICK_US: u64 = 1_000;
pub const FRAME_US: u64 = 41_667;
const REPORT_US: u64 = 100_000;

/// A small deterministic generator (xorshift), for frame size noise and link traces.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [0, 1).
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly normal, mean 0, deviation 1.
    pub fn gauss(&mut self) -> f64 {
        (0..12).map(|_| self.next()).sum::<f64>() - 6.0
    }
}

#[derive(Debug, Clone)]
pub struct SimEncoder {
    pub gop: u64,
    pub key_factor: f64,
    pub bframes: bool,
    pub lag_frames: usize,
    pub ratio: f64,
    /// Bits per second made whatever the target (an encoder that cannot go below a
    /// quality floor overshoots low targets more).
    pub floor_bps: f64,
    targets: VecDeque<f64>,
    index: u64,
    rng: Rng,
}

impl SimEncoder {
    /// x264 `tune=zerolatency`: answers at the next frame, produces its target.
    pub fn zerolatency() -> SimEncoder {
        SimEncoder::new(1, 1.0, 4.0, false)
    }

    /// x264's defaults: 40 frames of lookahead (1.7 s at 24 fps), B-frames, undershoots.
    pub fn lookahead() -> SimEncoder {
        SimEncoder::new(40, 0.8, 5.0, true)
    }

    /// openh264enc's bitrate mode: answers within a few frames, overshoots.
    pub fn openh264() -> SimEncoder {
        SimEncoder::new(3, 1.15, 3.0, false)
    }

    pub fn new(lag_frames: usize, ratio: f64, key_factor: f64, bframes: bool) -> SimEncoder {
        SimEncoder {
            gop: 15,
            key_factor,
            bframes,
            lag_frames,
            ratio,
            floor_bps: 0.0,
            targets: VecDeque::new(),
            index: 0,
            rng: Rng::new(11),
        }
    }

    /// The next access unit with the encoder's target now: (bytes, keyframe).
    pub fn frame(&mut self, target_bps: f64) -> (u64, bool) {
        self.targets.push_back(target_bps);
        while self.targets.len() > self.lag_frames + 1 {
            self.targets.pop_front();
        }
        let spent = self.targets[0];
        let position = self.index % self.gop;
        self.index += 1;
        // Weights of one GoP: the keyframe, then P B B B P B B B … (or all P).
        let weight = |i: u64| match i {
            0 => self.key_factor,
            i if !self.bframes || i % 4 == 0 => 1.0,
            _ => 0.5,
        };
        let total: f64 = (0..self.gop).map(weight).sum();
        let gop_bits =
            (self.ratio * spent + self.floor_bps) * self.gop as f64 * FRAME_US as f64 / 1e6;
        let noise = 1.0 + 0.1 * (2.0 * self.rng.next() - 1.0);
        let bytes = (gop_bits * weight(position) / total / 8.0 * noise).max(50.0);
        (bytes as u64, position == 0)
    }
}

#[derive(Debug, Clone, Copy)]
struct Packet {
    arrived_us: u64,
    bytes: u64,
    /// The index in `SimPath::frames` of the frame this packet ends.
    ends_frame: Option<usize>,
}

pub struct SimPath {
    /// Rate at a time (µs), bit/s.
    rate: Box<dyn Fn(u64) -> f64>,
    pub queue_limit: u64,
    /// Whether busy intervals measure the delivery rate (false: a path whose rate the
    /// stream never shows).
    pub measures: bool,
    queue: VecDeque<Packet>,
    backlog: u64,
    /// Bits of the head packet already sent.
    head_sent: f64,
    /// Departures: (time, bytes, queueing delay µs, busy).
    departed: VecDeque<(u64, u64, u64, bool)>,
    drops: VecDeque<(u64, u64)>,
    delivery: Option<(f64, u64)>,
    pub dropped_bytes: u64,
    /// Every frame sent: when (µs), and what became of it.
    pub frames: Vec<(u64, Crossing)>,
}

/// What became of a frame on the path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Crossing {
    Pending,
    /// A packet of it was dropped.
    Lost,
    /// Its last packet left the queue this long after the frame was sent, µs.
    Crossed(u64),
}

impl SimPath {
    pub fn new(rate: impl Fn(u64) -> f64 + 'static, queue_limit: u64) -> SimPath {
        SimPath {
            rate: Box::new(rate),
            queue_limit,
            measures: true,
            queue: VecDeque::new(),
            backlog: 0,
            head_sent: 0.0,
            departed: VecDeque::new(),
            drops: VecDeque::new(),
            delivery: None,
            dropped_bytes: 0,
            frames: Vec::new(),
        }
    }

    pub fn rate_at(&self, now_us: u64) -> f64 {
        (self.rate)(now_us)
    }

    /// A frame of `bytes` is sent at `now_us`, in packets.
    pub fn send(&mut self, now_us: u64, bytes: u64) {
        self.frames.push((now_us, Crossing::Pending));
        let mut left = bytes;
        while left > 0 {
            let size = left.min(PACKET);
            left -= size;
            if self.backlog + size > self.queue_limit {
                self.drops.push_back((now_us, size));
                self.dropped_bytes += size;
                if let Some(frame) = self.frames.last_mut() {
                    frame.1 = Crossing::Lost;
                }
                continue;
            }
            self.backlog += size;
            self.queue.push_back(Packet {
                arrived_us: now_us,
                bytes: size,
                ends_frame: (left == 0).then(|| self.frames.len() - 1),
            });
        }
    }

    /// Serves the queue for one tick ending at `now_us`.
    pub fn tick(&mut self, now_us: u64) {
        let mut budget = self.rate_at(now_us) * TICK_US as f64 / 1e6;
        while let Some(head) = self.queue.front().copied() {
            let need = head.bytes as f64 * 8.0 - self.head_sent;
            if need > budget {
                self.head_sent += budget;
                break;
            }
            budget -= need;
            self.head_sent = 0.0;
            self.queue.pop_front();
            self.backlog -= head.bytes;
            // Busy: the next packet was already waiting when this one left.
            let busy = self.queue.front().is_some_and(|p| p.arrived_us < now_us);
            let delay = now_us.saturating_sub(head.arrived_us);
            let frame = head.ends_frame.and_then(|i| self.frames.get_mut(i));
            if let Some(frame) = frame.filter(|f| f.1 == Crossing::Pending) {
                frame.1 = Crossing::Crossed(delay);
            }
            self.departed.push_back((now_us, head.bytes, delay, busy));
        }
        while self
            .departed
            .front()
            .is_some_and(|d| d.0 + 3_000_000 < now_us)
        {
            self.departed.pop_front();
        }
        while self.drops.front().is_some_and(|d| d.0 + 2_000_000 < now_us) {
            self.drops.pop_front();
        }
    }

    /// The path as the session's estimator would report it at `now_us`.
    pub fn report(&mut self, now_us: u64) -> PathReport {
        let since = |window: u64| now_us.saturating_sub(window);
        let within = |window: u64| self.departed.iter().filter(move |d| d.0 > since(window));
        // The delivery rate of the busy intervals of `window`, given `min_busy_us` of them.
        let busy_rate = |window: u64, min_busy_us: u64| {
            let mut bytes = 0;
            let mut events = 0;
            let mut last: Option<(u64, bool)> = None;
            let mut busy_us = 0;
            for d in within(window) {
                // Busy from the previous departure on: this packet was waiting then.
                if let Some((prev, true)) = last {
                    bytes += d.1;
                    busy_us += d.0 - prev;
                    events += 1;
                }
                last = Some((d.0, d.3));
            }
            (events >= 3 && busy_us >= min_busy_us).then(|| bytes as f64 * 8e6 / busy_us as f64)
        };
        let recent_delivery_bps = busy_rate(250_000, 100_000).map(|r| r as u64);
        let measured = busy_rate(1_000_000, 20_000).or_else(|| busy_rate(3_000_000, 20_000));
        if let Some(rate) = measured.filter(|_| self.measures) {
            self.delivery = Some((rate, now_us));
        }
        let acked: Vec<_> = within(500_000).collect();
        let acked_bps = match (acked.first(), acked.last()) {
            (Some(first), Some(last)) if last.0 - first.0 >= 100_000 => {
                let bytes: u64 = acked.iter().skip(1).map(|d| d.1).sum();
                Some((bytes as f64 * 8e6 / (last.0 - first.0) as f64) as u64)
            }
            _ => None,
        };
        let trough = |window| within(window).map(|d| d.2).min();
        let delivered: u64 = within(2_000_000).map(|d| d.1).sum();
        let lost: u64 = self.drops.iter().map(|d| d.1).sum();
        let now_queue = (self.backlog as f64 * 8e6 / self.rate_at(now_us).max(1.0)) as u64;
        PathReport {
            delivery_bps: self.delivery.map(|(r, _)| r as u64),
            sample_age_us: self.delivery.map(|(_, at)| now_us - at),
            queue_delay_us: trough(200_000).unwrap_or(now_queue),
            queue_trough_us: Some(trough(1_000_000).unwrap_or(now_queue)),
            loss_rate: if lost + delivered == 0 {
                0.0
            } else {
                lost as f64 / (lost + delivered) as f64
            },
            acked_bps,
            // Frames go straight onto the link: no transport window holds them back.
            held_back: false,
            send_queue_us: 0,
            send_queue_trough_us: 0,
            recent_delivery_bps: recent_delivery_bps.filter(|_| self.measures),
            recent_queue_us: trough(100_000),
        }
    }
}

/// One 100 ms sample of a run.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub t_s: f64,
    pub target_bps: u64,
    /// The link's rate, bit/s.
    pub link_bps: f64,
    /// What the encoder produced over the last 100 ms, bit/s.
    pub output_bps: f64,
    /// Queueing delay at the bottleneck now, ms.
    pub queue_ms: f64,
}

/// The encoder, the path and the controller in one loop.
pub struct Sim {
    pub encoder: SimEncoder,
    pub path: SimPath,
    pub controller: RateController,
    pub now_us: u64,
    pub trace: Vec<Sample>,
    /// Every change the controller made: (time s, target, why).
    pub changes: Vec<(f64, u64, super::Change)>,
    produced: u64,
}

impl Sim {
    pub fn new(encoder: SimEncoder, path: SimPath, controller: RateController) -> Sim {
        Sim {
            encoder,
            path,
            controller,
            now_us: 0,
            trace: Vec::new(),
            changes: Vec::new(),
            produced: 0,
        }
    }

    /// Runs for `seconds` of virtual time.
    pub fn run(&mut self, seconds: f64) {
        let end = self.now_us + (seconds * 1e6) as u64;
        while self.now_us < end {
            self.now_us += TICK_US;
            let now = self.now_us;
            self.path.tick(now);
            if now % FRAME_US < TICK_US {
                let (bytes, key) = self.encoder.frame(self.controller.target_bps() as f64);
                self.produced += bytes;
                self.path.send(now, bytes);
                self.controller.on_frame(now, bytes, key);
            }
            if now.is_multiple_of(REPORT_US) {
                let report = self.path.report(now);
                if let Some((target, why)) = self.controller.update(now, &[report]) {
                    self.changes.push((now as f64 / 1e6, target, why));
                }
                let backlog = self.path.backlog;
                let link = self.path.rate_at(now);
                self.trace.push(Sample {
                    t_s: now as f64 / 1e6,
                    target_bps: self.controller.target_bps(),
                    link_bps: link,
                    output_bps: std::mem::take(&mut self.produced) as f64 * 8e6 / REPORT_US as f64,
                    queue_ms: backlog as f64 * 8e3 / link.max(1.0),
                });
            }
        }
    }

    /// The samples in [from, to) s.
    pub fn between(&self, from: f64, to: f64) -> impl Iterator<Item = &Sample> {
        self.trace
            .iter()
            .filter(move |s| s.t_s >= from && s.t_s < to)
    }

    /// Mean output over [from, to) s, bit/s.
    pub fn mean_output(&self, from: f64, to: f64) -> f64 {
        let (sum, n) = self
            .between(from, to)
            .fold((0.0, 0), |(s, n), x| (s + x.output_bps, n + 1));
        sum / n.max(1) as f64
    }

    /// Mean link rate over [from, to) s, bit/s.
    pub fn mean_link(&self, from: f64, to: f64) -> f64 {
        let (sum, n) = self
            .between(from, to)
            .fold((0.0, 0), |(s, n), x| (s + x.link_bps, n + 1));
        sum / n.max(1) as f64
    }

    /// Share of the frames sent in [from, to) s lost or crossing in more than `bound_ms`:
    /// what a player with that much playout delay could not show.
    pub fn late_share(&self, from: f64, to: f64, bound_ms: u64) -> f64 {
        let sent = self
            .path
            .frames
            .iter()
            .filter(|f| (from..to).contains(&(f.0 as f64 / 1e6)));
        let (late, n) = sent.fold((0, 0), |(late, n), f| {
            let is_late = match f.1 {
                Crossing::Crossed(delay) => delay > bound_ms * 1000,
                _ => true,
            };
            (late + usize::from(is_late), n + 1)
        });
        late as f64 / n.max(1) as f64
    }

    /// Seconds covered by 5 s stretches with the target at `floor` throughout while the
    /// link's mean over the stretch was above twice the floor (the benchmark's "starved").
    pub fn starved_s(&self, floor: u64) -> f64 {
        let at_floor: Vec<bool> = self
            .trace
            .iter()
            .map(|s| s.target_bps as f64 <= floor as f64 * 1.02)
            .collect();
        let mut starved = vec![false; self.trace.len()];
        let window = 50;
        for end in window..self.trace.len() {
            let range = end - window..end;
            if at_floor[range.clone()].iter().all(|a| *a) {
                let link: f64 = self.trace[range.clone()]
                    .iter()
                    .map(|s| s.link_bps)
                    .sum::<f64>()
                    / window as f64;
                if link > 2.0 * floor as f64 {
                    starved[range].iter_mut().for_each(|s| *s = true);
                }
            }
        }
        starved.iter().filter(|s| **s).count() as f64 * REPORT_US as f64 / 1e6
    }
}

/// A mobile-like trace: a new rate every second, a mean-reverting walk in log rate
/// between 150 and 2500 kbit/s (as pipelines/profiles/make_mobile.py), bit/s per second.
pub fn mobile_trace(seed: u64, seconds: usize) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let (low, high, median): (f64, f64, f64) = (150e3, 2500e3, 650e3);
    let mut x = median.ln();
    (0..seconds)
        .map(|_| {
            x += 0.3 * (median.ln() - x) + 0.45 * rng.gauss();
            if x > high.ln() {
                x = 2.0 * high.ln() - x;
            }
            if x < low.ln() {
                x = 2.0 * low.ln() - x;
            }
            x.exp()
        })
        .collect()
}
