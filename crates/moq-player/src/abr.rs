//! Which rendition of a video a receiver plays: receiver-driven adaptive bitrate.
//!
//! A broadcast may carry the same video at several bitrates, each its own track; a relay
//! forwards only what a viewer subscribes, so every viewer picks what its own path
//! carries. A receiver sees its path only through what arrives:
//!
//! - **queue delay**: how much later than the least delay of the last seconds an object
//!   arrived (delay = arrival − availability; the two clocks' offset cancels out). The
//!   least of it over half a second ignores the short queue a keyframe builds;
//! - **delivery rate**: bytes received over the last two seconds. While a queue stands,
//!   that is what the path carries;
//! - **capacity**: a large object (a keyframe) that found the path idle arrives later than
//!   the object of least delay by about the difference of their sizes over the path's
//!   rate, so it measures the path above what the current rendition uses, without
//!   sending more. (Both took their own size's time on the path: counting the whole large
//!   object would overrate a slow path when keyframes are only a few times a delta frame.)
//!   Anything else only lengthens the transfer measured, so the capacity is the upper
//!   quartile of the samples, not their median, with one exception: while a backlog
//!   drains (a sender or relay catching up), each object comes earlier than the one
//!   before, and the least delay is the latest object's, so a large object then measured
//!   against it reads the path fast. Samples are taken only on a settled path: no object
//!   of the last second came more than 5 ms earlier than the least delay before it.
//!
//! The rules:
//!
//! - **down at once** when the queue delay stands above [`DOWN_QUEUE_US`], or the player
//!   skipped media: to the highest rendition within [`HEADROOM`] of the delivery rate, at
//!   least one step down; not again until [`DRAIN_US`] later (the queue the old rendition
//!   built takes time to empty);
//! - **up one step, cautiously**: when for [`UP_SUSTAIN_US`] the queue stayed below
//!   [`CALM_QUEUE_US`], nothing was skipped, and the measured capacity stayed at least
//!   [`UP_MARGIN`] × the next rendition's bitrate, or for [`UP_PROBE_SUSTAIN_US`] at
//!   least [`UP_PROBE_MARGIN`] × (small objects under-read a fast path); never within
//!   [`UP_HOLD_US`] of a down-switch. For [`SETTLE_US`] after going up, and again after the switch has cut
//!   over ([`Abr::settle`]), a standing queue is not taken for congestion (a new
//!   subscription may start with a burst, and the two renditions flow together until the
//!   cut); a skip still is;
//! - never above the configured maximum bitrate (the lowest rendition is always allowed).
//!
//! No clock is read: callers pass times in µs.

use std::collections::VecDeque;

