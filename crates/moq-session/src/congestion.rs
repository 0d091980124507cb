//! Congestion control of media sessions: quinn's controllers with a [`PathEstimator`]
//! tapped from each connection, and [`Delay`], a delay-aware controller of our own.
//!
//! - [`CongestionControl`] names the choice (`cubic`, `newreno`, `bbr`, `delay`);
//!   [`CongestionControl::configure`] puts its [`TappedFactory`] in a
//!   `quinn::TransportConfig`.
//! - Every connection built from it gets a [`Tapped`] controller: it forwards every call to
//!   the chosen controller unchanged and feeds the same events (bytes sent, packets
//!   acknowledged with their send time and the RTT estimator, losses) to a path estimator
//!   shared behind an `Arc<Mutex<_>>`.
//! - [`estimator_of`] finds that estimator from the `quinn::Connection`: quinn hands out a
//!   copy of the controller (`congestion_state`), and copies share the estimator.
//!
//! quinn calls the controller with its connection state locked. Whoever reads the
//! estimator must therefore never call into the connection while holding its lock.

use std::any::Any;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quinn::congestion::{
    BbrConfig, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};
use quinn_proto::RttEstimator;

use crate::estimate::{DEFAULT_MAX_ACK_DELAY, PATH_WINDOW, PathEstimate, PathEstimator};
use crate::track::lock;

/// A connection's path estimator, shared with its controller.
pub type SharedEstimator = Arc<Mutex<PathEstimator>>;

/// The congestion controller of a session's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CongestionControl {
    /// CUBIC (quinn's default): fills the bottleneck queue before it backs off.
    #[default]
    Cubic,
    /// NewReno: halves its window on loss, grows one packet per round trip.
    NewReno,
    /// quinn's BBR (marked experimental by quinn): paces at the measured bandwidth.
    Bbr,
    /// [`Delay`]: keeps the bottleneck queue near a target delay (40 ms).
    Delay,
}

impl CongestionControl {
    pub const ALL: [CongestionControl; 4] = [
        CongestionControl::Cubic,
        CongestionControl::NewReno,
        CongestionControl::Bbr,
        CongestionControl::Delay,
    ];

