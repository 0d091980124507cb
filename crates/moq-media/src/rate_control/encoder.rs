//! How the encoder answers its target, learned from what it produces.
//!
//! The controller sets a bitrate; what reaches the network is whatever the encoder makes of
//! it. Two things differ between encoders and settings, and both decide whether a rate loop
//! converges:
//!
//! - **Lag**: the time from a new target until the output follows. x264 with
//!   `tune=zerolatency` answers within a frame or two; with lookahead and B-frames frames
//!   already analysed keep their budget, and the ABR loop converges over a window of its own;
//!   a hardware encoder may apply a new rate at its next GoP. A controller that cuts again
//!   before its previous cut could show measures its own lag, not the path, and walks down
//!   to its floor.
//! - **Ratio**: what the encoder really produces against the target. x264's ABR undershoots
//!   on simple content, openh264 overshoots in its bitrate mode; a stream that stays below its
//!   target never fills the path it was given.
//!
//! Both are measured from the access units reaching the sink (their sizes and arrival
//! times), never from the encoder's properties:
//!
//! - the **output rate** is the bytes of the last whole GoPs (at least a second) over their
//!   span, so a keyframe counts once per GoP whatever the phase;
//! - after a target step of at least [`STEP`] the model watches the output rate over one GoP
//!   (whatever its phase, a GoP holds one keyframe and the same pattern of P- and B-frames;
//!   with GoPs longer than a second, the delta frames over a second); the time until it has
//!   moved half-way to where the step should take it, less half the window, is a lag
//!   sample. The lag is smoothed, quick to grow and slow to shrink, and
//!   starts at [`PRIOR_LAG_US`];
//! - the output is sampled while the targets of the last lag plus window stayed within
//!   15 % of each other, against the target the window's output was made for
//!   (the mean, weighted by time, of the targets over the window a lag earlier). Small
//!   trims do not restart the wait: a controller that trims its target every second or two
//!   (a slow link's cuts) would otherwise never let the output be measured; a ramp or a
//!   step does, so a lag learned wrong cannot pair an output with a target far from the
//!   one it was made for.
//! - the ratio is not one number: an encoder with a quality floor (openh264 in its bitrate
//!   mode) overshoots a low target far more than a high one, and a ratio learned at 1
//!   Mbit/s is wrong at 300 kbit/s exactly when a link has just dropped there. The samples
//!   of the last few seconds are fitted with a line, output = slope × target + intercept
//!   (least squares, older samples weighing less), which the ratio at any target is read
//!   from. Until the samples span levels far enough apart to show an intercept, the line
//!   goes through the origin (a plain ratio); a light pseudo-sample there keeps the
//!   intercept modest.
//!
//! No clock is read: every input carries its time in µs.

use std::collections::VecDeque;

/// Frames kept, by age.
const HISTORY_US: u64 = 6_000_000;
/// Shortest span the output rate is taken over.
const MIN_WINDOW_US: u64 = 1_000_000;
/// Longest span the output rate is taken over (a GoP longer than this is not waited for).
const MAX_WINDOW_US: u64 = 3_000_000;
/// Longest GoP whose whole span is the window of the rate watched after a step; with a
/// longer one (or none known), the delta frames' rate over this is watched instead.
const STEP_WINDOW_US: u64 = 1_000_000;
/// Relative target change that is watched for the lag.
pub const STEP: f64 = 0.2;
/// The lag assumed until one was measured: between zerolatency's few frames and
/// lookahead's 40.
pub const PRIOR_LAG_US: u64 = 1_000_000;
/// Longest lag believed; a step not answered by then teaches nothing.
pub const MAX_LAG_US: u64 = 4_000_000;
/// Most the targets behind a sample of the output may differ, as a share of the least.
const SAMPLE_SPREAD: f64 = 0.15;
/// Age at which a sample of the output weighs 1/e of a new one, µs; only time in which
/// samples are taken ages the fit, so a stretch of steps does not erase it.
const FIT_TAU_US: f64 = 6_000_000.0;
/// Weight of the pseudo-sample at the origin, as a share of the samples' weight.
const ORIGIN_WEIGHT: f64 = 0.01;
/// Least spread of the samples' targets (their deviation over their mean) a line is drawn
/// through; closer together, the slope is noise and the line goes through the origin.
const LINE_SPREAD: f64 = 0.1;
/// Without a frame for this long the stream has stopped: no ratio is learned.
const STOPPED_US: u64 = 500_000;
/// Ratios believed.
const RATIO_RANGE: (f64, f64) = (0.2, 3.0);

