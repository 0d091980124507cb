//! The encoder's target bitrate, from what the network paths to the subscribers carry and
//! from how the encoder answers.
//!
//! A fixed-rate stream above the path rate can only lose frames (the delivery modes choose
//! which); matching the media rate to the path keeps them all. The controller works on the
//! **output** the stream should have (its *goal*) and gives the encoder the target that
//! makes it produce that, from an [`EncoderModel`] it keeps of the encoder: the ratio of
//! what the encoder produces to its target, and the lag before a new target shows in its
//! output (both measured from the access units reaching the sink). Per update:
//!
//! - **Overload** is a queue that does not empty: the smallest queueing delay over a second
//!   (the path's trough, not the passing wave of a keyframe) above 80 ms plus the time the
//!   path takes for one packet (at 150 kbit/s a lone packet's serialisation alone is 64 ms
//!   above the minimum round trip measured on a faster link), or loss above 5 %; sooner,
//!   a queue above 150 ms for 200 ms; a link that fell under the stream, which the
//!   newest acknowledgements show as a queue above 60 ms while the path, busy for most of
//!   the last quarter second, delivered less than 70 % of the encoder's output there
//!   (round-trip samples come back only after the queue they measure, the busy
//!   intervals show the new rate a round trip after the fall; the cut then goes to 80 %
//!   of that recent rate less the queue's drain); or a transport holding data back that gets less
//!   than 70 % of the encoder's output through (a delay-based congestion window shrinks
//!   to a link that dropped, and the excess waits at the sender, not in the network,
//!   before a busy interval measures the new rate; the window's first round trips
//!   understate the link, so that alone allows 70 % of the output asked for, a step at
//!   each update while it lasts, down to 80 % of what gets through, or 90 % of a
//!   delivery rate measured lately). The queue is the network's plus the publisher's
//!   own, the time its data waits before the transport takes it: on a gentle decline a
//!   delay-based window keeps the network's queue short and the excess waits there,
//!   unseen by round trips. An
//!   overloaded path allows 80 % of what it carries (the acknowledged rate, the delivery
//!   rate measured on busy intervals when lower), less the bytes of its standing queue
//!   spread over a second (down to half what it carries), so the queue is gone within
//!   about a second instead of draining at a fifth of the path's rate with every frame
//!   sent meanwhile behind it; a path whose
//!   delivery rate was measured on busy time at most 2.5 s old allows 90 % of it (QUIC,
//!   the frame headers and a keyframe must fit), 8 % more up to 4.5 s, but a rate measured
//!   with no queue anywhere at most 5 % above the stream's own output cuts nothing (a
//!   window grown only as far as a small stream needed makes the stream's keyframes
//!   measure the window, and each cut to it would lower the next measurement); others set
//!   no limit. The paths' limits are combined by the policy
//!   (the slowest subscriber, or the median one).
//! - **Cut** at once to a limit below the goal, then **hold**: no further cut until the
//!   encoder's lag and half a second have passed, and the second of the drain after a
//!   cut that drains a queue (the queue keeps growing until the cut
//!   shows in the output, and a second cut then would answer the first one's delay, not the
//!   path), unless the path collapses further (a limit below 70 % of the cut's), its
//!   transport holds data back (that signal is what gets through against what the
//!   encoder makes, not a queue that keeps growing until a cut shows), or, with no
//!   standing queue, a delivery rate measured since sets a limit 10 % below the cut's (a
//!   rate measured on busy time is the path's: a smoothed estimate still falling toward a
//!   link that dropped is followed, not held). A dip that the cut answers late costs a
//!   few late frames, which skip-forward and `max-backlog` absorb; a sustained lower rate
//!   is followed.
//! - **Rise** toward a measured limit above the goal by half the gap per second (at least
//!   12 %/s), once the hold after a cut is over; no higher than the least limit measured
//!   over the last second plus twice the encoder's lag, so a path whose rate swings from
//!   second to second is used at what it keeps while a cut would take effect, not at
//!   its peaks.
//! - **Probe** a path that measures nothing (a stream too small to fill it produces no busy
//!   interval, so its delivery rate is never measured): a step up, held for the encoder's
//!   lag plus the time the path's trough takes to show a queue, kept if no queue formed.
//!   Below the level at which the path last failed (recovery after a dip), steps of 30 %
//!   up to just under that level; near it, steps of 8 % from 4 s after the failure (8 s,
//!   16 s after repeated failures there); with no failure in the last 12 s, steps of 15 %.
//!   Each probe the path carries makes the next step half again as large (up to three
//!   times). A probe fails on the first standing queue (the smallest delay over 200 ms),
//!   without waiting for the second-long trough; it is undone at once and the next one
//!   waits, longer after each failure (2 s, then 3 s). (The pacer sends no faster than the
//!   congestion window allows, so a stream far below a grown path shows nothing of it:
//!   raising the stream is the only way to find out.) So a small stream finds its way up,
//!   and a stream at its floor tries again within a few seconds. A path whose transport
//!   holds data back (not app-limited) is not probed: the stream already fills what the
//!   transport gives it, and a step up would only queue at the sender.
//! - the target is the one the encoder's output, as learned at each level, makes the goal
//!   from (its ratio bounded, so a stream whose content cannot reach the target is not
//!   pushed far above it), within the configured minimum and maximum; changes below 2 % are
//!   not worth reconfiguring the encoder.
//!
//! No clock is read: callers pass times in µs.