    /// The name used in properties and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CongestionControl::Cubic => "cubic",
            CongestionControl::NewReno => "newreno",
            CongestionControl::Bbr => "bbr",
            CongestionControl::Delay => "delay",
        }
    }

    /// A factory of tapped controllers of this kind, with default settings, for a peer
    /// that holds a lone packet's acknowledgement at most `max_ack_delay`.
    pub fn factory(self, max_ack_delay: Duration) -> Arc<TappedFactory> {
        let inner: Arc<dyn ControllerFactory + Send + Sync> = match self {
            CongestionControl::Cubic => Arc::new(CubicConfig::default()),
            CongestionControl::NewReno => Arc::new(NewRenoConfig::default()),
            CongestionControl::Bbr => Arc::new(BbrConfig::default()),
            CongestionControl::Delay => {
                let mut config = DelayConfig::default();
                config.max_ack_delay(max_ack_delay);
                Arc::new(config)
            }
        };
        Arc::new(TappedFactory::new(inner, max_ack_delay))
    }

    /// Makes the connections of `transport` use this controller, tapped; the peer holds
    /// a lone packet's acknowledgement at most `max_ack_delay`.
    pub fn configure(self, transport: &mut quinn::TransportConfig, max_ack_delay: Duration) {
        transport.congestion_controller_factory(self.factory(max_ack_delay));
    }
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A congestion control name that is none of [`CongestionControl::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown congestion control {0:?} (cubic, newreno, bbr or delay)")]
pub struct UnknownCongestionControl(pub String);

impl FromStr for CongestionControl {
    type Err = UnknownCongestionControl;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CongestionControl::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownCongestionControl(s.to_owned()))
    }
}

/// Builds [`Tapped`] controllers around the controllers of another factory.
pub struct TappedFactory {
    inner: Arc<dyn ControllerFactory + Send + Sync>,
    max_ack_delay: Duration,
}

impl TappedFactory {
    /// Taps the controllers of `inner`; the peer holds a lone packet's acknowledgement at
    /// most `max_ack_delay`.
    pub fn new(
        inner: Arc<dyn ControllerFactory + Send + Sync>,
        max_ack_delay: Duration,
    ) -> TappedFactory {
        TappedFactory {
            inner,
            max_ack_delay,
        }
    }
}

impl fmt::Debug for TappedFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TappedFactory").finish_non_exhaustive()
    }
}

impl ControllerFactory for TappedFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Tapped::new(
            self.inner.clone().build(now, current_mtu),
            PathEstimator::with_max_ack_delay(self.max_ack_delay),
        ))
    }
}

/// A controller that forwards every call to `inner` unchanged and feeds a shared
/// [`PathEstimator`] on the way (see the module documentation).
pub struct Tapped {
    inner: Box<dyn Controller>,
    estimator: SharedEstimator,
    /// Bytes in flight: exact after each batch of acknowledgements, then counted up.
    in_flight: u64,
}

impl Tapped {
    /// Taps `inner`, feeding `estimator`.
    pub fn new(inner: Box<dyn Controller>, estimator: PathEstimator) -> Tapped {
        Tapped {
            inner,
            estimator: Arc::new(Mutex::new(estimator)),
            in_flight: 0,
        }
    }

    /// The estimator this controller (and every copy of it) feeds.
    pub fn estimator(&self) -> SharedEstimator {
        self.estimator.clone()
    }
}

impl fmt::Debug for Tapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tapped")
            .field("window", &self.inner.window())
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl Controller for Tapped {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.in_flight = self.in_flight.saturating_add(bytes);
        lock(&self.estimator).on_sent(now, bytes, self.in_flight);
        self.inner.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        {
            let mut estimator = lock(&self.estimator);
            estimator.on_ack(now, sent, bytes, app_limited);
            estimator.on_rtt(
                now,
                now.saturating_duration_since(sent),
                rtt.get(),
                rtt.min(),
            );
        }
        self.inner.on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.in_flight = in_flight;
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
        lock(&self.estimator).on_loss(now, lost_bytes);
        self.inner
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        self.inner.window()
    }

    fn metrics(&self) -> ControllerMetrics {
        self.inner.metrics()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Tapped {
            inner: self.inner.clone_box(),
            estimator: self.estimator.clone(),
            in_flight: self.in_flight,
        })
    }

    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The path estimator of a connection whose transport was configured with a
/// [`TappedFactory`] (e.g. by [`CongestionControl::configure`]); `None` otherwise.
pub fn estimator_of(conn: &quinn::Connection) -> Option<SharedEstimator> {
    conn.congestion_state()
        .into_any()
        .downcast::<Tapped>()
        .ok()
        .map(|tapped| tapped.estimator())
}

/// Settings of the [`Delay`] controller.
#[derive(Debug, Clone)]
pub struct DelayConfig {
    target: Duration,
    initial_window: u64,
    max_ack_delay: Duration,
}

impl DelayConfig {
    /// Queueing delay to keep at the bottleneck (default 40 ms, a frame interval at 25 fps).
    pub fn target(&mut self, target: Duration) -> &mut Self {
        self.target = target;
        self
    }

    /// Window before anything is measured (default 14 720 bytes, as quinn's controllers).
    pub fn initial_window(&mut self, bytes: u64) -> &mut Self {
        self.initial_window = bytes;
        self
    }

    /// The longest the peer holds a lone packet's acknowledgement (default QUIC's 25 ms).
    pub fn max_ack_delay(&mut self, delay: Duration) -> &mut Self {
        self.max_ack_delay = delay;
        self
    }
}

impl Default for DelayConfig {
    fn default() -> Self {
        DelayConfig {
            target: Duration::from_millis(40),
            initial_window: 14_720,
            max_ack_delay: DEFAULT_MAX_ACK_DELAY,
        }
    }
}

impl ControllerFactory for DelayConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Delay::new(self, now, current_mtu))
    }
}

/// Full packets the smallest target holds (see [`Delay`]).
const TARGET_PACKETS: u64 = 3;
/// Added to their time for the smallest target.
const TARGET_MARGIN: Duration = Duration::from_millis(10);
/// Largest window [`Delay`] ever allows.
const MAX_WINDOW: u64 = 1 << 30;

/// A delay-aware congestion controller: the window is the measured delivery rate times
/// the minimum round trip plus a target queueing delay, so a sender that fills it keeps
/// about `target` of data waiting at the bottleneck, and the bottleneck busy.
///
/// - **Target.** The configured one (40 ms), but at least the time the link takes for
///   three full packets plus 10 ms: QUIC acknowledges every second packet (a lone one
///   after its ack delay), and the estimator proves the link busy only when more than an
///   acknowledgement's worth waits (at 500 kbit/s the target is 68 ms, at 1.2 Mbit/s 40).
/// - **Following the path.** While the estimator's rate is confirmed by busy intervals
///   (see [`crate::estimate`]), `window = rate × (min_rtt + target)`. Otherwise, while the
///   window holds data back, the acknowledged rate replaces it: that is the path's rate if
///   the link is saturated, and `window / rtt` if not, so the window follows the path
///   down and grows by up to `(min_rtt + target) / rtt` per measurement. While the
///   queue is below target it also grows by a packet per round trip at least: quinn
///   sends while a full packet leaves the bytes in flight below the window, so the
///   smallest window carries one packet per round trip, too few for a busy interval,
///   and per-packet delays (serialisation, the receiver's ack delay) can keep the round
///   trip above `min_rtt + target`; following the acknowledged rate alone, such a
///   window stayed where it was on any link. While the sender is app-limited, the
///   window never falls below what the (held) estimate gives. On a constant link,
///   measured busy, the window holds still: no probing cycle, no oscillation.
/// - **Cutting at once.** When the standing queue (the smallest queueing delay over the
///   last 200 ms) exceeds 1.5 × target, the window is scaled by
///   `(min_rtt + target) / (min_rtt + queue)`: for a saturated link that is the window
///   that leaves `target` in the queue at the new rate, found from the delay alone before
///   the rate estimate has caught up. At most once per two round trips: what a cut did
///   shows only in the delay of packets sent after it, which leave once the flight has
///   drained to the new window and are acknowledged a round trip later; cut again on the
///   old queue still draining, a one-second dip took the window to two packets, and the
///   link idled after it. For the next second (the estimator's window, while it still
///   remembers the old capacity) the rate estimate does not raise the window; it grows
///   only by a packet per round trip while the queue is below target.
/// - **Starting.** Until the path was first measured, slow start: the window grows by the
///   bytes acknowledged while it holds data back and the queue is below target.
/// - **Loss-tolerant.** Losses do not shrink the window (random loss says nothing about
///   the queue); a drop-tail overflow comes with a queue above target and is cut for that.
///   Persistent congestion (everything lost for several round trips) sets the minimum
///   window until the next acknowledgements.
#[derive(Debug, Clone)]
pub struct Delay {
    config: Arc<DelayConfig>,
    mtu: u64,
    window: u64,
    estimator: PathEstimator,
    /// Bytes in flight: exact after each batch of acknowledgements, then counted up.
    in_flight: u64,
    /// Bytes acknowledged in the current batch.
    acked: u64,
    /// No cut before this.
    next_cut: Option<Instant>,
    /// After a cut, the window only shrinks until then, whatever the rate estimate says.
    hold: Option<Instant>,
    /// The path's rate was measured at least once.
    confirmed: bool,
}

/// `bytes × numerator / denominator`, saturating.
fn scale(bytes: u64, numerator: Duration, denominator: Duration) -> u64 {
    let d = denominator.as_nanos().max(1);
    let v = u128::from(bytes).saturating_mul(numerator.as_nanos()) / d;
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Bytes that `bits_per_second` carries in `d`.
fn bytes_in(bits_per_second: u64, d: Duration) -> u64 {
    let v = u128::from(bits_per_second).saturating_mul(d.as_nanos()) / 8_000_000_000;
    u64::try_from(v).unwrap_or(u64::MAX)
}

impl Delay {
    pub fn new(config: Arc<DelayConfig>, _now: Instant, current_mtu: u16) -> Delay {
        let mtu = u64::from(current_mtu);
        Delay {
            window: config.initial_window.clamp(2 * mtu, MAX_WINDOW),
            estimator: PathEstimator::with_max_ack_delay(config.max_ack_delay),
            config,
            mtu,
            in_flight: 0,
            acked: 0,
            next_cut: None,
            hold: None,
            confirmed: false,
        }
    }

    /// The queueing delay aimed at: the configured target, but at least the time the
    /// link takes for [`TARGET_PACKETS`] full packets plus [`TARGET_MARGIN`] (see
    /// [`Delay`]).
    fn target(&self, rate: Option<u64>) -> Duration {
        let packets = rate.filter(|&r| r > 0).map_or(Duration::ZERO, |r| {
            let bits = self.mtu.saturating_mul(8 * TARGET_PACKETS);
            let nanos = u128::from(bits).saturating_mul(1_000_000_000) / u128::from(r);
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        });
        self.config
            .target
            .max(packets.saturating_add(TARGET_MARGIN))
    }

    fn min_window(&self) -> u64 {
        self.mtu.saturating_mul(2)
    }

    /// The window grown by a packet per window of `acked` bytes: a packet per round trip.
    fn additive_step(&self, acked: u64) -> u64 {
        let step = u128::from(self.mtu) * u128::from(acked) / u128::from(self.window.max(1));
        self.window
            .saturating_add(u64::try_from(step).unwrap_or(u64::MAX))
    }

    /// The controller's own view of the path.
    pub fn path(&self, now: Instant) -> PathEstimate {
        self.estimator.estimate(now)
    }

    /// Packets of `bytes` were sent.
    pub fn sent(&mut self, now: Instant, bytes: u64) {
        self.in_flight = self.in_flight.saturating_add(bytes);
        self.estimator.on_sent(now, bytes, self.in_flight);
    }

    /// A packet sent at `sent` was acknowledged; RTTs as the transport estimates them.
    pub fn acked(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        smoothed: Duration,
        min: Duration,
    ) {
        self.estimator.on_ack(now, sent, bytes, app_limited);
        self.estimator
            .on_rtt(now, now.saturating_duration_since(sent), smoothed, min);
        self.acked = self.acked.saturating_add(bytes);
    }

    /// A batch of acknowledgements is complete: adjusts the window.
    pub fn acks_done(&mut self, now: Instant, in_flight: u64, app_limited: bool) {
        self.in_flight = in_flight;
        let acked = std::mem::take(&mut self.acked);
        let est = self.estimator.estimate(now);
        let Some(min_rtt) = est.min_rtt else {
            return;
        };
        let target = self.target(est.delivery_rate);
        let queue = est.standing_queue_delay.unwrap_or_default();
        let min_window = self.min_window();
        let base = min_rtt.saturating_add(target);
        if queue > target.saturating_add(target / 2) && self.next_cut.is_none_or(|t| now >= t) {
            let rtt = min_rtt.saturating_add(queue);
            let flight = self.window.min(in_flight).max(min_window);
            self.window = scale(flight, base, rtt).clamp(min_window, self.window.max(min_window));
            self.next_cut = now.checked_add(rtt.saturating_mul(2));
            self.hold = now.checked_add(PATH_WINDOW);
            return;
        }
        let measured = est.delivery_rate.map(|rate| bytes_in(rate, base));
        if self.hold.is_some_and(|until| now < until) {
            // After a cut the rate estimate still remembers the old capacity; a packet per
            // round trip finds what the path carries now.
            if queue <= target && !app_limited {
                self.window = self.additive_step(acked).min(MAX_WINDOW);
            }
            return;
        }
        self.confirmed |= est.confirmed;
        let acked_window = est.acked_rate.map(|rate| bytes_in(rate, base));
        match (measured, acked_window) {
            (Some(window), _) if est.confirmed => self.window = window,
            (_, Some(window)) if !app_limited => {
                // Not confirmed, but the window holds data back: what it got through is
                // the path's rate if the link is saturated, and window / round trip
                // (more than the rate the window was set from) if not, so the window
                // follows the path down and grows by up to (min_rtt + target) / rtt
                // per measurement, with no probing cycle of its own.
                if self.confirmed {
                    // Without a standing queue the path is not what holds the window
                    // back: it grows by a packet per round trip at least. The
                    // acknowledged rate alone would keep a small window where it is, or
                    // shrink it, whenever per-packet delays (a slow link's
                    // serialisation, the receiver's ack delay) keep the round trip
                    // above min_rtt + target, and the smallest window (one packet in
                    // flight) would stay the smallest on any link.
                    self.window = if queue <= target {
                        window.max(self.additive_step(acked))
                    } else {
                        window
                    };
                } else {
                    // Until the path was first measured: slow start while the queue is
                    // below target.
                    self.window = self.window.max(window);
                    if queue <= target {
                        self.window = self.window.saturating_add(acked);
                    }
                }
            }
            _ => {
                // App-limited: never below what the (held) estimate gives.
                if let Some(window) = measured {
                    self.window = self.window.max(window);
                }
            }
        }
        self.window = self.window.clamp(min_window, MAX_WINDOW);
    }

    /// Packets of `lost_bytes` were lost.
    pub fn lost(&mut self, now: Instant, persistent: bool, lost_bytes: u64) {
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
        self.estimator.on_loss(now, lost_bytes);
        if persistent {
            self.window = self.min_window();
            self.hold = None;
        }
    }
}

impl Controller for Delay {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.sent(now, bytes);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.acked(now, sent, bytes, app_limited, rtt.get(), rtt.min());
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.acks_done(now, in_flight, app_limited);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        _sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.lost(now, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu);
        self.window = self.window.max(self.min_window());
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window;
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.config.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests;
