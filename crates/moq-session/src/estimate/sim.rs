//! A small packet-level model of a sender behind a bottleneck, for tests of the path
//! estimate and of congestion controllers, in virtual time.
//!
//! - **Source**: a live stream of `fps` frames per second whose average rate follows a
//!   trace, a keyframe every `gop` frames `key_ratio` times the size of the others; or,
//!   `paced`, the same rate in full packets evenly spaced (a sender without bursts).
//! - **Transport**: sends packets of at most 1200 bytes (30 of them overhead) from its
//!   buffer while the window allows; declares a packet lost as RFC 9002 does (three later
//!   packets, or one sent 9/8 of a round trip later, acknowledged), and everything in
//!   flight after three round trips (at least 300 ms) without any acknowledgement; it
//!   sends lost data again. It reports "app-limited" unless the window held data back,
//!   as quinn does.
//! - **Link**: random loss and outages on entry, a drop-tail queue counting the packet in
//!   service, FIFO service at a piecewise-constant rate, then a propagation delay.
//! - **Receiver**: acknowledges every second packet at once, a lone one after the maximum
//!   ack delay; the return path adds its delay, and may release acknowledgements only on a
//!   time grid (ack compression).
//!
//! Every event is fed to a [`PathEstimator`] (the tap) and to the window policy.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use super::{PathEstimate, PathEstimator};

const MSS: u64 = 1200;
const OVERHEAD: u64 = 30;
const PACKET_THRESHOLD: u64 = 3;

/// A piecewise-constant rate in bit/s: `(from, rate)` in time order, from zero.
pub(crate) type Trace = Vec<(Duration, u64)>;

pub(crate) fn constant(rate: u64) -> Trace {
    vec![(Duration::ZERO, rate)]
}

pub(crate) fn step(before: u64, at: Duration, after: u64) -> Trace {
    vec![(Duration::ZERO, before), (at, after)]
}

fn rate_at(trace: &Trace, t: Duration) -> (u64, Option<Duration>) {
    let mut rate = trace.first().map_or(0, |s| s.1);
    let mut next = None;
    for &(from, r) in trace {
        if from <= t {
            rate = r;
        } else {
            next = Some(from);
            break;
        }
    }
    (rate, next)
}

/// What a congestion window policy sees (quinn's controller interface, with plain RTTs).
pub(crate) trait Window {
    fn window(&self) -> u64;
    fn on_sent(&mut self, _now: Instant, _bytes: u64, _in_flight: u64) {}
    fn on_ack(
        &mut self,
        _now: Instant,
        _sent: Instant,
        _bytes: u64,
        _app_limited: bool,
        _rtt: Rtt,
    ) {
    }
    fn on_end_acks(&mut self, _now: Instant, _in_flight: u64, _app_limited: bool) {}
    fn on_loss(&mut self, _now: Instant, _sent: Instant, _lost_bytes: u64) {}
}

/// Round-trip state of the transport.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtt {
    pub smoothed: Duration,
    pub min: Duration,
}

/// A fixed window (as the project's send window keeps QUIC's buffer).
pub(crate) struct Fixed(pub u64);

impl Window for Fixed {
    fn window(&self) -> u64 {
        self.0
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub capacity: Trace,
    pub media: Trace,
    pub fps: u32,
    pub gop: u32,
    pub key_ratio: f64,
    pub paced: bool,
    pub forward_delay: Duration,
    pub return_delay: Duration,
    pub queue_limit: u64,
    pub loss: f64,
    pub outages: Vec<(Duration, Duration)>,
    pub max_ack_delay: Duration,
    /// Acknowledgements reach the sender only at multiples of this.
    pub ack_grid: Option<Duration>,
    /// Uniform jitter of the return path, in ± this (never reordering).
    pub return_jitter: Duration,
    pub seed: u64,
    pub duration: Duration,
    /// How often a sample of the estimate is recorded.
    pub sample_every: Duration,
}

impl Scenario {
    /// A 24 fps stream with a keyframe every 15 frames, 6 times the size of the others,
    /// on a link with 10 ms each way (±1 ms of jitter on the way back) and a 60 kB queue.
    pub fn new(capacity: Trace, media: Trace, duration: Duration) -> Scenario {
        Scenario {
            capacity,
            media,
            fps: 24,
            gop: 15,
            key_ratio: 6.0,
            paced: false,
            forward_delay: Duration::from_millis(10),
            return_delay: Duration::from_millis(10),
            queue_limit: 60_000,
            loss: 0.0,
            outages: Vec::new(),
            max_ack_delay: Duration::from_millis(25),
            ack_grid: None,
            return_jitter: Duration::from_millis(1),
            seed: 1,
            duration,
            sample_every: Duration::from_millis(100),
        }
    }
}

/// One recorded sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub t: Duration,
    pub estimate: PathEstimate,
    /// The link's capacity at `t`, bit/s.
    pub capacity: u64,
    /// How long a packet arriving at `t` would wait in the link's queue.
    pub queue_delay: Duration,
    pub window: u64,
    /// Bytes the link has carried by `t`.
    pub served: u64,
}