mod encoder;

#[cfg(test)]
pub(crate) mod sim;
#[cfg(test)]
mod tests;

pub use encoder::EncoderModel;

/// Share of a path's delivery rate the media may use: QUIC's and MoQ's headers and a
/// keyframe's burst must fit in the rest. At 85 % the stream stayed at 78 % of a stepped
/// link's mean (the benchmark's cascade) for every encoder, with no queue to show for the
/// other 15 %; at 90 %, 82–83 %, at the same latency, but about a point more of the frames
/// lost on links that swing every second or few (less room for the next trough).
const HEADROOM: f64 = 0.9;
/// A trough above this (plus a packet's serialisation) is a standing queue.
const QUEUE_HIGH_US: u64 = 80_000;
/// A standing queue (the smallest delay over 200 ms) above this (plus a packet's
/// serialisation) is overload without waiting for the second-long trough: a keyframe's
/// wave lasts that long only on a path far below the stream. At 250 ms a link that fell
/// under the stream was cut a few hundred milliseconds later, and the frames sent
/// meanwhile waited behind the queue. In the controller's simulation (x264 zerolatency,
/// 12 mobile-like links of 120 s), frames later than 400 ms: 2.2 % with this and the
/// drain below, 3.7 % with the drain at 250 ms, 5.3 % with this alone, 6.6 % with
/// neither.
const QUEUE_SEVERE_US: u64 = 150_000;
/// A queue the newest acknowledgements show above this (plus a packet's serialisation),
/// with the path busy at a recent rate far below the encoder's output, is a link that
/// fell under the stream: cut without waiting for the standing queue. Round-trip samples
/// come back only after the queue they measure, so at a fall the 200 ms of them above
/// [`QUEUE_SEVERE_US`] arrive about half a second late, and the frames encoded meanwhile
/// at the old rate wait behind the queue; the busy intervals show the new rate about a
/// round trip after the fall.
const FALL_QUEUE_US: u64 = 60_000;
/// A trough below this (plus a packet's serialisation) leaves room to probe.
const QUEUE_CLEAR_US: u64 = 30_000;
/// A delivery rate measured at most this far above the encoder's output, on a path with
/// no queue, is the stream's own rate, not the path's, and cuts nothing: a stream held at
/// [`HEADROOM`] of a link measures the link at least 11 % above itself (its keyframes fill
/// it).
const OWN_RATE: f64 = 1.05;
/// Loss above which a path is overloaded.
const LOSS_HIGH: f64 = 0.05;
/// What an overloaded path allows, as a share of what it carries.
const BACKOFF: f64 = 0.8;
/// A cut on a standing queue also drains it within this long: the queue's bytes are
/// taken off what the path allows over this time. At [`BACKOFF`] alone a queue drains at
/// a fifth of the path's rate, and every frame sent meanwhile waits behind it.
const DRAIN_US: u64 = 1_000_000;
/// A drain takes the limit no lower than this share of what the path carries.
const DRAIN_FLOOR: f64 = 0.5;
/// Within the hold after a cut, a delivery rate measured this far below the cut's level
/// (its limit, as a share) cuts again: far enough below to be the path falling, not an
/// estimate's noise (on a constant link, the estimates of any 3 s stayed within 10 % of
/// each other nearly all the time).
const REMEASURED_FALL: f64 = 0.1;
/// Within the hold after a cut, a limit below this share of the cut's level cuts again;
/// a transport holding data back that gets less than this share of the encoder's output
/// through is overloaded.
const COLLAPSE: f64 = 0.7;
/// A path getting less than this share of the minimum target through (a peer that stopped
/// reading, an outage) is not followed down by the held-back signal.
const TRICKLE: f64 = 0.5;
/// Bits of a full packet, for the time the path takes for one.
const PACKET_BITS: f64 = 1200.0 * 8.0;
/// A delivery rate measured this recently limits and lifts the goal. The age is that of
/// the busy time it was measured on: over the estimator's sparse window (3 s) a stream
/// that fills the path now and then measures it at a mean age of 1–2 s.
const FRESH_US: u64 = 2_500_000;
/// A delivery rate measured this recently still bounds the goal, a little above it: the
/// path may have grown since.
const STALE_US: u64 = 4_500_000;
/// How far above a stale measurement's limit the goal may go.
const STALE_MARGIN: f64 = 0.08;
/// Share of the gap to a measured limit closed per second.
const CATCH_UP_PER_S: f64 = 0.5;
/// Least rise per second toward a measured limit, as a share of the goal.
const RISE_PER_S: f64 = 0.12;
/// A rise goes no higher than the least limit measured over this long plus
/// [`SUSTAINED_PER_LAG`] times the encoder's lag: a path whose rate swings from second to
/// second is used at what it keeps over the time a cut takes to show, not at its peaks.
/// A longer window costs bitrate for fewer late frames; since cuts drain their queue
/// ([`DRAIN_US`]) those are fewer anyway (controller simulation, x264 zerolatency, 12
/// mobile-like links of 120 s and 12 walks of ±30 % a second: with the drain, 1 s gave
/// 58 % and 68 % of the links' means with 3.1 % and 0.4 % of the frames later than
/// 400 ms, 2 s 53 % and 65 % with 2.2 % and 0.3 %; before the drain, 2 s gave 56 % and
/// 66 % with 6.6 % and 4.3 %).
const SUSTAINED_US: u64 = 1_000_000;
const SUSTAINED_PER_LAG: u64 = 2;
/// After a cut, no further cut for the encoder's lag plus this.
const CUT_SETTLE_US: u64 = 500_000;
/// After a cut or a probe step, no rise for the encoder's lag plus this (the path's
/// trough looks back a second).
const RISE_SETTLE_US: u64 = 1_200_000;
/// Probe step below the level where the path last failed.
const RECOVER_STEP: f64 = 0.3;
/// Least probe step.
const PROBE_STEP: f64 = 0.08;
/// Probe step once the failure is forgotten.
const FREE_STEP: f64 = 0.15;
/// A failure is remembered this long; a path may have grown since.
const FAILURE_TTL_US: u64 = 12_000_000;
/// Probes go up to this share of the failure level while it is remembered.
const NEAR_FAILURE: f64 = 0.92;
/// Near the failure level, the next (small) probe waits this long after the failure,
/// twice and four times as long after the second and third failure there in a row.
const NEAR_FAILURE_WAIT_US: u64 = 4_000_000;
/// Largest multiple of the base step a run of carried probes grows it to.
const MAX_ACCELERATION: f64 = 3.0;
/// Wait before the next probe after a failed one, doubling up to the maximum.
const PROBE_BACKOFF_US: (u64, u64) = (2_000_000, 3_000_000);
/// Ratios of output to target the target compensates for.
const RATIO_COMPENSATED: (f64, f64) = (0.75, 1.5);
/// Changes smaller than this are not worth an encoder reconfiguration.
const MIN_CHANGE: f64 = 0.02;

