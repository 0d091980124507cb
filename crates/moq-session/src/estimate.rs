//! Path estimate of one connection: how fast the path delivers, its round trip and
//! queue, and how much it loses, from what a congestion controller sees (bytes sent,
//! bytes acknowledged with the time they were sent, round-trip samples, losses).
//!
//! A pure state machine: no clock, no socket, no quinn type. Every input carries its time;
//! [`PathEstimator::estimate`] reads the result. [`crate::congestion::Tapped`] feeds one
//! from a live connection; tests feed it synthetic traces.
//!
//! # Why not cwnd / RTT, or acknowledged bytes over time
//!
//! A window over a round trip counts the bytes standing in the bottleneck queue as if they
//! were capacity, and says nothing while the sender is app-limited: a live stream usually
//! makes less than the path carries, so the window is never filled. Plain acknowledged bytes
//! over time measure the sender in that case, not the path: an encoder driven by it would
//! never rise.
//!
//! # Delivery rate: busy intervals
//!
//! The packets acknowledged at one instant form an *ack event*. Between two consecutive
//! events the path delivered the bytes of the later one. That interval measures the path
//! only if the bottleneck worked on nothing else and never idled during it, i.e. the
//! event's packets were already queued when the previous event's last packet left. Each
//! packet tells whether it was: with `a` its arrival at the bottleneck, `d` its departure,
//! `s` the smallest service time and `q` its round trip minus the minimum round trip,
//! `q = wait + service − s`. If the time between the two events is at most `q` for every
//! packet of the later event, then `a ≤ d_prev − s` for each: the packet was waiting when
//! the previous one left, so the bottleneck was busy throughout. Such a *busy interval*
//! is pure service time. The test asks for [`BUSY_GUARD`] (2 ms) more than the interval,
//! against timing noise of the acknowledgements. QUIC receivers acknowledge every second
//! packet at once but hold a lone one for up to their maximum ack delay (25 ms by
//! default), or send it at once with data of their own. An interval between a lone
//! acknowledgement and one of several is therefore not used. Intervals between two lone
//! ones are used (on a link too slow for two packets per ack delay, below about
//! 400 kbit/s with 1200-byte packets, every packet is acknowledged alone; a receiver asked
//! for prompt acknowledgements acknowledges each packet of a burst alone), but only within
//! a run of busy ones lasting [`LONE_RUN_PER_ACK_DELAY`] times the receiver's maximum ack
//! delay (200 ms for 25 ms, 16 ms for the 2 ms a publisher asks for): the durations of a
//! run add up to its span, off by at most the difference of two ack delays.
//!
//! Every burst of a live stream (a keyframe, any frame of several packets) produces busy
//! intervals, so an app-limited sender still measures the path several times a second,
//! and a sender that exceeds the path measures it continuously.
//!
//! **Filter.** The rate is the sum of bytes over the sum of durations of the busy
//! intervals of the last [`PATH_WINDOW`] (1 s), needing at least 3 of them and 20 ms of
//! busy time; with fewer, of the last [`SPARSE_PATH_WINDOW`] (3 s), so a stream whose bursts
//! are short (a few packets per keyframe) keeps a current estimate; otherwise the previous
//! estimate is held. Durations of consecutive busy
//! intervals add up to the span between their ends, so ack compression
//! (acknowledgements bunched by the receiver or the return path) only moves time between
//! intervals and errs only at the ends of a run. Weighting by busy time favours a
//! saturated period: after a capacity drop under load, the link is busy all the time and
//! its new rate dominates the window within about half a second, fully after 1 s.
//!
//! **Raising only.** All other intervals measure the sender, not the path: an app-limited
//! one had nothing to send, and one held back by the congestion window with no queue at
//! the bottleneck had a window below the path's bandwidth-delay product (else a queue
//! would have formed). They cannot lower the estimate, but the rate acknowledged over the
//! last [`ACKED_WINDOW`] (0.5 s, from the first to the last acknowledgement in it) raises
//! it when higher: the path carried at least that much.
//!
//! **Recent.** Beside it, `recent_delivery_rate` is the rate of the busy intervals of the
//! last [`RECENT_PATH_WINDOW`] (250 ms) alone, once they add up to 100 ms of busy time:
//! a link that fell under the stream is busy all the time, and its new rate shows there
//! about a round trip after the fall, while round-trip samples come back only after the
//! growing queue they measure and the one-second rate still mixes in the old link.
//!
//! # Round trip, queue, loss
//!
//! `queue_delay` is the smoothed round trip minus the minimum (what the transport's RTT
//! estimator says); `standing_queue_delay` is the smallest queueing delay of any packet
//! acknowledged in the last [`STANDING_WINDOW`] (200 ms): the queue that persists, not the
//! passing wave of a keyframe. `loss_rate` is lost bytes over lost and acknowledged bytes
//! in the last [`LOSS_WINDOW`] (2 s). Losses do not change the rate: a lost packet takes no
//! bottleneck time, and an outage produces no busy interval, so the estimate is held
//! through it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Width of the time bins the measurements are kept in.
pub const BIN: Duration = Duration::from_millis(50);
/// Busy intervals older than this no longer count for the rate.
pub const PATH_WINDOW: Duration = Duration::from_secs(1);
/// With too few busy intervals in [`PATH_WINDOW`], the rate is taken over this.
pub const SPARSE_PATH_WINDOW: Duration = Duration::from_secs(3);
/// The acknowledged rate, which can only raise the estimate, is measured over this.
pub const ACKED_WINDOW: Duration = Duration::from_millis(500);
/// Losses are counted over this.
pub const LOSS_WINDOW: Duration = Duration::from_secs(2);
/// The standing queue is the smallest queueing delay seen over this.
pub const STANDING_WINDOW: Duration = Duration::from_millis(200);
/// The queue's trough is the smallest queueing delay seen over this: longer than a
/// keyframe's transfer on a link the stream fits.
pub const TROUGH_WINDOW: Duration = Duration::from_secs(1);
/// The recent delivery rate is that of the busy intervals of this long: a link that fell
/// under the stream is busy all the time, and shows its new rate here a few round trips
/// after the fall, long before the [`PATH_WINDOW`]'s rate has followed.
pub const RECENT_PATH_WINDOW: Duration = Duration::from_millis(250);
/// Busy time the recent delivery rate needs: a saturated link, not a keyframe's burst.
const MIN_RECENT_BUSY: Duration = Duration::from_millis(100);
/// The recent queue is the smallest queueing delay seen over this: the queue as the
/// newest acknowledgements show it.
pub const RECENT_QUEUE_WINDOW: Duration = Duration::from_millis(100);
/// Busy intervals needed in the window for a rate.
const MIN_PATH_EVENTS: u32 = 3;
/// Busy time needed in the window for a rate.
const MIN_PATH_TIME: Duration = Duration::from_millis(20);
/// The acknowledged rate needs acknowledgements over at least this long.
const MIN_ACKED_SPAN: Duration = Duration::from_millis(100);
/// Packets an acknowledgement must cover to be taken as sent at once: QUIC receivers
/// acknowledge every second packet immediately and hold a lone one for their maximum ack
/// delay.
const PROMPT_ACK_PACKETS: u32 = 2;
/// Margin against acknowledgement timing noise in the busy test.
pub const BUSY_GUARD: Duration = Duration::from_millis(2);
/// Busy intervals between lone acknowledgements count once a run of them lasts this many
/// times the receiver's maximum ack delay: the run's span is then off by at most 1/8.
pub const LONE_RUN_PER_ACK_DELAY: u32 = 8;
/// How long a receiver may hold a lone packet's acknowledgement unless it was told
/// otherwise (QUIC's default `max_ack_delay`).
pub const DEFAULT_MAX_ACK_DELAY: Duration = Duration::from_millis(25);
/// Longer gaps between ack events never count as busy intervals.
const MAX_INTERVAL: Duration = Duration::from_millis(500);