impl Sample {
    /// The estimate in kbit/s (0 if none).
    pub fn kbit(&self) -> f64 {
        self.estimate.delivery_rate.unwrap_or(0) as f64 / 1000.0
    }
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub samples: Vec<Sample>,
    /// Payload bytes delivered to the receiver (first copies).
    pub delivered: u64,
    /// Bytes the link carried, and how long it was serving.
    pub link_bytes: u64,
    pub link_busy: Duration,
    /// Bytes the source produced.
    pub produced: u64,
    /// Bytes waiting in the sender at the end.
    pub backlog: u64,
    pub lost_packets: u64,
}

impl Outcome {
    pub fn between(&self, from: Duration, to: Duration) -> impl Iterator<Item = &Sample> {
        self.samples.iter().filter(move |s| s.t >= from && s.t < to)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    Acked,
    Lost,
}

#[derive(Debug, Clone, Copy)]
struct Packet {
    sent: Duration,
    size: u64,
    state: State,
}

#[derive(Debug)]
enum Event {
    Frame(u64),
    Chunk,
    Arrive(usize),
    AckTimer(u64),
    AckArrive(Vec<usize>),
    Tick,
    Sample,
}

/// Small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Sim<'a> {
    sc: &'a Scenario,
    base: Instant,
    now: Duration,
    queue: BinaryHeap<Reverse<(Duration, u64, usize)>>,
    events: Vec<Option<Event>>,
    seq: u64,
    rng: Rng,
    est: PathEstimator,
    window: &'a mut dyn Window,
    // transport
    buffer: u64,
    packets: Vec<Packet>,
    first_open: usize,
    in_flight: u64,
    largest_acked: Option<usize>,
    blocked: bool,
    srtt: Option<Duration>,
    latest: Duration,
    last_progress: Duration,
    min_rtt: Option<Duration>,
    // link
    link_queue: VecDeque<(Duration, u64)>,
    last_departure: Duration,
    // receiver
    unacked: Vec<usize>,
    ack_generation: u64,
    last_ack_arrival: Duration,
    out: Outcome,
}