/// How several subscribers' paths make one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RatePolicy {
    /// The slowest path: every subscriber gets every frame.
    #[default]
    Minimum,
    /// The median path: a few slow subscribers rely on skip-forward instead.
    Median,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateConfig {
    pub min_bps: u64,
    pub max_bps: u64,
    pub start_bps: u64,
    pub policy: RatePolicy,
}

/// What is known of one path, as the session's estimator reports it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathReport {
    /// Delivery rate measured while the path was busy, bit/s.
    pub delivery_bps: Option<u64>,
    /// How long ago the delivery rate was last measured on a busy path, µs.
    pub sample_age_us: Option<u64>,
    /// Queueing delay now (smoothed RTT − minimum RTT, or the standing queue), µs.
    pub queue_delay_us: u64,
    /// The smallest queueing delay over the last second, µs: a queue that never empties.
    /// `None`: not reported, `queue_delay_us` stands for it.
    pub queue_trough_us: Option<u64>,
    /// Fraction of bytes lost recently.
    pub loss_rate: f64,
    /// Bits per second the path carried recently (acknowledged): what an overloaded path
    /// is taken to deliver until its delivery rate is measured.
    pub acked_bps: Option<u64>,
    /// The transport had data waiting at its latest acknowledgement (the sender was not
    /// app-limited): a path that measures nothing then already carries all it is given.
    /// Also true before the first acknowledgement, when nothing is known to probe on.
    pub held_back: bool,
    /// How long the publisher's own data waits before the transport takes it (the
    /// smallest wait over 200 ms), µs: a queue the round trips cannot show yet, as a
    /// delay-based window keeps the network's queue short and the excess waits at the
    /// sender.
    pub send_queue_us: u64,
    /// The smallest such wait over the last second, µs.
    pub send_queue_trough_us: u64,
    /// Delivery rate of the busy intervals of the last quarter second alone, bit/s, when
    /// the path was busy for much of it.
    pub recent_delivery_bps: Option<u64>,
    /// The smallest queueing delay of the newest acknowledgements (over 100 ms), µs.
    pub recent_queue_us: Option<u64>,
}