const BIN_NANOS: u64 = BIN.as_nanos() as u64;
/// Bins kept: enough for the longest window.
const KEPT_BINS: u64 =
    (max_duration(LOSS_WINDOW, SPARSE_PATH_WINDOW).as_nanos() / BIN.as_nanos()) as u64 + 1;

const fn max_duration(a: Duration, b: Duration) -> Duration {
    if a.as_nanos() > b.as_nanos() { a } else { b }
}

/// What the path looks like at a given time (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathEstimate {
    /// What the path delivers when the sender fills it, in bit/s; `None` until measured.
    pub delivery_rate: Option<u64>,
    /// What was acknowledged over the last [`ACKED_WINDOW`], in bit/s: what the sender got
    /// through, at most the path's rate.
    pub acked_rate: Option<u64>,
    /// What was sent over the last [`ACKED_WINDOW`], in bit/s.
    pub send_rate: Option<u64>,
    /// `delivery_rate` was measured on busy intervals within the last [`PATH_WINDOW`].
    /// Otherwise it is held from older measurements, or only a lower bound set by what
    /// the sender got through.
    pub confirmed: bool,
    /// Time since `delivery_rate` was last measured on busy intervals.
    pub path_sample_age: Option<Duration>,
    /// Age of the busy time `delivery_rate` was measured on (the mean over its intervals,
    /// weighted by their duration, plus `path_sample_age`): a rate taken over the sparse
    /// window, its busy time seconds back, is that old however recently it was computed.
    pub path_busy_age: Option<Duration>,
    /// The transport reported the sender app-limited (nothing waiting to be sent) at the
    /// latest acknowledgement; false until the first one.
    pub app_limited: bool,
    /// Smoothed round trip (as the transport reports it).
    pub rtt: Option<Duration>,
    /// The latest round-trip sample.
    pub latest_rtt: Option<Duration>,
    /// The smallest round trip seen.
    pub min_rtt: Option<Duration>,
    /// Smoothed round trip minus the minimum.
    pub queue_delay: Duration,
    /// Smallest queueing delay of a packet acknowledged in the last [`STANDING_WINDOW`];
    /// `None` without acknowledgements in it.
    pub standing_queue_delay: Option<Duration>,
    /// Smallest queueing delay of a packet acknowledged in the last [`TROUGH_WINDOW`];
    /// `None` without acknowledgements in it.
    pub queue_trough: Option<Duration>,
    /// What the path delivered over the busy intervals of the last [`RECENT_PATH_WINDOW`],
    /// in bit/s, when they add up to a saturated link; `None` otherwise.
    pub recent_delivery_rate: Option<u64>,
    /// Smallest queueing delay of a packet acknowledged in the last
    /// [`RECENT_QUEUE_WINDOW`]; `None` without acknowledgements in it.
    pub recent_queue_delay: Option<Duration>,
    /// Lost bytes over lost and acknowledged bytes in the last [`LOSS_WINDOW`].
    pub loss_rate: f64,
    /// Bytes in flight at the latest send.
    pub in_flight: u64,
}