/// Queue delay (least over [`QUEUE_WINDOW_US`]) above which the rendition is too much
/// for the path.
pub const DOWN_QUEUE_US: i64 = 150_000;
/// Queue delay below which the path is calm enough to go up.
pub const CALM_QUEUE_US: i64 = 50_000;
/// Share of the delivery rate a rendition chosen on the way down may use: the rest is
/// for audio, headers, and draining the queue.
pub const HEADROOM: f64 = 0.8;
/// Capacity needed, as a multiple of the next rendition's bitrate, to go up to it.
pub const UP_MARGIN: f64 = 1.3;
/// How long the conditions to go up must hold.
pub const UP_SUSTAIN_US: u64 = 4_000_000;
/// A smaller margin that suffices when the path stays calm for longer: on a low
/// rendition the objects are small, and their transfers under-read the capacity (per-object
/// overhead and the sender's pacing weigh more), by a quarter on a 1.2 Mbit/s link.
pub const UP_PROBE_MARGIN: f64 = 1.1;
/// How long the calm path with the smaller margin must hold.
pub const UP_PROBE_SUSTAIN_US: u64 = 8_000_000;
/// No up-switch this long after a down-switch.
pub const UP_HOLD_US: u64 = 10_000_000;
/// No second down-switch this long after one, unless media is skipped again.
pub const DRAIN_US: u64 = 2_000_000;
/// How long after going up a standing queue is forgiven: the new subscription's first
/// burst, or the two renditions flowing together, builds it.
pub const SETTLE_US: u64 = 3_000_000;
/// The window of the queue delay's least value.
const QUEUE_WINDOW_US: u64 = 500_000;
/// The window of the least delay, the path's delay without a queue.
const BASE_WINDOW_US: u64 = 10_000_000;
/// The window of the delivery rate.
const RATE_WINDOW_US: u64 = 2_000_000;
/// The window of the capacity samples.
const CAPACITY_WINDOW_US: u64 = 10_000_000;
/// Objects larger than the one of least delay by less than this take too little extra
/// time on the path to measure it.
const CAPACITY_MIN_BYTES: u64 = 500;
/// Transfer times below this are taken as this: the sample then says "at least".
const MIN_TRANSFER_US: i64 = 1_000;
/// The recent objects whose delay tells whether the path is settled (see
/// [`Abr::settled`]).
const SETTLED_WINDOW_US: u64 = 1_000_000;
/// How much earlier than the least delay before them recent objects may come on a
/// settled path: more than a delta frame's jitter on a loaded machine (a few ms), less
/// than a draining backlog's step (a frame interval less the frame's transfer, tens of
/// ms).
const FALLING_US: i64 = 5_000;

/// Why the rendition changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchReason {
    /// A queue stands on the path.
    Congested,
    /// The player skipped media.
    Skipped,
    /// The path showed room for the next rendition.
    Headroom,
}

impl SwitchReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchReason::Congested => "congested",
            SwitchReason::Skipped => "skipped",
            SwitchReason::Headroom => "headroom",
        }
    }
}

/// A decision to play another rendition: indices into the bitrates given to [`Abr::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    pub from: usize,
    pub to: usize,
    pub reason: SwitchReason,
}

/// The receiver's view of its path, and the rendition it plays.
#[derive(Debug, Clone)]
pub struct Abr {
    /// Bitrates of the renditions, bit/s, in the caller's order.
    bitrates: Vec<u64>,
    /// Rendition indices from the lowest bitrate to the highest allowed.
    ladder: Vec<usize>,
    /// Position of the current rendition on the ladder.
    step: usize,
    /// (arrival, delay) of recent objects, for the base and the queue delay.
    /// (arrival, (delay, bytes)) of recent objects, for the base and the queue delay.
    delays: VecDeque<(u64, (i64, u64))>,
    /// (arrival, bytes) of recent objects, for the delivery rate.
    received: VecDeque<(u64, u64)>,
    /// (arrival, bit/s) capacity samples.
    capacity: VecDeque<(u64, u64)>,
    /// Since when the conditions to go up have held: with [`UP_MARGIN`], and with
    /// [`UP_PROBE_MARGIN`].
    calm_since: Option<u64>,
    probe_since: Option<u64>,
    last_down_at: Option<u64>,
    last_up_at: Option<u64>,
    skipped_at: Option<u64>,
    started_at: u64,
}

impl Abr {
    /// Renditions of `bitrates` (bit/s, any order); those above `max_bps` are never chosen,
    /// except the lowest. Starts on the lowest: a viewer climbs as its path shows room.
    pub fn new(bitrates: &[u64], max_bps: Option<u64>, now_us: u64) -> Abr {
        let mut ladder: Vec<usize> = (0..bitrates.len()).collect();
        ladder.sort_by_key(|&i| bitrates[i]);
        if let Some(max) = max_bps {
            let allowed = ladder.iter().filter(|&&i| bitrates[i] <= max).count();
            ladder.truncate(allowed.max(1));
        }
        Abr {
            bitrates: bitrates.to_vec(),
            ladder,
            step: 0,
            delays: VecDeque::new(),
            received: VecDeque::new(),
            capacity: VecDeque::new(),
            calm_since: None,
            probe_since: None,
            last_down_at: None,
            last_up_at: None,
            skipped_at: None,
            started_at: now_us,
        }
    }