/// Why the target changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A path carries less than the stream: cut at once.
    Cut,
    /// A path measured to carry more: a gradual rise.
    Rise,
    /// A path that measures nothing is tried a step higher.
    Probe,
    /// The goal held, but the encoder was measured to produce more or less than its
    /// target.
    Encoder,
}

impl Change {
    pub fn name(self) -> &'static str {
        match self {
            Change::Cut => "cut",
            Change::Rise => "rise",
            Change::Probe => "probe",
            Change::Encoder => "encoder",
        }
    }
}

/// What one path says now.
#[derive(Debug, Clone, Copy)]
struct View {
    /// The output rate the path allows, bit/s (infinite: no limit known).
    limit: f64,
    overloaded: bool,
    /// Overloaded by the transport holding data back alone, with no queue in the network.
    backed_up: bool,
    /// The standing queue (the smallest delay over 200 ms) is high: a probe step too
    /// large shows here first.
    queueing: bool,
    /// Queue short enough to probe above.
    clear: bool,
    /// The delivery rate was measured lately: the limit is a measurement.
    fresh: bool,
    /// With no queue, the delivery rate measured no more than the stream's own (see
    /// [`OWN_RATE`]): not a reason to cut.
    own_rate: bool,
    /// The transport holds data back.
    held_back: bool,
    /// The limit drains a standing queue (see [`DRAIN_US`]).
    drains: bool,
}

/// A probe step in progress.
#[derive(Debug, Clone, Copy)]
struct Probe {
    /// The goal before the step.
    from: f64,
    level: f64,
    /// The step holds until then.
    until_us: u64,
}

#[derive(Debug, Clone)]
pub struct RateController {
    config: RateConfig,
    /// The output rate aimed at, bit/s.
    goal: f64,
    /// The encoder's target, bit/s.
    target: f64,
    /// The target last handed to the encoder.
    reported_bps: u64,
    model: EncoderModel,
    last_update_us: Option<u64>,
    last_cut_us: Option<u64>,
    /// The last cut drains a standing queue: it is held for the drain too.
    cut_drains: bool,
    /// Whether cuts drain a standing queue ([`DRAIN_US`]); off only to measure what the
    /// drain does.
    pub(crate) drain: bool,
    /// Whether a link that fell under the stream is cut on its recent rate
    /// ([`FALL_QUEUE_US`]); off only to measure what that does.
    pub(crate) detect_falls: bool,
    /// The goal the last cut set.
    cut_level: f64,
    /// No rise before this.
    rise_after_us: u64,
    probe: Option<Probe>,
    next_probe_us: u64,
    probe_backoff_us: u64,
    /// The goal at which the path last failed, and when.
    failure: Option<(f64, u64)>,
    /// Probes in a row the path carried since it last queued.
    probes_carried: u32,
    /// Probes that failed in a row near the same level: the wait before the next one
    /// there doubles with each.
    failures_near: u32,
    /// The measured limits of the last few seconds (see [`SUSTAINED_US`]): (time µs,
    /// bit/s).
    measured: std::collections::VecDeque<(u64, f64)>,
}