/// Byte and time sums of one kind of interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Span {
    bytes: u64,
    nanos: u64,
    events: u32,
}

impl Span {
    fn add(&mut self, bytes: u64, interval: Duration) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.nanos = self.nanos.saturating_add(nanos(interval));
        self.events = self.events.saturating_add(1);
    }

    fn merge(&mut self, other: &Span) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.nanos = self.nanos.saturating_add(other.nanos);
        self.events = self.events.saturating_add(other.events);
    }

    /// Bytes per second, if there is enough of it.
    fn rate(&self) -> Option<f64> {
        (self.events >= MIN_PATH_EVENTS && self.nanos >= nanos(MIN_PATH_TIME))
            .then(|| self.bytes as f64 * 1e9 / self.nanos as f64)
    }
}

/// Measurements of one [`BIN`] of time.
#[derive(Debug, Clone, Copy, Default)]
struct Bin {
    index: u64,
    /// Intervals during which the bottleneck was busy with our packets.
    busy: Span,
    acked: u64,
    /// The first ack event of the bin: its time and bytes.
    first_ack: Option<(Instant, u64)>,
    /// Time of the last ack event of the bin.
    last_ack: Option<Instant>,
    lost: u64,
    sent: u64,
    /// Smallest round trip of a packet acknowledged in this bin.
    min_sample: Option<Duration>,
}