#[derive(Debug, Clone, Copy)]
struct Frame {
    at_us: u64,
    bytes: u64,
    key: bool,
}

/// A target step being watched for the lag.
#[derive(Debug, Clone, Copy)]
struct Step {
    at_us: u64,
    /// The delta frames' rate before the step, bit/s.
    before: f64,
    /// Where the step should take it.
    expected: f64,
    /// The first of the frames in a row past half-way, and how many there are.
    moved_at_us: Option<u64>,
    moved_frames: u32,
}

/// Frames in a row past half-way that confirm the output moved (one frame type's size is
/// not a step: B-frames are small, P-frames large).
const MOVED_FRAMES: u32 = 3;

/// What the encoder does with its target (see the module documentation).
#[derive(Debug, Clone)]
pub struct EncoderModel {
    frames: VecDeque<Frame>,
    /// The output against the target, once sampled.
    fit: Option<Fit>,
    lag_us: u64,
    lag_samples: u32,
    step: Option<Step>,
    /// The targets set, by age: (since when, bit/s), the newest last.
    targets: VecDeque<(u64, f64)>,
    last_tick_us: Option<u64>,
}

impl EncoderModel {
    pub fn new(target_bps: f64) -> EncoderModel {
        EncoderModel {
            frames: VecDeque::new(),
            fit: None,
            lag_us: PRIOR_LAG_US,
            lag_samples: 0,
            step: None,
            targets: VecDeque::from([(0, target_bps)]),
            last_tick_us: None,
        }
    }

    /// The lag between a new target and the output following it, µs.
    pub fn lag_us(&self) -> u64 {
        self.lag_us
    }

    /// How many steps the lag was measured on.
    pub fn lag_samples(&self) -> u32 {
        self.lag_samples
    }

    /// Output over target at the target in force, once measured.
    pub fn ratio(&self) -> Option<f64> {
        self.ratio_at(self.target())
    }

    /// Output over target at `target_bps`, once measured.
    pub fn ratio_at(&self, target_bps: f64) -> Option<f64> {
        let (slope, intercept) = self.fit?.line()?;
        let target = target_bps.max(1.0) / 1e6;
        Some(((slope * target + intercept) / target).clamp(RATIO_RANGE.0, RATIO_RANGE.1))
    }

    /// An access unit of `bytes` reached the sink at `now_us`.
    pub fn on_frame(&mut self, now_us: u64, bytes: u64, key: bool) {
        if self.frames.back().is_some_and(|f| f.at_us > now_us) {
            return;
        }
        self.frames.push_back(Frame {
            at_us: now_us,
            bytes,
            key,
        });
        while self
            .frames
            .front()
            .is_some_and(|f| f.at_us.saturating_add(HISTORY_US) < now_us)
        {
            self.frames.pop_front();
        }
        self.watch_step(now_us);
    }

    /// The encoder was given `target_bps` at `now_us`.
    pub fn on_target(&mut self, now_us: u64, target_bps: f64) {
        let previous = self.target();
        self.targets.push_back((now_us, target_bps));
        // The oldest kept is the one in force over the whole history.
        while self.targets.len() > 1
            && self.targets[1].0.saturating_add(HISTORY_US + MAX_LAG_US) < now_us
        {
            self.targets.pop_front();
        }
        if previous <= 0.0 || (target_bps / previous - 1.0).abs() < STEP {
            // A small change: the step being watched (if any) still dominates.
            return;
        }
        self.step = self.step_rate(now_us).map(|(before, _)| Step {
            at_us: now_us,
            before,
            expected: before * target_bps / previous,
            moved_at_us: None,
            moved_frames: 0,
        });
    }