impl RateController {
    pub fn new(config: RateConfig) -> RateController {
        let (min, max) = (config.min_bps.min(config.max_bps), config.max_bps);
        let start = config.start_bps.clamp(min, max);
        RateController {
            config: RateConfig {
                min_bps: min,
                ..config
            },
            goal: start as f64,
            target: start as f64,
            reported_bps: start,
            model: EncoderModel::new(start as f64),
            last_update_us: None,
            last_cut_us: None,
            cut_drains: false,
            drain: true,
            detect_falls: true,
            cut_level: start as f64,
            rise_after_us: 0,
            probe: None,
            next_probe_us: 0,
            probe_backoff_us: PROBE_BACKOFF_US.0,
            failure: None,
            probes_carried: 0,
            failures_near: 0,
            measured: std::collections::VecDeque::new(),
        }
    }

    /// How much larger than its base a probe step is after probes the path carried in a
    /// row: half again per probe, at most [`MAX_ACCELERATION`] times.
    fn acceleration(&self) -> f64 {
        1.5f64
            .powi(self.probes_carried.min(8) as i32)
            .min(MAX_ACCELERATION)
    }

    /// The target the encoder was last given, bit/s.
    pub fn target_bps(&self) -> u64 {
        self.reported_bps
    }

    /// The output rate aimed at, bit/s.
    pub fn goal_bps(&self) -> u64 {
        self.goal as u64
    }

    /// What the controller knows of the encoder.
    pub fn encoder(&self) -> &EncoderModel {
        &self.model
    }

    /// An access unit of `bytes` from the encoder reached the sink at `now_us`.
    pub fn on_frame(&mut self, now_us: u64, bytes: u64, key: bool) {
        self.model.on_frame(now_us, bytes, key);
    }

    /// What the encoder makes of `target_bps`, as far as it is compensated for.
    fn output_for(&self, target_bps: f64) -> f64 {
        let ratio = self.model.ratio_at(target_bps).unwrap_or(1.0);
        target_bps * ratio.clamp(RATIO_COMPENSATED.0, RATIO_COMPENSATED.1)
    }

    /// The target within `[min, max]` that makes the encoder produce `goal`, which lies
    /// between what they make: the output grows with the target, so halving the interval
    /// finds it.
    fn target_for(&self, goal: f64, (min, max): (f64, f64), (at_min, at_max): (f64, f64)) -> f64 {
        if at_min >= goal {
            return min;
        }
        if at_max <= goal {
            return max;
        }
        let (mut low, mut high) = (min, max);
        for _ in 0..32 {
            let mid = (low + high) / 2.0;
            if self.output_for(mid) < goal {
                low = mid;
            } else {
                high = mid;
            }
        }
        // The ratio there, applied to the goal: exactly the goal over a ratio that does not
        // depend on the level.
        let target = (low + high) / 2.0;
        (goal * target / self.output_for(target)).clamp(min, max)
    }