    /// The rendition to play now (an index into the bitrates given to [`Abr::new`]).
    pub fn current(&self) -> usize {
        self.ladder.get(self.step).copied().unwrap_or(0)
    }

    /// The caller plays rendition `index` now (chosen by hand, or kept from before): the
    /// nearest the ladder allows, and going up starts over from there.
    pub fn set_current(&mut self, index: usize) {
        let bitrate = self.bitrates.get(index).copied().unwrap_or(0);
        self.step = self
            .ladder
            .iter()
            .rposition(|&i| self.bitrates[i] <= bitrate)
            .unwrap_or(0);
        self.calm_since = None;
        self.probe_since = None;
    }

    /// An object of any subscribed track arrived: `bytes` long, `delay_us` after it was
    /// available at the sender (None: the format does not say).
    pub fn on_object(&mut self, now_us: u64, bytes: u64, delay_us: Option<i64>) {
        self.received.push_back((now_us, bytes));
        expire(&mut self.received, now_us, RATE_WINDOW_US);
        let Some(delay) = delay_us else { return };
        let settled = self.settled(now_us);
        self.delays.push_back((now_us, (delay, bytes)));
        expire(&mut self.delays, now_us, BASE_WINDOW_US);
        if settled
            && let Some((base, base_bytes)) = self.base()
            && bytes >= base_bytes.saturating_add(CAPACITY_MIN_BYTES)
        {
            let transfer = delay.saturating_sub(base).max(MIN_TRANSFER_US) as u64;
            let bps = (bytes - base_bytes).saturating_mul(8_000_000) / transfer;
            self.capacity.push_back((now_us, bps));
        }
        expire(&mut self.capacity, now_us, CAPACITY_WINDOW_US);
    }

    /// The switch up has cut over at `now_us`: the queue it built is forgiven for
    /// [`SETTLE_US`] from now.
    pub fn settle(&mut self, now_us: u64) {
        self.last_up_at = Some(now_us);
    }

    /// The player skipped media (a late group or frames dropped to catch up).
    pub fn on_skip(&mut self, now_us: u64) {
        self.skipped_at = Some(now_us);
    }

    /// The least delay lately (the path's delay with no queue), and the size of the
    /// object that had it.
    fn base(&self) -> Option<(i64, u64)> {
        self.delays.iter().map(|(_, d)| *d).min()
    }