/// Packets acknowledged at one instant.
#[derive(Debug, Clone, Copy)]
struct AckEvent {
    at: Instant,
    bytes: u64,
    /// Smallest round trip among its packets.
    min_sample: Option<Duration>,
    packets: u32,
    app_limited: bool,
}

/// The path estimate of one connection (see the module documentation).
#[derive(Debug, Clone)]
pub struct PathEstimator {
    /// Time of the first input: bins count from here.
    epoch: Option<Instant>,
    /// Time of the latest input; earlier times are taken as this one.
    now: Option<Instant>,
    bins: VecDeque<Bin>,
    /// The ack event being collected, settled at the first input with a later time.
    pending: Option<AckEvent>,
    /// Time of the latest settled ack event, and whether it covered two packets or more
    /// (acknowledged at once rather than after the receiver's ack delay).
    last_event: Option<(Instant, bool)>,
    /// Busy intervals between lone acknowledgements not counted yet.
    lone_run: Option<Span>,
    /// The current run of them is long enough to count.
    lone_run_long: bool,
    /// How long a run of them must last to count (see [`LONE_RUN_PER_ACK_DELAY`]).
    min_lone_run: Duration,
    /// The estimate, in bytes per second.
    rate: Option<f64>,
    /// When the rate was last set from busy intervals.
    path_at: Option<Instant>,
    /// The mean age of the busy time it was set from, then.
    busy_age: Duration,
    /// The latest settled ack event was reported app-limited.
    app_limited: bool,
    latest_rtt: Option<Duration>,
    smoothed_rtt: Option<Duration>,
    min_rtt: Option<Duration>,
    in_flight: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn bits(bytes_per_second: f64) -> u64 {
    // Float to integer casts saturate (NaN is 0): no overflow on any input.
    (bytes_per_second * 8.0).round() as u64
}

fn min_duration(a: Option<Duration>, b: Duration) -> Duration {
    a.map_or(b, |a| a.min(b))
}

impl Default for PathEstimator {
    fn default() -> Self {
        PathEstimator::with_max_ack_delay(DEFAULT_MAX_ACK_DELAY)
    }
}

impl PathEstimator {
    /// An estimator for a receiver that holds acknowledgements up to QUIC's default 25 ms.
    pub fn new() -> PathEstimator {
        PathEstimator::default()
    }

    /// An estimator for a receiver that holds a lone packet's acknowledgement at most
    /// `max_ack_delay`: the shorter, the shorter the bursts it measures.
    pub fn with_max_ack_delay(max_ack_delay: Duration) -> PathEstimator {
        PathEstimator {
            epoch: None,
            now: None,
            bins: VecDeque::new(),
            pending: None,
            last_event: None,
            lone_run: None,
            lone_run_long: false,
            min_lone_run: max_ack_delay.saturating_mul(LONE_RUN_PER_ACK_DELAY),
            rate: None,
            path_at: None,
            busy_age: Duration::ZERO,
            app_limited: false,
            latest_rtt: None,
            smoothed_rtt: None,
            min_rtt: None,
            in_flight: 0,
        }
    }