    /// What one path says, if anything, while the encoder makes `produced` bit/s.
    fn view(&self, path: &PathReport, produced: Option<f64>) -> Option<View> {
        let rate = match (path.delivery_bps, path.acked_bps) {
            (Some(d), Some(a)) => Some(d.max(a)),
            (d, a) => d.or(a),
        };
        // The time the path takes for one packet: each packet's own serialisation is
        // measured as queueing against a minimum round trip taken on a faster link.
        let packet_us = (PACKET_BITS * 1e6 / rate.unwrap_or(1_000_000).max(1) as f64) as u64;
        // The publisher's own queue is queue too, on a path that gets data through (a peer
        // that stopped reading, or an outage, lets data wait for no reason of rate).
        let least = TRICKLE * self.config.min_bps as f64;
        let (sender, sender_trough) = if path.acked_bps.is_some_and(|a| a as f64 >= least) {
            (path.send_queue_us, path.send_queue_trough_us)
        } else {
            (0, 0)
        };
        let queue_now = path.queue_delay_us.saturating_add(sender);
        let queue = path
            .queue_trough_us
            .unwrap_or(path.queue_delay_us)
            .saturating_add(sender_trough);
        // Data waiting while the path gets far less through than the encoder makes: the
        // congestion window already shrank to a link that dropped, and the excess queues
        // at the sender, before a busy interval measures the new rate (a delay-based
        // window keeps the network queue short, so no queue shows there). A path that
        // gets next to nothing through (a peer that stopped reading, an outage) is not one
        // to follow down.
        let backed_up = path.held_back
            && path
                .acked_bps
                .zip(produced)
                .is_some_and(|(acked, produced)| {
                    let acked = acked as f64;
                    acked >= least && acked < COLLAPSE * produced
                });
        let queued = queue > QUEUE_HIGH_US.saturating_add(packet_us)
            || queue_now > QUEUE_SEVERE_US.saturating_add(packet_us)
            || path.loss_rate > LOSS_HIGH;
        // A link that fell under the stream: busy at a recent rate far below what the
        // encoder makes, with a queue growing behind it.
        let recent_queue_us = path.recent_queue_us.unwrap_or(0);
        let fallen = path
            .recent_delivery_bps
            .zip(produced)
            .filter(|_| {
                self.detect_falls && recent_queue_us > FALL_QUEUE_US.saturating_add(packet_us)
            })
            .filter(|&(recent, produced)| (recent as f64) < COLLAPSE * produced.min(self.goal))
            .map(|(recent, _)| recent as f64);
        let overloaded = queued || backed_up || fallen.is_some();
        let queueing = overloaded || queue_now > QUEUE_HIGH_US.saturating_add(packet_us);
        let clear =
            queue <= QUEUE_CLEAR_US.saturating_add(packet_us) && path.loss_rate <= LOSS_HIGH / 2.0;
        let age = path.sample_age_us.filter(|_| path.delivery_bps.is_some());
        // A path with no queue anywhere that measured no more than the stream gives it has
        // not shown a rate below the stream's: a window grown only as far as a small
        // stream needed makes busy intervals of the stream's own keyframes, which measure
        // the window. A cut to such a figure lowers the next measurement with it.
        let own_rate = !path.held_back
            && clear
            && queue_now <= QUEUE_CLEAR_US.saturating_add(packet_us)
            && path
                .delivery_bps
                .zip(produced)
                .is_some_and(|(d, produced)| d as f64 <= OWN_RATE * produced);
        let fresh = age.is_some_and(|age| age <= STALE_US);
        let mut drains = false;
        let limit = if overloaded {
            // Below what the path carries now, so the queue drains; not a share of the
            // goal, so a queue that takes a while to drain does not cut it again and
            // again.
            let carried = match (path.delivery_bps, path.acked_bps) {
                (Some(d), Some(a)) => d.min(a),
                (d, a) => d.or(a)?,
            };
            let carried = fallen.map_or(carried as f64, |recent| recent.min(carried as f64));
            let limit = BACKOFF * carried;
            match produced {
                // What a window that is shrinking gets through in its first round trips
                // understates the link (seen at a third of it): without a queue to
                // confirm it, a step of 30 % at a time, or down to a delivery rate
                // measured lately.
                Some(produced) if !queued && fallen.is_none() => {
                    let measured = match path.delivery_bps {
                        Some(d) if fresh => HEADROOM * d as f64,
                        _ => f64::INFINITY,
                    };
                    // A cut takes the encoder's lag to show in what it makes: the step
                    // is from the output asked for meanwhile.
                    limit.max((COLLAPSE * produced.min(self.goal)).min(measured))
                }
                // The standing queue's bytes (a packet's own serialisation aside), at the
                // rate the path serves them, off what it allows until they are gone.
                _ if self.drain => {
                    // At a fall the newest acknowledgements show more of the queue than
                    // the standing figure, which still reaches back before it.
                    let newest_us = if fallen.is_some() { recent_queue_us } else { 0 };
                    let standing_us = queue_now.max(newest_us).saturating_sub(packet_us);
                    let backlog = carried * standing_us as f64 / 1e6;
                    drains = backlog > 0.0;
                    (limit - backlog * 1e6 / DRAIN_US as f64).max(DRAIN_FLOOR * carried)
                }
                _ => limit,
            }
        } else if fresh {
            let margin = match age {
                Some(age) if age > FRESH_US => 1.0 + STALE_MARGIN,
                _ => 1.0,
            };
            HEADROOM * margin * path.delivery_bps? as f64
        } else {
            f64::INFINITY
        };
        Some(View {
            limit,
            overloaded,
            backed_up: backed_up && !queued && fallen.is_none(),
            queueing,
            clear,
            fresh,
            own_rate,
            held_back: path.held_back,
            drains,
        })
    }