    /// Updates the ratio at `now_us` (called with every controller update).
    pub fn tick(&mut self, now_us: u64) {
        let elapsed = self.last_tick_us.map_or(0, |t| now_us.saturating_sub(t));
        self.last_tick_us = Some(now_us);
        if let Some(step) = self.step
            && now_us.saturating_sub(step.at_us) > MAX_LAG_US
        {
            self.step = None;
        }
        // A stream that stopped (a stalled source, EOS) says nothing of the encoder.
        let flowing = self
            .frames
            .back()
            .is_some_and(|f| now_us.saturating_sub(f.at_us) <= STOPPED_US);
        if !flowing {
            return;
        }
        let Some((rate, window)) = self.output(now_us) else {
            return;
        };
        let (low, high) = self.target_range(
            now_us.saturating_sub(self.lag_us.saturating_add(window)),
            now_us,
        );
        let made_at = now_us.saturating_sub(self.lag_us);
        let target = self.mean_target(made_at.saturating_sub(window), made_at);
        if high > low * (1.0 + SAMPLE_SPREAD) || target <= 0.0 {
            return;
        }
        // A sample past the ratios believed is a stream that does not answer its target
        // (a stalled encoder, a scene cut): kept at the bound, as before the fit.
        let rate = rate.clamp(RATIO_RANGE.0 * target, RATIO_RANGE.1 * target);
        let decay = (-(elapsed as f64) / FIT_TAU_US).exp();
        self.fit
            .get_or_insert_with(Fit::default)
            .add(decay, target / 1e6, rate / 1e6);
    }

    /// The target in force now, bit/s.
    fn target(&self) -> f64 {
        self.targets.back().map_or(0.0, |t| t.1)
    }

    /// The least and the greatest target in force over [`from_us`, `to_us`].
    fn target_range(&self, from_us: u64, to_us: u64) -> (f64, f64) {
        self.in_force(from_us, to_us)
            .fold((f64::MAX, 0.0), |(low, high), (_, _, bps)| {
                (low.min(bps), high.max(bps))
            })
    }