    /// Packets of `bytes` in all were sent; `in_flight` bytes are unacknowledged now.
    pub fn on_sent(&mut self, now: Instant, bytes: u64, in_flight: u64) {
        let now = self.advance(now);
        self.in_flight = in_flight;
        let bin = self.bin_mut(now);
        bin.sent = bin.sent.saturating_add(bytes);
    }

    /// A packet of `bytes` sent at `sent_at` was acknowledged. Calls with the same `now`
    /// are one acknowledgement (one ack event), complete at the first input with a later
    /// time. `app_limited`: the sender had no data waiting before this acknowledgement (it
    /// was not held back by its window or pacer); reported in the estimate, it does not
    /// change the rate (see the module documentation).
    pub fn on_ack(&mut self, now: Instant, sent_at: Instant, bytes: u64, app_limited: bool) {
        let now = self.advance(now);
        let sample = now.checked_duration_since(sent_at).filter(|s| !s.is_zero());
        if let Some(s) = sample {
            self.min_rtt = Some(min_duration(self.min_rtt, s));
            let bin = self.bin_mut(now);
            bin.min_sample = Some(min_duration(bin.min_sample, s));
        }
        match &mut self.pending {
            Some(event) if event.at == now => {
                event.bytes = event.bytes.saturating_add(bytes);
                event.min_sample = match (event.min_sample, sample) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                event.packets = event.packets.saturating_add(1);
                event.app_limited &= app_limited;
            }
            _ => {
                self.pending = Some(AckEvent {
                    at: now,
                    bytes,
                    min_sample: sample,
                    packets: 1,
                    app_limited,
                });
            }
        }
    }

    /// Round-trip samples: the latest, the smoothed one and the smallest seen.
    pub fn on_rtt(&mut self, now: Instant, latest: Duration, smoothed: Duration, min: Duration) {
        self.advance(now);
        if !latest.is_zero() {
            self.latest_rtt = Some(latest);
        }
        if !smoothed.is_zero() {
            self.smoothed_rtt = Some(smoothed);
        }
        if !min.is_zero() {
            self.min_rtt = Some(min_duration(self.min_rtt, min));
        }
    }

    /// Packets of `lost_bytes` in all were declared lost.
    pub fn on_loss(&mut self, now: Instant, lost_bytes: u64) {
        let now = self.advance(now);
        let bin = self.bin_mut(now);
        bin.lost = bin.lost.saturating_add(lost_bytes);
    }

    /// The estimate in bytes per second, as of the latest settled acknowledgement.
    pub fn delivery_rate(&self) -> Option<f64> {
        self.rate
    }

    /// The smallest round trip seen.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Smoothed round trip.
    pub fn smoothed_rtt(&self) -> Option<Duration> {
        self.smoothed_rtt
    }

    /// The path as of `now`.
    pub fn estimate(&self, now: Instant) -> PathEstimate {
        let now = self.now.map_or(now, |n| n.max(now));
        if self.pending.is_some_and(|e| e.at < now) {
            // Settle the acknowledgement collected so far on a copy.
            let mut settled = self.clone();
            settled.advance(now);
            return settled.current(now);
        }
        self.current(now)
    }