    /// Updates the target from the paths at `now_us`; returns it when it changed enough to
    /// reconfigure the encoder.
    pub fn update(&mut self, now_us: u64, paths: &[PathReport]) -> Option<(u64, Change)> {
        let elapsed_us = match self.last_update_us {
            Some(t) => now_us.saturating_sub(t),
            None => {
                // Nothing is known yet: the first probe waits as after a failed one.
                self.next_probe_us = now_us.saturating_add(PROBE_BACKOFF_US.0);
                0
            }
        };
        self.last_update_us = Some(now_us);
        self.model.tick(now_us);
        let produced = self.model.output_bps(now_us);
        let mut views: Vec<View> = paths
            .iter()
            .filter_map(|p| self.view(p, produced))
            .collect();
        if views.is_empty() {
            return None;
        }
        views.sort_by(|a, b| a.limit.total_cmp(&b.limit));
        let path = match self.config.policy {
            RatePolicy::Minimum => views[0],
            RatePolicy::Median => views[(views.len() - 1) / 2],
        };
        if self
            .failure
            .is_some_and(|(_, at)| now_us.saturating_sub(at) > FAILURE_TTL_US)
        {
            self.failure = None;
        }
        // A probe fails on the first standing queue; otherwise only a queue that does not
        // empty within a second counts.
        let failing_probe = self.probe.is_some() && path.queueing;
        let change = if path.overloaded {
            self.overloaded(now_us, path)
        } else if failing_probe {
            // Undone to where it came from (the limit of an overloaded path is what it
            // carries; this one's is not known yet).
            self.overloaded(
                now_us,
                View {
                    limit: f64::INFINITY,
                    ..path
                },
            )
        } else {
            self.not_overloaded(now_us, elapsed_us, path)
        };
        self.apply(now_us, change.unwrap_or(Change::Encoder))
    }

    fn overloaded(&mut self, now_us: u64, path: View) -> Option<Change> {
        self.probes_carried = 0;
        if let Some(probe) = self.probe.take() {
            // The step was too much: back to where it came from (or lower, if the path
            // carries less), and wait longer before the next one; longer still near a
            // level that failed before.
            // The path carried `from` and not the step's level: its limit lies between,
            // so the failure is put just above `from` (at the step's level, recovery
            // probes would aim above what the path carries).
            let failed = (probe.from * (1.0 + PROBE_STEP)).min(probe.level);
            let again = self
                .failure
                .is_some_and(|(before, _)| failed <= before * (1.0 + 2.0 * PROBE_STEP));
            self.failures_near = if again {
                self.failures_near.saturating_add(1)
            } else {
                0
            };
            self.failure = Some((failed, now_us));
            self.next_probe_us = now_us.saturating_add(self.probe_backoff_us);
            self.probe_backoff_us = (self.probe_backoff_us * 3 / 2).min(PROBE_BACKOFF_US.1);
            self.cut_to(now_us, path.limit.min(probe.from));
            return Some(Change::Cut);
        }
        let holding = self.holding(now_us);
        let collapsing = path.limit < COLLAPSE * self.cut_level;
        // A transport holding data back is not held for: its signal is what gets through
        // against what the encoder makes, not a queue that grows until a cut shows, so
        // it cuts a step at each update while it lasts, down to what the path carries.
        let held = holding && !collapsing && !path.backed_up;
        if path.limit >= self.goal * (1.0 - MIN_CHANGE) || held {
            return None;
        }
        if !holding {
            // The path failed at the level held: probes approach it carefully.
            self.failure = Some((self.goal, now_us));
        }
        self.next_probe_us = self.next_probe_us.max(now_us);
        self.cut_to(now_us, path.limit);
        self.cut_drains = path.drains;
        Some(Change::Cut)
    }

    /// Whether a cut is still held at `now_us`: until the encoder could have answered it,
    /// and the path shown it; a cut that drains a queue, until the queue could be gone.
    fn holding(&self, now_us: u64) -> bool {
        let drain_us = if self.cut_drains { DRAIN_US } else { 0 };
        self.last_cut_us.is_some_and(|t| {
            now_us
                < t.saturating_add(self.model.lag_us())
                    .saturating_add(CUT_SETTLE_US)
                    .saturating_add(drain_us)
        })
    }

    fn cut_to(&mut self, now_us: u64, limit: f64) {
        self.goal = limit.max(self.config.min_bps as f64);
        self.cut_level = self.goal;
        self.last_cut_us = Some(now_us);
        self.cut_drains = false;
        self.rise_after_us = now_us
            .saturating_add(self.model.lag_us())
            .saturating_add(RISE_SETTLE_US);
    }