impl Sim<'_> {
    fn at(&self, t: Duration) -> Instant {
        self.base + t
    }

    fn schedule(&mut self, t: Duration, event: Event) {
        self.seq += 1;
        self.events.push(Some(event));
        self.queue
            .push(Reverse((t, self.seq, self.events.len() - 1)));
    }

    fn frame_size(&self, index: u64) -> u64 {
        let (rate, _) = rate_at(&self.sc.media, self.now);
        let average = rate as f64 / 8.0 / f64::from(self.sc.fps);
        let gop = f64::from(self.sc.gop);
        let other = average * gop / (gop - 1.0 + self.sc.key_ratio);
        if index.is_multiple_of(u64::from(self.sc.gop)) {
            (other * self.sc.key_ratio) as u64
        } else {
            other as u64
        }
    }

    fn try_send(&mut self) {
        while self.buffer > 0 {
            let payload = self.buffer.min(MSS - OVERHEAD);
            let size = payload + OVERHEAD;
            // As quinn: a packet goes only if a full-sized one would leave the in-flight
            // bytes below the window (a window of two packets carries one at a time).
            if self.in_flight + MSS >= self.window.window() {
                self.blocked = true;
                return;
            }
            self.buffer -= payload;
            self.in_flight += size;
            let index = self.packets.len();
            self.link_enqueue(size, index);
            self.packets.push(Packet {
                sent: self.now,
                size,
                state: State::InFlight,
            });
            let now = self.at(self.now);
            self.est.on_sent(now, size, self.in_flight);
            self.window.on_sent(now, size, self.in_flight);
        }
        self.blocked = false;
    }

    /// Puts a packet on the link, unless it is lost.
    fn link_enqueue(&mut self, size: u64, index: usize) {
        let t = self.now;
        let out = self
            .sc
            .outages
            .iter()
            .any(|&(from, to)| t >= from && t < to);
        if out || (self.sc.loss > 0.0 && self.rng.next_f64() < self.sc.loss) {
            return;
        }
        while self.link_queue.front().is_some_and(|&(d, _)| d <= t) {
            self.link_queue.pop_front();
        }
        let queued: u64 = self.link_queue.iter().map(|&(_, s)| s).sum();
        if queued + size > self.sc.queue_limit {
            return;
        }
        let start = t.max(self.last_departure);
        let departure = self.serve(start, size);
        self.out.link_bytes += size;
        self.out.link_busy += departure - start;
        self.last_departure = departure;
        self.link_queue.push_back((departure, size));
        self.schedule(departure + self.sc.forward_delay, Event::Arrive(index));
    }

    /// When `bytes` starting service at `start` are out.
    fn serve(&self, mut start: Duration, bytes: u64) -> Duration {
        let mut bits = bytes as f64 * 8.0;
        loop {
            let (rate, next) = rate_at(&self.sc.capacity, start);
            let rate = rate.max(1) as f64;
            let need = Duration::from_secs_f64(bits / rate);
            match next {
                Some(change) if start + need > change => {
                    bits -= (change - start).as_secs_f64() * rate;
                    start = change;
                }
                _ => return start + need,
            }
        }
    }

    fn send_ack(&mut self) {
        if self.unacked.is_empty() {
            return;
        }
        self.ack_generation += 1;
        let mut at = self.now + self.sc.return_delay;
        if !self.sc.return_jitter.is_zero() {
            let j = self.sc.return_jitter.as_secs_f64();
            let offset = (self.rng.next_f64() * 2.0 - 1.0) * j;
            at = Duration::from_secs_f64((at.as_secs_f64() + offset).max(0.0));
        }
        at = at.max(self.last_ack_arrival);
        self.last_ack_arrival = at;
        if let Some(grid) = self.sc.ack_grid {
            let g = grid.as_nanos().max(1);
            at = Duration::from_nanos(at.as_nanos().div_ceil(g).saturating_mul(g) as u64);
        }
        let list = std::mem::take(&mut self.unacked);
        self.schedule(at, Event::AckArrive(list));
    }

    fn on_arrive(&mut self, index: usize) {
        self.out.delivered += self.packets[index].size - OVERHEAD;
        self.unacked.push(index);
        if self.unacked.len() >= 2 {
            self.send_ack();
        } else {
            self.ack_generation += 1;
            let generation = self.ack_generation;
            self.schedule(
                self.now + self.sc.max_ack_delay,
                Event::AckTimer(generation),
            );
        }
    }

    fn declare_lost(&mut self, index: usize) {
        let p = &mut self.packets[index];
        if p.state != State::InFlight {
            return;
        }
        p.state = State::Lost;
        let (size, sent) = (p.size, p.sent);
        self.in_flight -= size;
        self.buffer += size - OVERHEAD;
        self.out.lost_packets += 1;
        let now = self.at(self.now);
        self.est.on_loss(now, size);
        self.window.on_loss(now, self.at(sent), size);
    }

    fn on_ack(&mut self, list: Vec<usize>) {
        let now = self.at(self.now);
        let app_limited = !self.blocked;
        let rtt = Rtt {
            smoothed: self.srtt.unwrap_or(self.latest),
            min: self.min_rtt.unwrap_or(self.latest),
        };
        let mut newest = None;
        for &index in &list {
            let p = self.packets[index];
            if p.state != State::InFlight {
                continue;
            }
            self.packets[index].state = State::Acked;
            self.in_flight -= p.size;
            self.est.on_ack(now, self.at(p.sent), p.size, app_limited);
            self.window
                .on_ack(now, self.at(p.sent), p.size, app_limited, rtt);
            newest = Some(index);
        }
        let Some(newest) = newest else {
            return;
        };
        self.largest_acked = Some(self.largest_acked.map_or(newest, |l| l.max(newest)));
        let sample = self.now - self.packets[newest].sent;
        self.latest = sample;
        self.min_rtt = Some(self.min_rtt.map_or(sample, |m| m.min(sample)));
        self.srtt = Some(match self.srtt {
            Some(s) => (s * 7 + sample) / 8,
            None => sample,
        });
        let (srtt, min) = (self.srtt.unwrap_or(sample), self.min_rtt.unwrap_or(sample));
        self.est.on_rtt(now, sample, srtt, min);
        self.last_progress = self.now;
        // RFC 9002: lost if three later packets, or one sent 9/8 of a round trip later,
        // were acknowledged.
        if let Some(largest) = self.largest_acked {
            let threshold = largest.saturating_sub(PACKET_THRESHOLD as usize);
            let late = self.latest.max(srtt) * 9 / 8;
            for index in self.first_open..largest {
                if index < threshold || self.packets[index].sent + late <= self.now {
                    self.declare_lost(index);
                }
            }
        }
        self.advance_open();
        self.window.on_end_acks(now, self.in_flight, app_limited);
        self.try_send();
    }

    fn advance_open(&mut self) {
        while self
            .packets
            .get(self.first_open)
            .is_some_and(|p| p.state != State::InFlight)
        {
            self.first_open += 1;
        }
    }

    /// Without any acknowledgement for a long time (an outage took every packet in
    /// flight), everything in flight is given up and sent again.
    fn on_tick(&mut self) {
        let srtt = self.srtt.unwrap_or(Duration::from_millis(100));
        let timeout = (srtt * 3).max(Duration::from_millis(300));
        if self.in_flight > 0 && self.now >= self.last_progress + timeout {
            for index in self.first_open..self.packets.len() {
                if self.packets[index].sent + timeout <= self.now {
                    self.declare_lost(index);
                }
            }
            self.last_progress = self.now;
            self.advance_open();
        }
        self.try_send();
    }

    fn sample(&mut self) {
        let t = self.now;
        let queue_delay = self.last_departure.saturating_sub(t);
        let in_link: u64 = self
            .link_queue
            .iter()
            .filter(|&&(d, _)| d > t)
            .map(|&(_, s)| s)
            .sum();
        self.out.samples.push(Sample {
            t,
            estimate: self.est.estimate(self.at(t)),
            capacity: rate_at(&self.sc.capacity, t).0,
            queue_delay,
            window: self.window.window(),
            served: self.out.link_bytes - in_link,
        });
    }

    fn run(mut self) -> Outcome {
        if self.sc.paced {
            self.schedule(Duration::ZERO, Event::Chunk);
        } else {
            self.schedule(Duration::ZERO, Event::Frame(0));
        }
        self.schedule(Duration::from_millis(5), Event::Tick);
        self.schedule(self.sc.sample_every, Event::Sample);
        while let Some(Reverse((t, _, slot))) = self.queue.pop() {
            if t > self.sc.duration {
                break;
            }
            self.now = t;
            let Some(event) = self.events[slot].take() else {
                continue;
            };
            match event {
                Event::Frame(index) => {
                    let size = self.frame_size(index);
                    self.buffer += size;
                    self.out.produced += size;
                    let next = Duration::from_secs_f64((index + 1) as f64 / f64::from(self.sc.fps));
                    self.schedule(next, Event::Frame(index + 1));
                    self.try_send();
                }
                Event::Chunk => {
                    let (rate, _) = rate_at(&self.sc.media, t);
                    let size = MSS - OVERHEAD;
                    self.buffer += size;
                    self.out.produced += size;
                    let gap = Duration::from_secs_f64(size as f64 * 8.0 / rate.max(1) as f64);
                    self.schedule(t + gap, Event::Chunk);
                    self.try_send();
                }
                Event::Arrive(index) => self.on_arrive(index),
                Event::AckTimer(generation) => {
                    if generation == self.ack_generation {
                        self.send_ack();
                    }
                }
                Event::AckArrive(list) => self.on_ack(list),
                Event::Tick => {
                    self.on_tick();
                    self.schedule(t + Duration::from_millis(5), Event::Tick);
                }
                Event::Sample => {
                    self.sample();
                    self.schedule(t + self.sc.sample_every, Event::Sample);
                }
            }
        }
        self.out.backlog = self.buffer;
        self.out
    }
}

/// Runs `scenario` with `window` deciding how much may be in flight.
pub(crate) fn run(scenario: &Scenario, window: &mut dyn Window) -> Outcome {
    let sim = Sim {
        sc: scenario,
        base: Instant::now(),
        now: Duration::ZERO,
        queue: BinaryHeap::new(),
        events: Vec::new(),
        seq: 0,
        rng: Rng(scenario.seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        est: PathEstimator::with_max_ack_delay(scenario.max_ack_delay),
        window,
        buffer: 0,
        packets: Vec::new(),
        first_open: 0,
        in_flight: 0,
        largest_acked: None,
        blocked: false,
        srtt: None,
        latest: Duration::ZERO,
        last_progress: Duration::ZERO,
        min_rtt: None,
        link_queue: VecDeque::new(),
        last_departure: Duration::ZERO,
        unacked: Vec::new(),
        ack_generation: 0,
        last_ack_arrival: Duration::ZERO,
        out: Outcome::default(),
    };
    sim.run()
}