    fn current(&self, now: Instant) -> PathEstimate {
        let path_sample_age = self.path_at.map(|t| now.saturating_duration_since(t));
        let min_rtt = self.min_rtt;
        let queue_delay = match (self.smoothed_rtt, min_rtt) {
            (Some(s), Some(m)) => s.saturating_sub(m),
            _ => Duration::ZERO,
        };
        let smallest_queue = |window| {
            self.window(now, window)
                .filter_map(|b| b.min_sample)
                .min()
                .map(|s| s.saturating_sub(min_rtt.unwrap_or(s)))
        };
        let standing_queue_delay = smallest_queue(STANDING_WINDOW);
        let recent_queue_delay = smallest_queue(RECENT_QUEUE_WINDOW);
        let recent_busy =
            self.window(now, RECENT_PATH_WINDOW)
                .fold(Span::default(), |mut sum, b| {
                    sum.merge(&b.busy);
                    sum
                });
        let recent_delivery_rate = recent_busy
            .rate()
            .filter(|_| recent_busy.nanos >= nanos(MIN_RECENT_BUSY))
            .map(bits);
        let queue_trough = smallest_queue(TROUGH_WINDOW);
        let (lost, acked) = self
            .window(now, LOSS_WINDOW)
            .fold((0u64, 0u64), |(l, a), b| {
                (l.saturating_add(b.lost), a.saturating_add(b.acked))
            });
        let total = lost.saturating_add(acked);
        PathEstimate {
            delivery_rate: self.rate.map(bits),
            acked_rate: self.acked_rate(now).map(bits),
            send_rate: self.send_rate(now).map(bits),
            confirmed: path_sample_age.is_some_and(|age| age <= PATH_WINDOW),
            app_limited: self.app_limited,
            path_sample_age,
            path_busy_age: path_sample_age.map(|age| age.saturating_add(self.busy_age)),
            rtt: self.smoothed_rtt,
            latest_rtt: self.latest_rtt,
            min_rtt,
            queue_delay,
            standing_queue_delay,
            queue_trough,
            recent_delivery_rate,
            recent_queue_delay,
            loss_rate: if total == 0 {
                0.0
            } else {
                lost as f64 / total as f64
            },
            in_flight: self.in_flight,
        }
    }

    /// Takes `now` as the current time (never earlier than a previous input) and settles
    /// an acknowledgement collected at an earlier time.
    fn advance(&mut self, now: Instant) -> Instant {
        let now = self.now.map_or(now, |n| n.max(now));
        self.now = Some(now);
        self.epoch.get_or_insert(now);
        if let Some(event) = self.pending.filter(|e| e.at < now) {
            self.pending = None;
            self.settle(event);
        }
        now
    }

    fn index(&self, at: Instant) -> u64 {
        let since = self
            .epoch
            .map_or(0, |e| nanos(at.saturating_duration_since(e)));
        since / BIN_NANOS
    }

    fn bin_start(&self, index: u64) -> Option<Instant> {
        self.epoch?
            .checked_add(Duration::from_nanos(index.saturating_mul(BIN_NANOS)))
    }

    /// The bin of time `at`, which is never before the newest bin.
    fn bin_mut(&mut self, at: Instant) -> &mut Bin {
        let index = self.index(at);
        if self.bins.back().is_none_or(|b| b.index < index) {
            self.bins.push_back(Bin {
                index,
                ..Bin::default()
            });
            while self
                .bins
                .front()
                .is_some_and(|b| b.index.saturating_add(KEPT_BINS) <= index)
            {
                self.bins.pop_front();
            }
        }
        // Not empty: a bin was pushed above if there was none.
        let last = self.bins.len().saturating_sub(1);
        &mut self.bins[last]
    }

    /// The bins of the `window` ending at `now`.
    fn window(&self, now: Instant, window: Duration) -> impl Iterator<Item = &Bin> {
        let count = (nanos(window) / BIN_NANOS).max(1);
        let current = self.index(now);
        self.bins
            .iter()
            .filter(move |b| b.index <= current && b.index.saturating_add(count) > current)
    }

    /// Bytes per second acknowledged in the [`ACKED_WINDOW`] ending at `now`, between
    /// its first and last ack events (the bytes of the first one arrived before).
    fn acked_rate(&self, now: Instant) -> Option<f64> {
        let mut first = None;
        let mut last = None;
        let mut bytes = 0u64;
        for b in self.window(now, ACKED_WINDOW) {
            if first.is_none() {
                first = b.first_ack;
            }
            last = b.last_ack.or(last);
            bytes = bytes.saturating_add(b.acked);
        }
        let (start, first_bytes) = first?;
        let span = last?.saturating_duration_since(start);
        (span >= MIN_ACKED_SPAN)
            .then(|| bytes.saturating_sub(first_bytes) as f64 / span.as_secs_f64())
    }