    fn not_overloaded(&mut self, now_us: u64, elapsed_us: u64, path: View) -> Option<Change> {
        let lag = self.model.lag_us();
        if let Some(probe) = self.probe {
            if now_us < probe.until_us {
                return None;
            }
            self.probe = None;
            if path.clear {
                // The path carried the step: the next may follow at once, larger.
                self.probe_backoff_us = PROBE_BACKOFF_US.0;
                self.next_probe_us = now_us;
                self.probes_carried = self.probes_carried.saturating_add(1);
            }
        }
        if path.fresh && path.limit.is_finite() {
            let holding = self.holding(now_us);
            if path.limit < self.goal * (1.0 - MIN_CHANGE) {
                // The stream's own rate, not the path's (see [`OWN_RATE`]).
                if path.own_rate {
                    return None;
                }
                // Measured lately to carry less than the stream, though no queue stands
                // yet. Within the hold after a cut, only a measurement well below the
                // cut's level: a rate measured on busy time is the path's, not an echo of
                // the cut's delay, and one still falling (a smoothed estimate following a
                // link that dropped) is followed down without waiting for the encoder.
                if holding {
                    if path.limit >= self.cut_level * (1.0 - REMEASURED_FALL) {
                        return None;
                    }
                } else {
                    self.failure = Some((self.goal, now_us));
                }
                self.cut_to(now_us, path.limit);
                return Some(Change::Cut);
            }
            let sustained_us = SUSTAINED_US.saturating_add(SUSTAINED_PER_LAG.saturating_mul(lag));
            while self
                .measured
                .front()
                .is_some_and(|m| m.0.saturating_add(sustained_us) < now_us)
            {
                self.measured.pop_front();
            }
            self.measured.push_back((now_us, path.limit));
            let sustained = self.measured.iter().map(|m| m.1).fold(path.limit, f64::min);
            if now_us < self.rise_after_us || sustained <= self.goal * (1.0 + MIN_CHANGE) {
                return None;
            }
            let gap = sustained - self.goal;
            let step = (self.goal * RISE_PER_S).max(gap * CATCH_UP_PER_S) * elapsed_us as f64 / 1e6;
            self.goal = sustained.min(self.goal + step);
            return Some(Change::Rise);
        }
        // A transport that holds data back is what limits the stream: a step up would
        // only queue more at the sender (a congestion window stuck small measures
        // nothing, and the stream fills it).
        if !path.clear
            || path.held_back
            || now_us < self.rise_after_us
            || now_us < self.next_probe_us
        {
            return None;
        }
        if self.target >= self.config.max_bps as f64 {
            return None;
        }
        let level = match self.failure {
            Some((failed, _)) if self.goal < NEAR_FAILURE * failed * (1.0 - PROBE_STEP) => {
                (self.goal * (1.0 + RECOVER_STEP)).min(NEAR_FAILURE * failed)
            }
            // Near the level that failed lately: a small step, not before a while.
            Some((_, at))
                if now_us
                    < at.saturating_add(NEAR_FAILURE_WAIT_US << self.failures_near.min(2)) =>
            {
                return None;
            }
            Some(_) => self.goal * (1.0 + PROBE_STEP * self.acceleration()),
            None => self.goal * (1.0 + FREE_STEP * self.acceleration()),
        };
        self.probe = Some(Probe {
            from: self.goal,
            level,
            until_us: now_us.saturating_add(lag).saturating_add(RISE_SETTLE_US),
        });
        self.goal = level;
        self.rise_after_us = now_us.saturating_add(lag).saturating_add(RISE_SETTLE_US);
        Some(Change::Probe)
    }

    /// Sets the target for the goal; returns it when it changed enough.
    fn apply(&mut self, now_us: u64, change: Change) -> Option<(u64, Change)> {
        let (min, max) = (self.config.min_bps as f64, self.config.max_bps as f64);
        let (at_min, at_max) = (self.output_for(min), self.output_for(max));
        self.goal = self.goal.clamp(at_min, at_max);
        self.target = self.target_for(self.goal, (min, max), (at_min, at_max));
        let reported = self.reported_bps as f64;
        let at_bound = self.target == min || self.target == max;
        let small = (self.target - reported).abs() < MIN_CHANGE * reported;
        if small && !(at_bound && self.target != reported) {
            return None;
        }
        self.reported_bps = self.target as u64;
        self.model.on_target(now_us, self.target);
        Some((self.reported_bps, change))
    }
}