    /// The targets in force over [`from_us`, `to_us`]: (from, until, bit/s), clipped to it.
    fn in_force(&self, from_us: u64, to_us: u64) -> impl Iterator<Item = (u64, u64, f64)> + '_ {
        self.targets
            .iter()
            .enumerate()
            .filter_map(move |(i, &(since, bps))| {
                let until = self.targets.get(i + 1).map_or(u64::MAX, |t| t.0);
                let (start, end) = (since.max(from_us), until.min(to_us));
                (end > start).then_some((start, end, bps))
            })
    }

    /// The targets' mean over [`from_us`, `to_us`), weighted by how long each was in force.
    fn mean_target(&self, from_us: u64, to_us: u64) -> f64 {
        if to_us <= from_us {
            return self.target();
        }
        let sum: f64 = self
            .in_force(from_us, to_us)
            .map(|(start, end, bps)| bps * (end - start) as f64)
            .sum();
        sum / (to_us - from_us) as f64
    }

    /// The output rate at `now_us` over the last whole GoPs (see the module documentation),
    /// bit/s, and the window it was taken over.
    pub fn output_bps(&self, now_us: u64) -> Option<f64> {
        self.output(now_us).map(|(rate, _)| rate)
    }

    fn output(&self, now_us: u64) -> Option<(f64, u64)> {
        let first = self.frames.front()?;
        let window = self.window();
        if now_us.saturating_sub(first.at_us) < window {
            return None;
        }
        let from = now_us.saturating_sub(window);
        let bytes: u64 = self
            .frames
            .iter()
            .filter(|f| f.at_us > from)
            .map(|f| f.bytes)
            .sum();
        Some((bytes as f64 * 8e6 / window as f64, window))
    }

    /// The span the output rate is taken over: whole GoPs, at least a second.
    fn window(&self) -> u64 {
        match self.gop_us() {
            Some(gop) if gop <= MAX_WINDOW_US => gop * MIN_WINDOW_US.div_ceil(gop),
            _ => MAX_WINDOW_US,
        }
    }

    /// The GoP's length, from the keyframes kept.
    fn gop_us(&self) -> Option<u64> {
        let mut keys = self.frames.iter().filter(|f| f.key).map(|f| f.at_us);
        let first = keys.next()?;
        let (last, n) = keys.fold((first, 0u64), |(_, n), t| (t, n + 1));
        (n > 0).then(|| (last - first) / n).filter(|&gop| gop > 0)
    }

    /// The rate watched after a step, at `now_us`: over the last GoP, or the delta frames'
    /// over [`STEP_WINDOW_US`] (see the module documentation); bit/s and the window.
    fn step_rate(&self, now_us: u64) -> Option<(f64, u64)> {
        let first = self.frames.front()?;
        let gop = self.gop_us().filter(|&g| g <= STEP_WINDOW_US);
        let window = gop.unwrap_or(STEP_WINDOW_US);
        if now_us.saturating_sub(first.at_us) < window {
            return None;
        }
        let from = now_us.saturating_sub(window);
        let bytes: u64 = self
            .frames
            .iter()
            .filter(|f| f.at_us > from && (gop.is_some() || !f.key))
            .map(|f| f.bytes)
            .sum();
        Some((bytes as f64 * 8e6 / window as f64, window))
    }

    fn watch_step(&mut self, now_us: u64) {
        let Some(mut step) = self.step else {
            return;
        };
        if now_us.saturating_sub(step.at_us) > MAX_LAG_US {
            self.step = None;
            return;
        }
        let Some((rate, window)) = self.step_rate(now_us) else {
            return;
        };
        let halfway = (step.before + step.expected) / 2.0;
        let moved = if step.expected < step.before {
            rate <= halfway
        } else {
            rate >= halfway
        };
        if !moved {
            step.moved_at_us = None;
            step.moved_frames = 0;
            self.step = Some(step);
            return;
        }
        let moved_at = *step.moved_at_us.get_or_insert(now_us);
        step.moved_frames += 1;
        if step.moved_frames < MOVED_FRAMES {
            self.step = Some(step);
            return;
        }
        self.step = None;
        let sample = moved_at
            .saturating_sub(step.at_us)
            .saturating_sub(window / 2)
            .min(MAX_LAG_US);
        self.lag_us = if self.lag_samples == 0 {
            sample
        } else if sample > self.lag_us {
            // Quick to grow: a cut held too short costs a cascade.
            (self.lag_us + sample) / 2
        } else {
            (self.lag_us * 3 + sample) / 4
        };
        self.lag_samples = self.lag_samples.saturating_add(1);
    }
}

/// Sums of the samples of the output (y) against the target (x), Mbit/s, each weighted by
/// its age: what a weighted least-squares line needs.
#[derive(Debug, Clone, Copy, Default)]
struct Fit {
    w: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Fit {
    /// Ages the samples so far by `decay` (their weight's factor) and adds one.
    fn add(&mut self, decay: f64, x: f64, y: f64) {
        for sum in [
            &mut self.w,
            &mut self.x,
            &mut self.y,
            &mut self.xx,
            &mut self.xy,
        ] {
            *sum *= decay;
        }
        self.w += 1.0;
        self.x += x;
        self.y += y;
        self.xx += x * x;
        self.xy += x * y;
    }

    /// (slope, intercept) of the line through the samples and the pseudo-sample at the
    /// origin; a line through the origin where the samples' levels are too close together
    /// for a slope, or show a falling one.
    fn line(&self) -> Option<(f64, f64)> {
        if self.w <= 0.0 || self.x <= 0.0 {
            return None;
        }
        let through_origin = Some((self.y / self.x, 0.0));
        let mean = self.x / self.w;
        let spread = (self.xx / self.w - mean * mean).max(0.0).sqrt();
        if spread < LINE_SPREAD * mean {
            return through_origin;
        }
        let w = self.w * (1.0 + ORIGIN_WEIGHT);
        let slope = (w * self.xy - self.x * self.y) / (w * self.xx - self.x * self.x);
        if !slope.is_finite() || slope <= 0.0 {
            return through_origin;
        }
        Some((slope, (self.y - slope * self.x) / w))
    }
}