    /// Bytes per second sent over the [`ACKED_WINDOW`] ending at `now`.
    fn send_rate(&self, now: Instant) -> Option<f64> {
        let count = nanos(ACKED_WINDOW) / BIN_NANOS;
        let oldest = self.index(now).saturating_add(1).saturating_sub(count);
        let start = self.bin_start(oldest)?;
        let span = now.saturating_duration_since(start);
        let bytes = self
            .window(now, ACKED_WINDOW)
            .fold(0u64, |sum, b| sum.saturating_add(b.sent));
        (span >= MIN_ACKED_SPAN).then(|| bytes as f64 / span.as_secs_f64())
    }

    /// Accounts a complete ack event and updates the rate.
    fn settle(&mut self, event: AckEvent) {
        // A receiver acknowledges every second packet at once and a lone one after up to
        // its maximum ack delay: an interval between a prompt and a lone acknowledgement
        // may be off by that delay (see the module documentation).
        let prompt = event.packets >= PROMPT_ACK_PACKETS;
        let mut busy = None;
        if let (Some((prev, prev_prompt)), Some(sample), Some(min)) =
            (self.last_event, event.min_sample, self.min_rtt)
        {
            let interval = event.at.saturating_duration_since(prev);
            if prompt == prev_prompt
                && !interval.is_zero()
                && interval <= MAX_INTERVAL
                && sample.saturating_sub(min) >= interval.saturating_add(BUSY_GUARD)
            {
                busy = Some(interval);
            }
        }
        self.last_event = Some((event.at, prompt));
        self.app_limited = event.app_limited;
        let mut counted = Span::default();
        match (busy, prompt) {
            (Some(interval), true) => counted.add(event.bytes, interval),
            (Some(interval), false) => {
                // Between lone acknowledgements: counted once the run of them is long
                // enough for the difference of two ack delays not to matter.
                let run = self.lone_run.get_or_insert_with(Span::default);
                run.add(event.bytes, interval);
                if self.lone_run_long || run.nanos >= nanos(self.min_lone_run) {
                    counted = std::mem::take(run);
                    self.lone_run_long = true;
                }
            }
            (None, _) => {
                self.lone_run = None;
                self.lone_run_long = false;
            }
        }
        let bin = self.bin_mut(event.at);
        bin.acked = bin.acked.saturating_add(event.bytes);
        bin.first_ack.get_or_insert((event.at, event.bytes));
        bin.last_ack = Some(event.at);
        bin.busy.merge(&counted);
        self.update_rate(event.at);
    }

    fn update_rate(&mut self, now: Instant) {
        let current = self.index(now);
        let measured = [PATH_WINDOW, SPARSE_PATH_WINDOW]
            .into_iter()
            .find_map(|width| {
                let mut busy = Span::default();
                // Bins back from now, weighted by their busy time.
                let mut weighted_age = 0u128;
                for b in self.window(now, width) {
                    busy.merge(&b.busy);
                    weighted_age +=
                        u128::from(b.busy.nanos) * u128::from(current.saturating_sub(b.index));
                }
                let age_bins = weighted_age / u128::from(busy.nanos.max(1));
                busy.rate().map(|rate| (rate, age_bins))
            });
        if let Some((path, age_bins)) = measured {
            self.rate = Some(path);
            self.path_at = Some(now);
            self.busy_age = Duration::from_nanos(
                u64::try_from(age_bins)
                    .unwrap_or(u64::MAX)
                    .saturating_mul(BIN_NANOS),
            );
        }
        if let Some(acked) = self
            .acked_rate(now)
            .filter(|&a| self.rate.is_none_or(|r| a > r))
        {
            self.rate = Some(acked);
        }
    }
}

#[cfg(test)]
pub(crate) mod sim;

#[cfg(test)]
mod tests;