    /// Whether the path's delay has settled at `now_us`: none of the objects of the last
    /// [`SETTLED_WINDOW_US`] came more than [`FALLING_US`] earlier than the least delay of
    /// those before them. Not before there are objects that old to compare with.
    fn settled(&self, now_us: u64) -> bool {
        let since = now_us.saturating_sub(SETTLED_WINDOW_US);
        // The least delay before the window and in it, in one pass.
        let (mut before, mut recent) = (None, None);
        for (at, (delay, _)) in &self.delays {
            let least = if *at >= since {
                &mut recent
            } else {
                &mut before
            };
            *least = Some(least.map_or(*delay, |d: i64| d.min(*delay)));
        }
        match (before, recent) {
            (Some(before), Some(recent)) => recent >= before.saturating_sub(FALLING_US),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// How long objects queued lately, beyond the path's delay: the least over the queue
    /// window, so one large object does not count.
    pub fn queue_delay_us(&self, now_us: u64) -> Option<i64> {
        let (base, _) = self.base()?;
        self.delays
            .iter()
            .filter(|(at, _)| at.saturating_add(QUEUE_WINDOW_US) >= now_us)
            .map(|(_, (d, _))| d - base)
            .min()
    }

    /// Bits per second received over the rate window.
    pub fn delivery_bps(&self, now_us: u64) -> u64 {
        let span = now_us
            .saturating_sub(self.started_at)
            .clamp(1, RATE_WINDOW_US);
        let bytes: u64 = self
            .received
            .iter()
            .filter(|(at, _)| at.saturating_add(RATE_WINDOW_US) >= now_us)
            .map(|(_, b)| b)
            .sum();
        bytes.saturating_mul(8_000_000) / span
    }

    /// The path's capacity as recent large objects measured it: the upper quartile of
    /// their samples. On a settled path (see [`Abr::settled`]) a sample reads the path
    /// low, not high: a queue, the sender's pacing, an encoder slower on a large frame and
    /// a busy receiver stamping its last piece late all only lengthen the transfer
    /// measured, while the object of least delay it is measured against is the one that
    /// met the least of them. On a low rendition, whose keyframes are a kilobyte above
    /// its delta frames (a few ms on a fast path), that noise is most of the transfer:
    /// the median of such samples read a 1.2 Mbit/s path as 0.66 on a busy machine. Not
    /// the largest: an upper quartile still needs a quarter of the samples to read that
    /// high.
    pub fn capacity_bps(&self) -> Option<u64> {
        let mut samples: Vec<u64> = self.capacity.iter().map(|(_, bps)| *bps).collect();
        samples.sort_unstable();
        samples.get(samples.len() * 3 / 4).copied()
    }

    /// Whether to play another rendition at `now_us`; the switch is taken as done.
    pub fn poll(&mut self, now_us: u64) -> Option<Switch> {
        let queue = self.queue_delay_us(now_us);
        let skipped = self
            .skipped_at
            .is_some_and(|t| self.last_down_at.is_none_or(|d| t > d));
        let draining = self
            .last_down_at
            .is_some_and(|d| now_us.saturating_sub(d) < DRAIN_US)
            || self
                .last_up_at
                .is_some_and(|u| now_us.saturating_sub(u) < SETTLE_US);
        let congested = queue.is_some_and(|q| q > DOWN_QUEUE_US) && !draining;
        if self.step > 0 && (skipped || congested) {
            let reason = if skipped {
                SwitchReason::Skipped
            } else {
                SwitchReason::Congested
            };
            let budget = self.delivery_bps(now_us) as f64 * HEADROOM;
            let fits = self.ladder[..self.step]
                .iter()
                .rposition(|&i| self.bitrates[i] as f64 <= budget)
                .unwrap_or(0);
            return Some(self.go(fits, now_us, reason));
        }
        if skipped {
            // Already on the lowest: nothing to go down to, but it is not calm either.
            self.last_down_at = Some(now_us);
        }
        let next = self.ladder.get(self.step + 1).map(|&i| self.bitrates[i]);
        let quiet = queue.is_some_and(|q| q < CALM_QUEUE_US)
            && self
                .last_down_at
                .is_none_or(|d| now_us.saturating_sub(d) >= UP_HOLD_US);
        let capacity = self.capacity_bps();
        let room = |margin: f64| {
            quiet
                && next
                    .zip(capacity)
                    .is_some_and(|(n, c)| c as f64 >= n as f64 * margin)
        };
        let held = |since: &mut Option<u64>, holds: bool, sustain: u64| {
            if !holds {
                *since = None;
                return false;
            }
            now_us.saturating_sub(*since.get_or_insert(now_us)) >= sustain
        };
        let up = held(&mut self.calm_since, room(UP_MARGIN), UP_SUSTAIN_US);
        let probe = held(
            &mut self.probe_since,
            room(UP_PROBE_MARGIN),
            UP_PROBE_SUSTAIN_US,
        );
        (up || probe).then(|| self.go(self.step + 1, now_us, SwitchReason::Headroom))
    }

    fn go(&mut self, step: usize, now_us: u64, reason: SwitchReason) -> Switch {
        let from = self.current();
        self.step = step;
        self.calm_since = None;
        self.probe_since = None;
        if reason == SwitchReason::Headroom {
            self.last_up_at = Some(now_us);
        } else {
            self.last_down_at = Some(now_us);
        }
        Switch {
            from,
            to: self.current(),
            reason,
        }
    }
}

/// Drops entries older than `window` before `now`.
fn expire<T>(entries: &mut VecDeque<(u64, T)>, now: u64, window: u64) {
    while entries
        .front()
        .is_some_and(|(at, _)| at.saturating_add(window) < now)
    {
        entries.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000;
    const S: u64 = 1_000_000;
    /// 250 / 600 / 1200 kbit/s, listed out of order as a catalog might.
    const LADDER: [u64; 3] = [600_000, 250_000, 1_200_000];
    const LOW: usize = 1;
    const MID: usize = 0;
    const HIGH: usize = 2;

    /// A path of `link_bps` with a FIFO queue and 20 ms of propagation, carrying a
    /// 24 fps video of `video_bps` (keyframe every 15 frames, `key_ratio` × a delta frame) and
    /// 64 kbit/s of audio in 20 ms frames. Objects leave the sender when available.
    struct Path {
        link_bps: u64,
        /// When the link finishes what it has queued.
        busy_until: u64,
        now: u64,
        frame: u64,
        key_ratio: u64,
    }

    const PROPAGATION_US: u64 = 20 * MS;

    impl Path {
        fn new(link_bps: u64) -> Path {
            Path {
                link_bps,
                busy_until: 0,
                now: 0,
                frame: 0,
                key_ratio: 8,
            }
        }

        /// Sends `bytes` available at `at`; returns when the last byte arrives.
        fn send(&mut self, at: u64, bytes: u64) -> u64 {
            let start = self.busy_until.max(at);
            self.busy_until = start + bytes * 8 * S / self.link_bps;
            self.busy_until + PROPAGATION_US
        }

        /// Runs `seconds` of media at the rendition `abr` plays, feeding `abr` and
        /// polling it every 10 ms; returns the switches, with when they happened.
        fn run(
            &mut self,
            abr: &mut Abr,
            seconds: u64,
            link: impl Fn(u64) -> u64,
        ) -> Vec<(u64, Switch)> {
            let mut arrivals: Vec<(u64, u64, u64)> = Vec::new();
            let mut switches = Vec::new();
            let end = self.now + seconds * S;
            let (frame_us, audio_us) = (41_667, 20_000);
            let (mut next_video, mut next_audio) = (self.now, self.now);
            while self.now < end {
                self.link_bps = link(self.now);
                let bitrate = LADDER[abr.current()];
                if self.now >= next_video {
                    let delta = bitrate / 8 * frame_us / S * 15 / (14 + self.key_ratio);
                    let bytes = if self.frame.is_multiple_of(15) {
                        delta * self.key_ratio
                    } else {
                        delta
                    };
                    let arrival = self.send(self.now, bytes);
                    arrivals.push((arrival, self.now, bytes));
                    self.frame += 1;
                    next_video += frame_us;
                }
                if self.now >= next_audio {
                    let arrival = self.send(self.now, 64_000 / 8 * audio_us / S);
                    arrivals.push((arrival, self.now, 160));
                    next_audio += audio_us;
                }
                arrivals.sort_unstable();
                while arrivals.first().is_some_and(|(a, _, _)| *a <= self.now) {
                    let (arrival, sent, bytes) = arrivals.remove(0);
                    abr.on_object(arrival, bytes, Some((arrival - sent) as i64 + 5_000_000));
                }
                if self.now.is_multiple_of(10 * MS)
                    && let Some(switch) = abr.poll(self.now)
                {
                    switches.push((self.now, switch));
                }
                self.now += MS;
            }
            switches
        }
    }

    #[test]
    fn an_unconstrained_path_climbs_to_the_top_one_step_at_a_time() {
        let mut abr = Abr::new(&LADDER, None, 0);
        assert_eq!(abr.current(), LOW);
        let switches = Path::new(100_000_000).run(&mut abr, 20, |_| 100_000_000);
        let steps: Vec<(usize, usize)> = switches.iter().map(|(_, s)| (s.from, s.to)).collect();
        assert_eq!(steps, [(LOW, MID), (MID, HIGH)]);
        assert!(
            switches
                .iter()
                .all(|(_, s)| s.reason == SwitchReason::Headroom)
        );
        // Cautiously: each step after the conditions held for UP_SUSTAIN_US.
        assert!(switches[0].0 >= UP_SUSTAIN_US && switches[1].0 - switches[0].0 >= UP_SUSTAIN_US);
        assert!(switches[1].0 < 12 * S, "{switches:?}");
    }

    /// When a standing queue of 200 ms from `from_us` on first makes `abr` (on the middle
    /// rendition, a 20 ms path before) go down, if it does by `until_us`.
    fn first_down_under_a_queue(abr: &mut Abr, from_us: u64, until_us: u64) -> Option<u64> {
        let mut t = 0;
        while t < until_us {
            let delay = if t < from_us { 20 * MS } else { 220 * MS };
            abr.on_object(t, 1_000, Some(delay as i64));
            if let Some(switch) = abr.poll(t) {
                assert_eq!(switch.reason, SwitchReason::Congested);
                return Some(t);
            }
            t += 40 * MS;
        }
        None
    }

    #[test]
    fn a_standing_queue_right_after_a_cut_up_is_forgiven_for_the_settle_time() {
        let cut = 2 * S;
        let mut plain = Abr::new(&LADDER, None, 0);
        plain.set_current(MID);
        let unforgiven = first_down_under_a_queue(&mut plain, cut, 10 * S).expect("goes down");
        assert!(
            unforgiven < cut + S,
            "down {unforgiven} µs without settling"
        );

        let mut settled = Abr::new(&LADDER, None, 0);
        settled.set_current(MID);
        settled.settle(cut);
        let forgiven = first_down_under_a_queue(&mut settled, cut, 10 * S).expect("goes down");
        assert!(
            (cut + SETTLE_US..cut + SETTLE_US + S).contains(&forgiven),
            "down at {forgiven} µs, settled at {cut} µs"
        );
    }

    /// Capacity samples a quarter below the next rendition's margin (as small keyframes
    /// read a fast path): the climb waits for the longer calm, and takes it.
    #[test]
    fn a_capacity_read_low_still_climbs_after_a_longer_calm() {
        let mut abr = Abr::new(&LADDER, None, 0);
        let next = LADDER[MID] as f64;
        let read = (next * 1.2) as u64; // below UP_MARGIN, above UP_PROBE_MARGIN
        let mut up_at = None;
        for t in (0..20 * S).step_by(40 * MS as usize) {
            let key = t % S == 0;
            let (bytes, delay) = if key {
                (8_000, 60_000)
            } else {
                (1_000, 20_000)
            };
            abr.on_object(t, bytes, Some(delay));
            if key {
                // One sample at the read rate replaces what the sizes above would say.
                abr.capacity.clear();
                abr.capacity.push_back((t, read));
            }
            if let Some(s) = abr.poll(t) {
                assert_eq!(s.reason, SwitchReason::Headroom);
                up_at.get_or_insert(t);
            }
        }
        let up_at = up_at.expect("climbs");
        assert!(
            up_at >= UP_PROBE_SUSTAIN_US,
            "up at {up_at} µs: too soon for the small margin"
        );
        assert!(up_at < UP_PROBE_SUSTAIN_US + 2 * S, "up at {up_at} µs");
    }

    #[test]
    fn a_busy_receiver_still_climbs_from_a_low_rendition_on_a_fast_path() {
        // The lowest rendition as x264 makes it: 1.2 kB delta frames and, every 2 s, a
        // 2.1 kB keyframe; no audio. On 1.2 Mbit/s the keyframe's extra kilobyte takes
        // 6 ms, and a busy receiver stamps each object up to 10 ms late: of the few
        // samples the window holds, about half read the path below the probe's margin.
        let mut abr = Abr::new(&LADDER, None, 0);
        let link_bps = 1_200_000;
        let mut late_us = 0;
        let mut up_at = None;
        for frame in 0..30 * 24 {
            let sent = frame * 41_667;
            let bytes = if frame % 48 == 0 { 2_100 } else { 1_200 };
            // A fixed sequence over 0-10 ms, every value as likely.
            late_us = (late_us + 3_700) % 11_000;
            let arrival = sent + 20 * MS + bytes * 8 * S / link_bps + late_us;
            abr.on_object(arrival, bytes, Some((arrival - sent) as i64));
            if let Some(s) = abr.poll(arrival) {
                assert_eq!((s.to, s.reason), (MID, SwitchReason::Headroom));
                up_at = Some(arrival);
                break;
            }
        }
        let up_at = up_at.expect("climbs");
        assert!(up_at < 20 * S, "up at {up_at} µs");
    }

    #[test]
    fn a_400_kbit_path_settles_on_the_250_rendition() {
        let mut abr = Abr::new(&LADDER, None, 0);
        let switches = Path::new(400_000).run(&mut abr, 30, |_| 400_000);
        assert!(switches.is_empty(), "{switches:?}");
        assert_eq!(abr.current(), LOW);
        let capacity = abr.capacity_bps().unwrap();
        assert!((300_000..600_000).contains(&capacity), "{capacity}");
    }

    #[test]
    fn a_collapsing_path_switches_down_promptly_and_recovers_cautiously() {
        // 1200 kbit/s, 400 from 20 s, 1200 again from 50 s (the CASCADE shape).
        let link = |t: u64| {
            if (20 * S..50 * S).contains(&t) {
                400_000
            } else {
                1_200_000
            }
        };
        let mut abr = Abr::new(&LADDER, None, 0);
        let mut path = Path::new(1_200_000);
        let before = path.run(&mut abr, 20, link);
        assert_eq!(
            abr.current(),
            MID,
            "1200 kbit/s carries 600 with room, not 1200: {before:?}"
        );
        let during = path.run(&mut abr, 30, link);
        let (at, down) = during[0];
        assert_eq!(
            (down.to, down.reason),
            (LOW, SwitchReason::Congested),
            "{during:?}"
        );
        assert!(
            at - 20 * S < 2 * S,
            "down within 2 s of the collapse: {during:?}"
        );
        assert_eq!(during.len(), 1, "{during:?}");
        let after = path.run(&mut abr, 30, link);
        let (at, up) = after[0];
        assert_eq!(
            (up.to, up.reason),
            (MID, SwitchReason::Headroom),
            "{after:?}"
        );
        assert!(at - 50 * S >= UP_SUSTAIN_US, "{after:?}");
        assert_eq!(after.len(), 1, "and stays there: {after:?}");
    }

    #[test]
    fn keyframes_little_larger_than_delta_frames_do_not_overrate_a_slow_path() {
        // A constant-bitrate encoder with a tight buffer: keyframes twice a delta frame.
        let mut path = Path::new(400_000);
        path.key_ratio = 2;
        let mut abr = Abr::new(&LADDER, None, 0);
        let switches = path.run(&mut abr, 30, |_| 400_000);
        assert!(switches.is_empty(), "{switches:?}");
        let capacity = abr.capacity_bps().expect("measured");
        assert!(
            (300_000..=600_000).contains(&capacity),
            "capacity {capacity}"
        );
        // The same frames on a fast path climb.
        let mut path = Path::new(100_000_000);
        path.key_ratio = 2;
        let mut abr = Abr::new(&LADDER, None, 0);
        path.run(&mut abr, 20, |_| 100_000_000);
        assert_eq!(abr.current(), HIGH);
    }

    /// A 400 kbit/s path on which a sender or relay catches up with a backlog for the
    /// first 5 s (as after a switch down on a loaded machine): objects come earlier than
    /// the ones before until it has drained. The keyframes that come meanwhile, measured
    /// against the latest object, read the path several times fast (2.7 and 7.4 Mbit/s
    /// were seen on such a link); measured once the path has settled, they read it as it
    /// is.
    #[test]
    fn a_draining_backlog_does_not_read_a_slow_path_fast() {
        const LINK_BPS: u64 = 400_000;
        let mut abr = Abr::new(&LADDER, None, 0);
        let mut path = Path::new(LINK_BPS);
        // 250 kbit/s in 1.25 kB delta frames and 2.1 kB keyframes every 15 frames.
        let size = |frame: u64| {
            if frame.is_multiple_of(15) {
                2_100
            } else {
                1_250
            }
        };
        // The backlog: the first frame waits a second at the sender, and each one after
        // it a little less, until frames leave when made from 5 s on.
        let sent_at = |available: u64| available + S.saturating_sub(available / 5);
        let mut samples = Vec::new();
        for frame in 0..(20 * S / 41_667) {
            let available = frame * 41_667;
            let arrival = path.send(sent_at(available), size(frame));
            // A new sample is the newest entry; the window may drop an old one meanwhile.
            let newest = abr.capacity.back().copied();
            abr.on_object(arrival, size(frame), Some((arrival - available) as i64));
            if abr.capacity.back().copied() != newest {
                samples.extend(abr.capacity.back().copied());
            }
            let switch = abr.poll(arrival);
            assert!(switch.is_none(), "{switch:?} at {arrival} µs: {samples:?}");
        }
        let fastest = samples.iter().map(|(_, bps)| *bps).max().expect("measured");
        assert!(
            fastest <= LINK_BPS * 5 / 4,
            "a {LINK_BPS} bit/s path read as {fastest}: {samples:?}"
        );
        assert!(
            samples.iter().any(|(at, _)| *at > 10 * S),
            "measured once settled: {samples:?}"
        );
    }

    #[test]
    fn a_skip_switches_down_at_once_and_holds_the_way_up() {
        let mut abr = Abr::new(&LADDER, None, 0);
        Path::new(100_000_000).run(&mut abr, 20, |_| 100_000_000);
        assert_eq!(abr.current(), HIGH);
        let now = 20 * S;
        abr.on_skip(now);
        let down = abr.poll(now).unwrap();
        assert_eq!((down.from, down.reason), (HIGH, SwitchReason::Skipped));
        assert_eq!(abr.poll(now + 10 * MS), None, "one skip, one switch");
        // However calm the path, no way up for UP_HOLD_US.
        let mut path = Path::new(100_000_000);
        path.now = now;
        let again = path.run(&mut abr, 9, |_| 100_000_000);
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn the_maximum_bitrate_caps_the_ladder_but_keeps_the_lowest() {
        let mut abr = Abr::new(&LADDER, Some(700_000), 0);
        Path::new(100_000_000).run(&mut abr, 20, |_| 100_000_000);
        assert_eq!(abr.current(), MID);
        let abr = Abr::new(&LADDER, Some(100_000), 0);
        assert_eq!(abr.current(), LOW);
    }

    #[test]
    fn without_delays_nothing_moves_but_skips() {
        let mut abr = Abr::new(&LADDER, None, 0);
        for t in 0..2_000 {
            abr.on_object(t * 10 * MS, 20_000, None);
            assert_eq!(abr.poll(t * 10 * MS), None);
        }
        assert_eq!(abr.current(), LOW);
    }

    #[test]
    fn a_rendition_set_by_hand_is_where_the_climb_resumes() {
        let mut abr = Abr::new(&LADDER, Some(700_000), 0);
        abr.set_current(MID);
        assert_eq!(abr.current(), MID);
        // Above the cap: the highest the cap allows.
        abr.set_current(HIGH);
        assert_eq!(abr.current(), MID);
        abr.set_current(LOW);
        assert_eq!(abr.current(), LOW);
    }
}
