//! Playout clock: maps media timestamps to the receiver's running time.
//!
//! A live source stamps each buffer with the running time at which it "captured" it;
//! downstream sinks render at that time plus the pipeline latency. The mapping is an
//! offset fixed at an anchor frame, so continuous media plays at 1×. When a frame would
//! already be too late to render (its slot plus the buffering latency has passed), the
//! player has rebuffered: the offset is re-anchored on that frame, relative to the point
//! where playback resumes rather than the absolute start (the source thesis's Algorithm 1; docs/design.md: Background), and the
//! frame is flagged as a discontinuity.
//!
//! No clock is read here: callers pass `now` in nanoseconds of running time.

use std::collections::VecDeque;

use moq_media::catalog::MediaKind;

/// Nanoseconds per catalog timescale unit (µs).
const NS_PER_UNIT: i64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor {
    /// Media time of the anchor frame, in timescale units.
    media: i64,
    /// Running time assigned to it, in ns.
    running: u64,
}

/// Running-time stamps for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamped {
    pub dts: u64,
    pub pts: u64,
    /// The timeline changed since this track's previous frame (first frame, rebuffer or
    /// jump, on this track or another): the buffer is a discontinuity.
    pub discont: bool,
    /// This frame set the new anchor.
    pub reanchored: bool,
    /// The frame's slot passed more than the latency ago and it was not allowed to move
    /// the timeline: it will render late, if at all.
    pub late: bool,
}

/// Earlier mappings kept at most (see [`PlayoutClock::set_keeps_earlier`]).
const MAX_EARLIER: usize = 16;

/// The media → running-time mapping of one broadcast, shared by all its tracks so they
/// stay in sync: a re-anchor on one track moves every track.
///
/// When tracks arrive far apart (audio led by a second ahead of congested video), the
/// one ahead may move the timeline later while the one behind has yet to play media the
/// other already played. The clock can then keep the mapping each stretch of media was
/// played with, so the same media time gets the same slot on every track.
#[derive(Debug, Clone)]
pub struct PlayoutClock {
    latency_ns: u64,
    /// The mapping of media from its media time on.
    anchor: Option<Anchor>,
    /// The mappings before it, oldest first, each up to the next one's media time.
    earlier: VecDeque<Anchor>,
    keeps_earlier: bool,
    /// Anchors set so far: a track that saw an older one is told of the discontinuity.
    anchors: u64,
    /// Resets so far: a track's last stamp from before the latest one means nothing.
    resets: u64,
}

/// What the clock keeps of one track's output.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackPlayout {
    last_dts: Option<u64>,
    anchors: u64,
    resets: u64,
}

impl PlayoutClock {
    /// `latency_ns` is the buffering the pipeline adds after this element (what the
    /// source reports in the LATENCY query); a frame later than that is a rebuffer.
    pub fn new(latency_ns: u64) -> PlayoutClock {
        PlayoutClock {
            latency_ns,
            anchor: None,
            earlier: VecDeque::new(),
            keeps_earlier: false,
            anchors: 0,
            resets: 0,
        }
    }

    /// Forgets the timeline; the next frame of any track plays at once.
    pub fn reset(&mut self) {
        self.anchor = None;
        self.earlier.clear();
        self.resets += 1;
    }

    /// Whether a move of the timeline later (a rebuffer, a shift) applies only from the
    /// media that moved it on, media before keeping the slots it had: for a track that
    /// trails the one that moved it, so it meets its media where the other played it.
    pub fn set_keeps_earlier(&mut self, keeps: bool) {
        self.keeps_earlier = keeps;
        if !keeps {
            self.earlier.clear();
        }
    }

    /// The mapping of media time `media`.
    fn anchor_of(&self, media: i64) -> Option<Anchor> {
        let current = self.anchor?;
        if media >= current.media {
            return Some(current);
        }
        let before = self.earlier.iter().rev().find(|a| a.media <= media);
        Some(*before.or(self.earlier.front()).unwrap_or(&current))
    }

    /// Makes `anchor` the current mapping. Kept, the current one maps the media before;
    /// any mapping of media at or after the new anchor's goes.
    fn set_anchor(&mut self, anchor: Anchor, keep: bool) {
        if !(keep && self.keeps_earlier) {
            self.earlier.clear();
        } else if let Some(current) = self.anchor {
            while self.earlier.back().is_some_and(|a| a.media >= anchor.media) {
                self.earlier.pop_back();
            }
            if current.media < anchor.media {
                self.earlier.push_back(current);
                if self.earlier.len() > MAX_EARLIER {
                    self.earlier.pop_front();
                }
            }
        }
        self.anchor = Some(anchor);
    }

    fn map(anchor: Anchor, media: i64) -> Option<u64> {
        let delta = media.checked_sub(anchor.media)?.checked_mul(NS_PER_UNIT)?;
        anchor.running.checked_add_signed(delta)
    }

    /// Running time of media time `media` on the current timeline.
    pub fn slot(&self, media: i64) -> Option<u64> {
        Self::map(self.anchor_of(media)?, media)
    }

    /// The timeline's offset: running time − media time, ns; `None` before an anchor.
    pub fn offset(&self) -> Option<i64> {
        let a = self.anchor?;
        let running = i64::try_from(a.running).unwrap_or(i64::MAX);
        Some(running.saturating_sub(a.media.saturating_mul(NS_PER_UNIT)))
    }

    /// Moves the slots of media from `media` on by `by_ns` (later when positive) without
    /// re-anchoring: playback holds, or catches up, by that much. Media before keeps its
    /// slots if the clock [keeps earlier mappings](Self::set_keeps_earlier), else moves
    /// too.
    pub fn shift_from(&mut self, media: i64, by_ns: i64) {
        let Some(current) = self.anchor else {
            return;
        };
        if self.keeps_earlier && media > current.media {
            if let Some(running) = Self::map(current, media) {
                let running = running.saturating_add_signed(by_ns);
                self.set_anchor(Anchor { media, running }, true);
            }
            return;
        }
        let keeps = self.keeps_earlier;
        let moved = self.anchor.iter_mut().chain(
            self.earlier
                .iter_mut()
                .filter(|a| !keeps || a.media >= media),
        );
        for a in moved {
            a.running = a.running.saturating_add_signed(by_ns);
        }
    }

    /// When a frame of media time `dts` should leave for downstream, if it is early: a
    /// `lead_ns` before its slot. Held back until then, a frame stays where a later move
    /// of the timeline can still reach it.
    pub fn hold_until(&self, dts: i64, now: u64, lead_ns: u64) -> Option<u64> {
        self.slot(dts)
            .filter(|slot| *slot > now.saturating_add(lead_ns))
            .map(|slot| slot - lead_ns)
    }

    /// Whether a frame of a track that plays continuously (audio) has lost its place on
    /// the timeline: its media lies before the anchor (skipped by a jump), or it
    /// [overlaps](Self::overlaps_output) what the track already output.
    pub fn is_passed(&self, track: &TrackPlayout, dts: i64, duration: u64) -> bool {
        self.is_before_anchor(dts) || self.overlaps_output(track, dts, duration)
    }

    fn is_before_anchor(&self, media: i64) -> bool {
        self.anchor.is_some_and(|a| media < a.media)
    }

    /// Whether the timeline moved earlier and a frame's slot now falls more than half its
    /// `duration` inside what the track already output: dropping it keeps the track's
    /// output free of overlaps.
    pub fn overlaps_output(&self, track: &TrackPlayout, dts: i64, duration: u64) -> bool {
        let last = track.last_dts.filter(|_| track.resets == self.resets);
        let half = duration.saturating_mul(NS_PER_UNIT as u64) / 2;
        match (self.slot(dts), last) {
            (Some(slot), Some(last)) => slot < last.saturating_add(half),
            _ => false,
        }
    }

    /// Stamps a frame of `track` that arrived at running time `now`. `dts`/`pts` are in
    /// timescale units.
    pub fn stamp(&mut self, track: &mut TrackPlayout, dts: i64, pts: i64, now: u64) -> Stamped {
        self.stamp_as(track, dts, pts, now, Anchoring::WhenLate)
    }

    /// Like [`stamp`](Self::stamp), but `jump` forces a re-anchor (the caller skipped media).
    pub fn stamp_with(
        &mut self,
        track: &mut TrackPlayout,
        dts: i64,
        pts: i64,
        now: u64,
        jump: bool,
    ) -> Stamped {
        let anchoring = if jump {
            Anchoring::Always
        } else {
            Anchoring::WhenLate
        };
        self.stamp_as(track, dts, pts, now, anchoring)
    }

    /// Stamps a frame, re-anchoring the timeline on it as `anchoring` says.
    fn stamp_as(
        &mut self,
        track: &mut TrackPlayout,
        dts: i64,
        pts: i64,
        now: u64,
        anchoring: Anchoring,
    ) -> Stamped {
        if track.resets != self.resets {
            *track = TrackPlayout {
                resets: self.resets,
                ..TrackPlayout::default()
            };
        }
        // Media the timeline maps before running time 0 (this receiver started after the
        // sender, and the media is older than what anchored the timeline) is as late as
        // media gets: its slot is the start, not none. Only a timeline without an
        // anchor has no slot for it, and only then may a frame that must not move the
        // timeline start it.
        let slot = self
            .slot(dts)
            .or_else(|| self.anchor.map(|_| 0))
            .filter(|_| anchoring != Anchoring::Always);
        let on_time = |running: &u64| running.saturating_add(self.latency_ns) >= now;
        let late = slot.as_ref().is_some_and(|r| !on_time(r));
        let kept = match anchoring {
            Anchoring::Never => slot,
            Anchoring::WhenLate | Anchoring::Always => slot.filter(on_time),
        };
        let (dts_running, reanchored) = match kept {
            Some(running) => (running, false),
            None => {
                // A rebuffer moves the media from this frame on; a jump or a first
                // frame starts the timeline over.
                let rebuffer = anchoring == Anchoring::WhenLate && self.anchor.is_some();
                self.set_anchor(
                    Anchor {
                        media: dts,
                        running: now,
                    },
                    rebuffer,
                );
                self.anchors += 1;
                (now, true)
            }
        };
        let discont = reanchored || track.anchors != self.anchors;
        track.anchors = self.anchors;
        let pts_offset = (pts.saturating_sub(dts).max(0) as u64).saturating_mul(NS_PER_UNIT as u64);
        // A frame is shown at the slot of its presentation time, so one shown after a
        // move its decoding preceded (a reference frame before B-frames) lands where the
        // other tracks play that moment.
        let shown = self
            .slot(pts)
            .unwrap_or(dts_running.saturating_add(pts_offset));
        // Decode timestamps must never go backwards, whatever the sender did (or a
        // receiver that derived them from presentation times); the frame is still shown at its
        // slot, unless that would precede its decoding.
        let dts_running = track.last_dts.map_or(dts_running, |l| dts_running.max(l));
        track.last_dts = Some(dts_running);
        let pts_running = shown.max(dts_running);
        Stamped {
            dts: dts_running,
            pts: pts_running,
            discont,
            reanchored,
            late: late && !reanchored,
        }
    }
}

/// When a frame re-anchors the timeline (it always does when there is no anchor yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchoring {
    /// When it would otherwise be later than the latency allows (a rebuffer).
    WhenLate,
    /// Always: the caller jumped over media.
    Always,
    /// Never: the frame follows the timeline another track sets.
    Never,
}

/// How long audio keeps the lead after the slot of its latest frame: a stalled or ended
/// audio track must not hold the video to its timeline.
const AUDIO_LEAD_HOLD_NS: u64 = 1_000_000_000;

/// A video jump moves a timeline that audio leads only when it brings playback at
/// least this much earlier: each such move cuts as much audio.
const MIN_JUMP_GAIN_NS: u64 = 100_000_000;

/// How far back a video jump looks at how early the audio came.
const AUDIO_SLACK_WINDOW_NS: u64 = 3_000_000_000;

/// While audio leads, frames leave for downstream this long before their slot at the
/// earliest, so a video jump that moves the timeline finds little already sent.
const RELEASE_LEAD_NS: u64 = 20_000_000;

/// How long the first audio frame waits for the first video frame when the broadcast
/// has video. A late joiner through a relay gets the video's current GoP from its start,
/// up to a GoP older than the newest audio: anchored on audio, the video would move the
/// timeline later a moment after audio started, and cut a hole of that GoP's age into it.
const VIDEO_START_WAIT_NS: u64 = 500_000_000;

/// Margin above what the frames were measured to need: what a next frame may add.
const NEED_MARGIN_NS: i64 = 10_000_000;
/// Of the downstream buffering (`latency`), what a late frame may use: the rest is left
/// for decoding and rendering it.
const PROCESSING_NS: u64 = 30_000_000;
/// The adaptive timeline moves later when what the frames need is this much above it.
const GROW_MIN_NS: i64 = 10_000_000;
/// It drains when it is this much above what the frames need.
const DRAIN_MIN_NS: i64 = 20_000_000;
/// Share of the media time by which video drains: slots this much shorter. libwebrtc's
/// renderer moves its delay by up to 100 ms a second as well: a tenth is not seen, and
/// the delay a congestion episode leaves is given back in a few seconds, not ten.
pub const VIDEO_DRAIN_SHARE: f64 = 0.10;
/// Share of the media time by which audio drains: a frame dropped at most this often.
/// Each drop is a splice in the sound; this few are not heard.
const AUDIO_DRAIN_SHARE: f64 = 0.06;

/// While audio leads, it grows the timeline by at most this much at a time: each growth
/// is a hole in the sound, and one this short is barely heard, where waiting until a
/// frame is later than the latency allows cuts one of the whole latency.
const AUDIO_GROW_STEP_NS: i64 = 40_000_000;
/// And no sooner than this after the previous growth.
const AUDIO_GROW_SPACING_NS: u64 = 100_000_000;

/// What an adaptive step did to the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adapted {
    /// Slots moved later by this much, ns: frames came later than the timeline allowed.
    Grew(u64),
    /// Slots moved earlier by this much, ns: frames come earlier than they need to.
    Drained(u64),
}

/// What a track's recent frames need of an adaptive timeline (see `DelayEstimator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The offset (running − media, ns) that has them on time.
    pub offset: i64,
    /// Their least transit (running − media, ns).
    pub floor: i64,
    /// Measured over long enough to drain on.
    pub settled: bool,
}

/// What each kind of track needs of an adaptive timeline.
#[derive(Debug, Clone, Default)]
struct Needs {
    /// Per kind (video, audio).
    by_kind: [Option<Need>; 2],
    /// When audio last gave a frame up to drain, running time ns.
    audio_drained_at: Option<u64>,
    /// When audio last grew the timeline, running time ns.
    audio_grown_at: Option<u64>,
}

/// A running time as a signed number of ns, for differences.
fn signed(running: u64) -> i64 {
    i64::try_from(running).unwrap_or(i64::MAX)
}

fn kind_index(kind: MediaKind) -> usize {
    match kind {
        MediaKind::Video => 0,
        MediaKind::Audio => 1,
    }
}

/// A broadcast's timeline: which track may move the shared [`PlayoutClock`], and when.
///
/// With skip-forward and an audio track, audio leads: it plays as its slots come, moving
/// the timeline later only for itself (adaptive: in short steps as its own frames come
/// later; else when one is later than the latency allows), and video follows its
/// timeline (a late video frame keeps its slot), so audio never waits for video. Video
/// that trails the audio meets each moment's media where the audio played it: a move
/// later applies from the audio that made it on. A video jump moves the
/// timeline only when that brings playback earlier (latency built up behind a congested
/// link), by no more than the audio came early over the last seconds (or the next audio
/// as late would rebuffer) and to no earlier than the end of the audio already out (a
/// picture before it would be shown against audio of the old mapping); audio then drops
/// what would overlap its output and goes on without a hole. Frames are held until just
/// before their slot, so such a move finds little already sent and the tracks stay in
/// sync across it. Without audio, or without
/// skip-forward (where everything plays late together), any track's rebuffer or jump
/// moves the timeline for all, and audio from before a jump is dropped.
#[derive(Debug, Clone)]
pub struct Timeline {
    clock: PlayoutClock,
    /// Audio may lead (skip-forward and an audio track).
    audio_leads: bool,
    /// Running time at which the latest audio frame out ends (its slot plus its
    /// duration). Not its arrival: audio that comes early waits for its slot, up to the
    /// whole playout delay, and a late video frame arriving now must still see it as
    /// playing; a video jump must not move the timeline under it.
    audio_output_end: Option<u64>,
    /// How early audio came (slot − arrival, ns; negative: late) over the last
    /// [`AUDIO_SLACK_WINDOW_NS`], by arrival: a jump moves the timeline no earlier than
    /// the audio path allowed lately, or the next audio to come as late would rebuffer.
    audio_slack: VecDeque<(u64, i64)>,
    /// A video track plays too: the first frame of a timeline should be video's.
    has_video: bool,
    /// Adaptive playout: the offset follows what the tracks' frames need (else it moves
    /// only when a frame comes later than the latency allows, or playback jumps).
    adaptive: Option<Needs>,
}

impl Timeline {
    pub fn new(latency_ns: u64) -> Timeline {
        Timeline {
            clock: PlayoutClock::new(latency_ns),
            audio_leads: false,
            audio_output_end: None,
            audio_slack: VecDeque::new(),
            has_video: false,
            adaptive: None,
        }
    }

    /// Lets the offset follow what the tracks need ([`Timeline::adapt`]), or not.
    pub fn set_adaptive(&mut self, adaptive: bool) {
        self.adaptive = adaptive.then(Needs::default);
    }

    /// What the recent frames of the `kind` track need; `None` when nothing is known (a
    /// jump left what came before behind).
    pub fn set_need(&mut self, kind: MediaKind, need: Option<Need>) {
        if let Some(needs) = &mut self.adaptive {
            needs.by_kind[kind_index(kind)] = need;
        }
    }

    /// Whether every track that plays knows what it needs over long enough to drain on.
    fn settled(&self, now: u64) -> bool {
        let Some(needs) = &self.adaptive else {
            return false;
        };
        let settled = |kind| needs.by_kind[kind_index(kind)].is_some_and(|n| n.settled);
        (!self.has_video || settled(MediaKind::Video))
            && (!self.audio_playing(now) || settled(MediaKind::Audio))
    }

    /// The timeline's offset now (running − media, ns).
    pub fn offset(&self) -> Option<i64> {
        self.clock.offset()
    }

    /// The offset an adaptive timeline aims at: what every track needs, less what the
    /// downstream buffering lets a frame be late by, and never below the floor (the least
    /// transit of the tracks' recent frames: no frame plays before it arrived). `latency`
    /// is the floor of the buffering: the fastest frames wait that long downstream.
    fn target(&self) -> Option<i64> {
        self.floor_and_target(|_| true).map(|(_, target)| target)
    }

    /// The least transit and the target of the tracks whose fastest frames arrive before
    /// their slots (all of them, unless one trails, as video does while audio leads), for
    /// telling the buffering those frames get; the floor and target of all when none does.
    pub fn on_time(&self) -> Option<(i64, i64)> {
        let offset = self.clock.offset()?;
        self.floor_and_target(|n| n.floor <= offset)
            .or_else(|| self.floor_and_target(|_| true))
    }

    /// The floor and the target of the tracks whose needs `keep` selects.
    fn floor_and_target(&self, keep: impl Fn(&Need) -> bool) -> Option<(i64, i64)> {
        let needs = self.adaptive.as_ref()?;
        let kept = || needs.by_kind.iter().flatten().filter(|n| keep(n));
        let floor = kept().map(|n| n.floor).max()?;
        let need = kept().map(|n| self.aim(n)).max()?;
        Some((floor, need.max(floor)))
    }

    /// The offset that has a track's frames on time with the downstream buffering.
    fn aim(&self, need: &Need) -> i64 {
        need.offset
            .saturating_add(NEED_MARGIN_NS)
            .saturating_sub(self.tolerance())
            .max(need.floor)
    }

    /// How late after its slot a frame may come: the downstream buffering, less what
    /// decoding and rendering it take.
    fn tolerance(&self) -> i64 {
        i64::try_from(self.clock.latency_ns.saturating_sub(PROCESSING_NS)).unwrap_or(i64::MAX)
    }

    /// Whether audio played lately: then audio drains the timeline, by dropping frames,
    /// and video follows, so neither overlaps itself.
    fn audio_playing(&self, now: u64) -> bool {
        self.audio_output_end
            .is_some_and(|t| now.saturating_sub(t) < AUDIO_LEAD_HOLD_NS)
    }

    /// Before a frame of `kind` with media time `dts` (`duration_us` long) is stamped at
    /// `now`: an adaptive timeline grows at once to what the frames need, or, once every
    /// track's need has settled, drains towards it by up to a tenth of each video frame's
    /// time. With audio playing, audio drains it instead ([`Timeline::drain_audio`]) and
    /// video follows.
    pub fn adapt(
        &mut self,
        kind: MediaKind,
        dts: i64,
        now: u64,
        duration_us: u64,
    ) -> Option<Adapted> {
        let offset = self.clock.offset()?;
        if self.audio_leading(now) {
            return (kind == MediaKind::Audio)
                .then(|| self.grow_for_audio(dts, now, offset))
                .flatten();
        }
        if let Some(grow_to) = self.target()
            && grow_to.saturating_sub(offset) > GROW_MIN_NS
        {
            let by = grow_to.saturating_sub(offset);
            self.clock.shift_from(dts, by);
            return Some(Adapted::Grew(by as u64));
        }
        if kind != MediaKind::Video || self.audio_playing(now) || !self.settled(now) {
            return None;
        }
        let excess = offset.saturating_sub(self.target()?);
        if excess <= DRAIN_MIN_NS {
            return None;
        }
        let step =
            (duration_us.saturating_mul(NS_PER_UNIT as u64) as f64 * VIDEO_DRAIN_SHARE) as i64;
        let by = excess.min(step);
        (by > 0).then(|| {
            self.clock.shift_from(dts, -by);
            Adapted::Drained(by as u64)
        })
    }

    /// While audio leads: grows the timeline, before the audio frame of media time `dts`,
    /// towards what the audio's own frames need, in steps short enough not to be heard
    /// as a hole. Only audio's need counts: video that trails it follows and does not
    /// hold the sound back. A delay that climbs faster than the steps (a queue filling
    /// as a congestion window doubles) brings a frame later than the buffering takes;
    /// it moves the timeline at once, only as far as it must, where a rebuffer would cut
    /// a hole of its whole lateness.
    fn grow_for_audio(&mut self, dts: i64, now: u64, offset: i64) -> Option<Adapted> {
        let needs = self.adaptive.as_ref()?;
        let need = needs.by_kind[kind_index(MediaKind::Audio)]?;
        let recent = needs
            .audio_grown_at
            .is_some_and(|at| now < at.saturating_add(AUDIO_GROW_SPACING_NS));
        let latency = i64::try_from(self.clock.latency_ns).unwrap_or(i64::MAX);
        let overdue = self
            .clock
            .slot(dts)
            .map(|slot| signed(now).saturating_sub(signed(slot)))
            .filter(|lateness| *lateness > latency)
            .map(|lateness| lateness.saturating_sub(self.tolerance()));
        let excess = self.aim(&need).saturating_sub(offset);
        let by = match overdue {
            Some(overdue) => overdue,
            None if recent || excess <= GROW_MIN_NS => return None,
            None => excess.min(AUDIO_GROW_STEP_NS),
        };
        self.adaptive.as_mut()?.audio_grown_at = Some(now);
        self.clock.shift_from(dts, by);
        Some(Adapted::Grew(by as u64))
    }

    /// Whether the audio frame (`duration_us` long) due at `now` is to be dropped to
    /// drain an adaptive timeline that is later than the tracks need: the slots move
    /// earlier by its duration with it, so the audio goes on without a hole. One frame
    /// at most per [`AUDIO_DRAIN_SHARE`] of the media time.
    pub fn drain_audio(&mut self, dts: i64, now: u64, duration_us: u64) -> bool {
        let (Some(offset), Some(target)) = (self.clock.offset(), self.target()) else {
            return false;
        };
        if !self.settled(now) {
            return false;
        }
        let Some(needs) = &mut self.adaptive else {
            return false;
        };
        let duration = duration_us.saturating_mul(NS_PER_UNIT as u64);
        let spacing = (duration as f64 / AUDIO_DRAIN_SHARE) as u64;
        let excess = offset.saturating_sub(target);
        let due = needs
            .audio_drained_at
            .is_none_or(|at| now >= at.saturating_add(spacing));
        let worth =
            i64::try_from(duration).is_ok_and(|d| d > 0 && excess > d.saturating_add(DRAIN_MIN_NS));
        if !(due && worth) {
            return false;
        }
        needs.audio_drained_at = Some(now);
        self.clock.shift_from(dts, -(duration as i64));
        true
    }

    /// Tells the timeline a video track plays: audio then waits briefly for video to
    /// anchor it (see [`VIDEO_START_WAIT_NS`]).
    pub fn set_has_video(&mut self, has_video: bool) {
        self.has_video = has_video;
    }

    /// Whether audio is waiting for the first video frame to anchor the timeline.
    fn awaits_video(&self) -> bool {
        self.has_video && self.clock.anchor.is_none()
    }

    /// Lets audio lead (skip-forward with an audio track) or not.
    pub fn set_audio_leads(&mut self, leads: bool) {
        self.audio_leads = leads;
        self.clock.set_keeps_earlier(leads);
    }

    /// Forgets the timeline; the next frame of any track plays at once.
    pub fn reset(&mut self) {
        self.clock.reset();
        self.audio_output_end = None;
        self.audio_slack.clear();
        if let Some(needs) = &mut self.adaptive {
            *needs = Needs::default();
        }
    }

    /// Whether an audio frame has lost its place on the timeline. While audio leads, only
    /// what would overlap the audio already out: after a video jump moved the timeline
    /// earlier, the audio from before the jump that still fits (the audio pad runs behind
    /// its slots by what the sink buffers) plays up to it, so the cut leaves no hole.
    /// Otherwise also all media from before the anchor ([`PlayoutClock::is_passed`]).
    pub fn is_passed(&self, track: &TrackPlayout, dts: i64, duration: u64) -> bool {
        if self.audio_leads {
            self.clock.overlaps_output(track, dts, duration)
        } else {
            self.clock.is_passed(track, dts, duration)
        }
    }

    /// Whether audio sets the timeline at `now`.
    fn audio_leading(&self, now: u64) -> bool {
        self.audio_leads && self.audio_playing(now)
    }

    /// The least the audio came early (ns) over the window before `now`.
    fn audio_slack(&self, now: u64) -> u64 {
        let early = self
            .audio_slack
            .iter()
            .filter(|(at, _)| at.saturating_add(AUDIO_SLACK_WINDOW_NS) >= now)
            .map(|(_, early)| *early)
            .min()
            .unwrap_or(0);
        early.max(0) as u64
    }

    /// How a frame of `kind` that arrived at running time `now` may move the timeline,
    /// and the running time a new anchor gets. Video anchors a new timeline: audio waits
    /// up to [`VIDEO_START_WAIT_NS`] for it, and anchors at the end of that wait when no
    /// video came.
    fn anchoring(&self, kind: MediaKind, dts: i64, now: u64, jump: bool) -> (Anchoring, u64) {
        match kind {
            MediaKind::Audio if self.awaits_video() => {
                (Anchoring::WhenLate, now.saturating_add(VIDEO_START_WAIT_NS))
            }
            MediaKind::Audio => (Anchoring::WhenLate, now),
            MediaKind::Video if self.audio_leading(now) => {
                // How much earlier a jump may bring playback: down to its own arrival
                // and to the end of the audio already out (pictures before it would be
                // shown against audio of the old mapping), but no further than the
                // audio came early lately.
                let earliest = now.max(self.audio_output_end.unwrap_or(0));
                let slot = self.clock.slot(dts).filter(|_| jump);
                match slot.map(|slot| {
                    let gain = slot.saturating_sub(earliest).min(self.audio_slack(now));
                    (slot, gain)
                }) {
                    Some((slot, gain)) if gain > MIN_JUMP_GAIN_NS => {
                        (Anchoring::Always, slot - gain)
                    }
                    _ => (Anchoring::Never, now),
                }
            }
            MediaKind::Video if jump => (Anchoring::Always, now),
            MediaKind::Video => (Anchoring::WhenLate, now),
        }
    }

    /// Running time until which a frame that arrived at `arrival` should be held at
    /// `now`: audio waiting for the first video frame, or, if audio leads, an early frame.
    pub fn hold_until(
        &self,
        kind: MediaKind,
        dts: i64,
        arrival: u64,
        now: u64,
        jump: bool,
    ) -> Option<u64> {
        if kind == MediaKind::Audio && self.awaits_video() {
            let until = arrival.saturating_add(VIDEO_START_WAIT_NS);
            return (until > now).then_some(until);
        }
        if !self.audio_leads {
            return None;
        }
        match self.anchoring(kind, dts, arrival, jump) {
            (Anchoring::Always, at) => {
                (at > now.saturating_add(RELEASE_LEAD_NS)).then(|| at - RELEASE_LEAD_NS)
            }
            _ => self.clock.hold_until(dts, now, RELEASE_LEAD_NS),
        }
    }

    /// Stamps a frame of `kind` (`duration` timescale units long) that arrived at running
    /// time `now`; `jump`: playback skipped media to reach it.
    #[allow(clippy::too_many_arguments)]
    pub fn stamp(
        &mut self,
        kind: MediaKind,
        track: &mut TrackPlayout,
        dts: i64,
        pts: i64,
        now: u64,
        duration: u64,
        jump: bool,
    ) -> Stamped {
        let (anchoring, at) = self.anchoring(kind, dts, now, jump);
        let stamped = self.clock.stamp_as(track, dts, pts, at, anchoring);
        if kind == MediaKind::Audio {
            let length = duration.saturating_mul(NS_PER_UNIT as u64);
            self.audio_output_end = Some(stamped.dts.saturating_add(length));
            let early = signed(stamped.dts).saturating_sub(signed(now));
            self.audio_slack.push_back((now, early));
            while self
                .audio_slack
                .front()
                .is_some_and(|(t, _)| t.saturating_add(AUDIO_SLACK_WINDOW_NS) < now)
            {
                self.audio_slack.pop_front();
            }
        }
        stamped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const FRAME_US: i64 = 41_667;

    #[test]
    fn continuous_media_plays_at_one_x_from_the_first_frame() {
        let mut v = TrackPlayout::default();
        let mut clock = PlayoutClock::new(100 * MS);
        let first = clock.stamp(&mut v, 5_000_000, 5_083_334, 7 * MS);
        assert_eq!(first.dts, 7 * MS);
        assert_eq!(first.pts, 7 * MS + 83_334_000);
        assert!(first.discont);
        // Frames arriving with jitter keep their media spacing.
        for i in 1..50 {
            let s = clock.stamp(
                &mut v,
                5_000_000 + i * FRAME_US,
                5_000_000 + i * FRAME_US,
                7 * MS + i as u64 * 40 * MS + 30 * MS,
            );
            assert_eq!(s.dts, 7 * MS + i as u64 * FRAME_US as u64 * 1000);
            assert!(!s.discont);
        }
    }

    #[test]
    fn a_frame_later_than_the_latency_re_anchors_playback() {
        let mut v = TrackPlayout::default();
        let mut clock = PlayoutClock::new(100 * MS);
        clock.stamp(&mut v, 0, 0, 0);
        // Slot of frame 1 is 41.667 ms; arriving 200 ms later than that is a rebuffer.
        let late = clock.stamp(&mut v, FRAME_US, FRAME_US, 242 * MS);
        assert!(late.discont);
        assert_eq!(late.dts, 242 * MS);
        // Later frames are timed relative to the resume point, not the original start.
        let next = clock.stamp(&mut v, 2 * FRAME_US, 2 * FRAME_US, 250 * MS);
        assert!(!next.discont);
        assert_eq!(next.dts, 242 * MS + FRAME_US as u64 * 1000);
    }

    #[test]
    fn kept_mappings_leave_media_before_a_move_at_its_slot() {
        let mut clock = PlayoutClock::new(100 * MS);
        clock.set_keeps_earlier(true);
        let mut audio = TrackPlayout::default();
        clock.stamp(&mut audio, 0, 0, 1000 * MS);
        // Media 2000 ms comes 200 ms late: it rebuffers, media before keeps its slots.
        let r = clock.stamp(&mut audio, 2_000_000, 2_000_000, 3200 * MS);
        assert!(r.reanchored);
        assert_eq!(clock.slot(1_900_000), Some(2900 * MS));
        assert_eq!(clock.slot(2_100_000), Some(3300 * MS));
        // A frame decoded before the move and shown after it is shown on the new slots.
        let p = clock.stamp(
            &mut TrackPlayout::default(),
            1_950_000,
            2_050_000,
            2950 * MS,
        );
        assert_eq!((p.dts, p.pts), (2950 * MS, 3250 * MS));
        // A shift from media 2500 ms moves what follows only.
        clock.shift_from(2_500_000, 30 * MS as i64);
        assert_eq!(clock.slot(2_400_000), Some(3600 * MS));
        assert_eq!(clock.slot(2_500_000), Some(3730 * MS));
        assert_eq!(clock.offset(), Some(1230 * MS as i64));
        for i in 0..100 {
            clock.shift_from(3_000_000 + i * 1_000, 1);
        }
        assert_eq!(clock.earlier.len(), MAX_EARLIER);
        // Not kept, a shift moves every slot, and a jump starts over.
        clock.set_keeps_earlier(false);
        clock.shift_from(5_000_000, 10 * MS as i64);
        assert_eq!(clock.slot(0), Some((1000 + 230 + 10) * MS + 100));
        clock.set_keeps_earlier(true);
        clock.stamp(&mut audio, 9_000_000, 9_000_000, 20_000 * MS);
        clock.stamp_with(&mut audio, 10_000_000, 10_000_000, 20_100 * MS, true);
        assert_eq!(clock.slot(0), Some(10_100 * MS));
    }

    #[test]
    fn a_frame_within_the_latency_is_not_a_rebuffer() {
        let mut v = TrackPlayout::default();
        let mut clock = PlayoutClock::new(100 * MS);
        clock.stamp(&mut v, 0, 0, 0);
        let s = clock.stamp(&mut v, FRAME_US, FRAME_US, 140 * MS);
        assert!(!s.discont);
        assert_eq!(s.dts, FRAME_US as u64 * 1000);
    }

    #[test]
    fn jumps_and_resets_re_anchor_and_dts_never_decreases() {
        let mut v = TrackPlayout::default();
        let mut clock = PlayoutClock::new(100 * MS);
        clock.stamp(&mut v, 10 * FRAME_US, 10 * FRAME_US, 500 * MS);
        // A jump to much newer media plays at once.
        let j = clock.stamp_with(&mut v, 100 * FRAME_US, 100 * FRAME_US, 510 * MS, true);
        assert!(j.discont);
        assert_eq!(j.dts, 510 * MS);
        // A sender that steps back in time cannot make DTS go backwards.
        let back = clock.stamp(&mut v, 99 * FRAME_US, 99 * FRAME_US, 520 * MS);
        assert!(back.dts >= j.dts);
        clock.reset();
        assert!(clock.stamp(&mut v, 0, 0, 600 * MS).discont);
    }

    #[test]
    fn a_decode_timestamp_raised_to_keep_order_leaves_the_frame_at_its_slot() {
        let mut v = TrackPlayout::default();
        let mut clock = PlayoutClock::new(100 * MS);
        clock.stamp(&mut v, 0, 0, 1000 * MS);
        let p = clock.stamp(&mut v, 100_000, 300_000, 1000 * MS);
        assert_eq!((p.dts, p.pts), (1100 * MS, 1300 * MS));
        // A keyframe whose derived DTS fell behind the frame before: DTS is raised, PTS
        // stays at its slot.
        let k = clock.stamp(&mut v, 60_000, 180_000, 1000 * MS);
        assert_eq!((k.dts, k.pts), (1100 * MS, 1180 * MS));
        // Raised past its PTS, it is shown no earlier than it is decoded.
        let b = clock.stamp(&mut v, 40_000, 50_000, 1000 * MS);
        assert_eq!((b.dts, b.pts), (1100 * MS, 1100 * MS));
    }

    #[test]
    fn extreme_timestamps_do_not_overflow() {
        let mut v = TrackPlayout::default();
        let mut clock = PlayoutClock::new(0);
        clock.stamp(&mut v, i64::MIN, i64::MIN, 0);
        let s = clock.stamp(&mut v, i64::MAX, i64::MAX, 1);
        assert!(s.discont);
        let s = clock.stamp(&mut v, i64::MAX, i64::MIN, 2);
        assert_eq!(s.pts, s.dts);
        // A composition offset beyond what nanoseconds can hold saturates.
        let s = clock.stamp(&mut v, i64::MIN, i64::MAX, u64::MAX - 1);
        assert_eq!(s.pts, u64::MAX);
    }

    #[test]
    fn tracks_share_one_timeline_and_a_jump_moves_them_all() {
        let mut clock = PlayoutClock::new(100 * MS);
        let (mut video, mut audio) = (TrackPlayout::default(), TrackPlayout::default());
        // Video anchors; audio of the same media time maps to the same running time.
        clock.stamp(&mut video, 1_000_000, 1_083_333, 50 * MS);
        let a = clock.stamp(&mut audio, 1_083_333, 1_083_333, 60 * MS);
        assert_eq!(a.pts, 50 * MS + 83_333_000);
        assert!(a.discont, "a track's first buffer is a discontinuity");
        assert!(!a.reanchored);
        let a = clock.stamp(&mut audio, 1_103_333, 1_103_333, 70 * MS);
        assert!(!a.discont);
        // Video jumps 2 s ahead: audio from before the new anchor is stale, newer audio
        // plays relative to it, and its next buffer is marked.
        let j = clock.stamp_with(&mut video, 3_000_000, 3_000_000, 400 * MS, true);
        assert!(j.reanchored && j.discont);
        let fresh = TrackPlayout::default();
        assert!(clock.is_passed(&fresh, 2_999_999, 20_000));
        assert!(!clock.is_passed(&fresh, 3_000_000, 20_000));
        let a = clock.stamp(&mut audio, 3_020_000, 3_020_000, 405 * MS);
        assert!(a.discont && !a.reanchored);
        assert_eq!(a.pts, 400 * MS + 20 * MS);
        // A late audio frame re-anchors for everyone: video's next frame is marked.
        let late = clock.stamp(&mut audio, 3_040_000, 3_040_000, 700 * MS);
        assert!(late.reanchored);
        let v = clock.stamp(&mut video, 3_041_667, 3_041_667, 701 * MS);
        assert!(v.discont && !v.reanchored);
        assert_eq!(v.dts, 700 * MS + 1_667_000);
    }

    #[test]
    fn a_reset_forgets_every_tracks_last_stamp() {
        let mut clock = PlayoutClock::new(100 * MS);
        let mut t = TrackPlayout::default();
        clock.stamp(&mut t, 0, 0, 900 * MS);
        clock.reset();
        assert!(!clock.is_passed(&t, i64::MIN, 0));
        // The new timeline may start below the old one's last DTS.
        let s = clock.stamp(&mut t, 0, 0, 500 * MS);
        assert_eq!(s.dts, 500 * MS);
        assert!(s.reanchored);
    }

    #[test]
    fn a_following_track_never_moves_the_timeline() {
        let mut clock = PlayoutClock::new(100 * MS);
        let (mut audio, mut video) = (TrackPlayout::default(), TrackPlayout::default());
        // Video comes first and anchors (nothing else has).
        let v = clock.stamp_as(&mut video, 0, 0, 10 * MS, Anchoring::Never);
        assert!(v.reanchored);
        // Audio, the leading track, re-anchors when late...
        let a = clock.stamp(&mut audio, 100_000, 100_000, 300 * MS);
        assert!(a.reanchored);
        // ... video behind it keeps its slot, marked late, and so does a video jump.
        let late = clock.stamp_as(&mut video, 41_667, 41_667, 400 * MS, Anchoring::Never);
        assert!(late.late && !late.reanchored);
        assert_eq!(late.dts, 300 * MS - 58_333_000);
        let jump = clock.stamp_as(&mut video, 500_000, 500_000, 420 * MS, Anchoring::Never);
        assert!(!jump.late && !jump.reanchored);
        assert_eq!(jump.dts, 700 * MS);
        // The leading track still plays on its own timeline.
        let a = clock.stamp(&mut audio, 120_000, 120_000, 320 * MS);
        assert!(!a.reanchored && !a.discont);
        assert_eq!(a.pts, 320 * MS);
    }

    #[test]
    fn early_frames_are_held_until_a_lead_before_their_slot() {
        let mut clock = PlayoutClock::new(100 * MS);
        let mut a = TrackPlayout::default();
        assert_eq!(clock.hold_until(0, 0, 20 * MS), None, "no timeline yet");
        clock.stamp(&mut a, 0, 0, 1_000 * MS);
        assert_eq!(clock.slot(500_000), Some(1_500 * MS));
        // Half a second early: held until 20 ms before its slot.
        assert_eq!(
            clock.hold_until(500_000, 1_000 * MS, 20 * MS),
            Some(1_480 * MS)
        );
        // Within the lead, or late: it goes now.
        assert_eq!(clock.hold_until(500_000, 1_490 * MS, 20 * MS), None);
        assert_eq!(clock.hold_until(500_000, 1_700 * MS, 20 * MS), None);
    }

    #[test]
    fn a_timeline_moved_earlier_passes_the_audio_it_would_overlap() {
        const AUDIO_US: u64 = 20_000;
        const AUDIO: i64 = AUDIO_US as i64;
        let mut clock = PlayoutClock::new(100 * MS);
        let (mut audio, mut video) = (TrackPlayout::default(), TrackPlayout::default());
        // Audio anchors at 600 ms: frame n (media 20n ms) plays at 600 + 20n ms.
        for n in 0..10 {
            let a = clock.stamp(&mut audio, n * AUDIO, n * AUDIO, 600 * MS);
            assert_eq!(a.dts, (600 + 20 * n as u64) * MS);
        }
        // Audio output so far ends at 600 + 200 ms. A video keyframe of media 100 ms
        // moves the timeline 400 ms earlier: it plays at 300 ms.
        let k = clock.stamp_with(&mut video, 100_000, 100_000, 300 * MS, true);
        assert!(k.reanchored);
        // Media before the keyframe was skipped; media whose new slot lies inside the
        // audio already out (until 800 ms, i.e. media up to 600 ms) overlaps it.
        assert!(clock.is_passed(&audio, 80_000, AUDIO_US));
        assert!(clock.is_passed(&audio, 200_000, AUDIO_US));
        assert!(clock.is_passed(&audio, 580_000, AUDIO_US));
        // Within half a frame of the end it plays, and continues the output seamlessly.
        assert!(!clock.is_passed(&audio, 600_000, AUDIO_US));
        assert!(!clock.is_passed(&audio, 590_000, AUDIO_US));
        let next = clock.stamp(&mut audio, 600_000, 600_000, 310 * MS);
        assert_eq!(next.dts, 800 * MS);
        assert!(next.discont && !next.reanchored);
        // The next frame in sequence is never passed.
        assert!(!clock.is_passed(&audio, 620_000, AUDIO_US));
    }

    /// An audio-led timeline: audio anchors with media 0 at 1000 ms, then frame n (20 ms,
    /// media 20n ms, slot 1000 + 20n ms) arrives `early_ms` before its slot, up to media
    /// `until_ms`.
    fn audio_led(until_ms: u64, early_ms: u64) -> (Timeline, TrackPlayout) {
        let mut timeline = Timeline::new(100 * MS);
        timeline.set_audio_leads(true);
        let mut audio = TrackPlayout::default();
        for ms in (0..=until_ms).step_by(20) {
            let media = ms as i64 * 1000;
            let arrival = 1000 + ms - if ms == 0 { 0 } else { early_ms };
            let a = timeline.stamp(
                MediaKind::Audio,
                &mut audio,
                media,
                media,
                arrival * MS,
                20_000,
                false,
            );
            assert_eq!(a.dts, (1000 + ms) * MS);
        }
        (timeline, audio)
    }

    /// A video jump to the keyframe of media `media_us` that arrived at `at_ms`.
    fn jump_to(
        timeline: &mut Timeline,
        video: &mut TrackPlayout,
        media_us: i64,
        at_ms: u64,
    ) -> Stamped {
        timeline.stamp(
            MediaKind::Video,
            video,
            media_us,
            media_us,
            at_ms * MS,
            41_667,
            true,
        )
    }

    #[test]
    fn a_video_jump_that_brings_playback_earlier_moves_an_audio_led_timeline() {
        // Audio came 300 ms early for the last 3 s; its output ends at 4720 ms.
        let (mut timeline, audio) = audio_led(3700, 300);
        let mut video = TrackPlayout::default();
        // The keyframe of media 4200 ms arrives at 4800 ms: its slot (5200 ms) is 400 ms
        // away, but the audio allows 300: the timeline moves 300 ms earlier.
        assert_eq!(
            timeline.hold_until(MediaKind::Video, 4_200_000, 4800 * MS, 4800 * MS, true),
            Some(4900 * MS - RELEASE_LEAD_NS)
        );
        let k = jump_to(&mut timeline, &mut video, 4_200_000, 4800);
        assert!(k.reanchored);
        assert_eq!(k.dts, 4900 * MS);
        // Audio that would overlap what is out is passed; the next plays on from there.
        assert!(timeline.is_passed(&audio, 3_900_000, 20_000));
        assert!(timeline.is_passed(&audio, 4_000_000, 20_000));
        assert!(!timeline.is_passed(&audio, 4_020_000, 20_000));
    }

    #[test]
    fn a_video_jump_lands_no_earlier_than_the_end_of_the_audio_out() {
        // The jump is decided late (the player waited for a missing frame): audio is out
        // up to 5020 ms, beyond the keyframe's arrival. Pictures before 5020 ms would
        // be shown against audio of the old mapping: the move stops there, 180 ms.
        let (mut timeline, audio) = audio_led(4000, 300);
        let mut video = TrackPlayout::default();
        assert_eq!(
            timeline.hold_until(MediaKind::Video, 4_200_000, 4800 * MS, 4800 * MS, true),
            Some(5020 * MS - RELEASE_LEAD_NS)
        );
        let k = jump_to(&mut timeline, &mut video, 4_200_000, 4800);
        assert!(k.reanchored);
        assert_eq!(k.dts, 5020 * MS);
        assert!(timeline.is_passed(&audio, 4_180_000, 20_000));
        assert!(!timeline.is_passed(&audio, 4_200_000, 20_000));
        // Less than the least gain left: the jump keeps its slot.
        let (mut timeline, _) = audio_led(4100, 300);
        let k = jump_to(&mut timeline, &mut TrackPlayout::default(), 4_200_000, 4800);
        assert!(!k.reanchored);
        assert_eq!(k.dts, 5200 * MS);
    }

    #[test]
    fn a_video_jump_moves_no_earlier_than_the_audio_came_lately() {
        // Audio only 50 ms early: no move, whatever the keyframe gains.
        let (mut timeline, _) = audio_led(4000, 50);
        let mut video = TrackPlayout::default();
        let k = jump_to(&mut timeline, &mut video, 4_200_000, 4800);
        assert!(!k.reanchored);
        assert_eq!(k.dts, 5200 * MS);
    }

    #[test]
    fn audio_behind_a_jump_plays_up_to_it_without_a_hole() {
        // Audio output ends at media 4000 ms (slot 5000-5020 ms) while the keyframe of
        // media 4500 ms arrives at 5200 ms: the audio pad runs behind its slots.
        let (mut timeline, audio) = audio_led(4000, 300);
        let mut video = TrackPlayout::default();
        let k = jump_to(&mut timeline, &mut video, 4_500_000, 5200);
        assert!(k.reanchored);
        assert_eq!(k.dts, 5200 * MS);
        // The timeline moved 300 ms earlier: media 4300 ms would start at 5000 ms, inside
        // what is out; media 4320 ms starts at 5020 ms, where the output ends. It plays,
        // although it lies before the keyframe.
        assert!(timeline.is_passed(&audio, 4_300_000, 20_000));
        assert!(!timeline.is_passed(&audio, 4_320_000, 20_000));
    }

    #[test]
    fn a_video_jump_gaining_little_follows_an_audio_led_timeline() {
        let (mut timeline, _) = audio_led(4000, 300);
        let mut video = TrackPlayout::default();
        // 50 ms early: not worth cutting audio for. It keeps its slot and is held until
        // just before it.
        assert_eq!(
            timeline.hold_until(MediaKind::Video, 4_150_000, 5100 * MS, 5100 * MS, true),
            Some(5150 * MS - RELEASE_LEAD_NS)
        );
        let k = jump_to(&mut timeline, &mut video, 4_150_000, 5100);
        assert!(!k.reanchored);
        assert_eq!(k.dts, 5150 * MS);
        // A late video frame keeps its slot too: audio leads.
        let late = timeline.stamp(
            MediaKind::Video,
            &mut video,
            4_160_000,
            4_160_000,
            5400 * MS,
            41_667,
            false,
        );
        assert!(late.late && !late.reanchored);
    }

    #[test]
    fn a_late_joiners_older_video_group_anchors_and_audio_plays_without_a_hole() {
        for audio_leads in [true, false] {
            let mut timeline = Timeline::new(100 * MS);
            timeline.set_audio_leads(audio_leads);
            timeline.set_has_video(true);
            let (mut audio, mut video) = (TrackPlayout::default(), TrackPlayout::default());
            // The newest audio (media 2700 ms) comes first, at 10 ms: it waits for video.
            let wait = timeline.hold_until(MediaKind::Audio, 2_700_000, 10 * MS, 10 * MS, false);
            assert_eq!(wait, Some(10 * MS + VIDEO_START_WAIT_NS));
            // The relay's current GoP starts at media 1500 ms and arrives at 90 ms: it
            // anchors the timeline.
            let k = timeline.stamp(
                MediaKind::Video,
                &mut video,
                1_500_000,
                1_500_000,
                90 * MS,
                41_667,
                false,
            );
            assert!(k.reanchored);
            assert_eq!(k.dts, 90 * MS);
            // The audio now has its slot on the video's timeline, and plays from there
            // on, frame after frame.
            let slot = 90 * MS + 1_200 * MS;
            let held = timeline.hold_until(MediaKind::Audio, 2_700_000, 10 * MS, 100 * MS, false);
            assert_eq!(held, audio_leads.then_some(slot - RELEASE_LEAD_NS));
            for n in 0..5u64 {
                let media = 2_700_000 + n as i64 * 20_000;
                let a = timeline.stamp(
                    MediaKind::Audio,
                    &mut audio,
                    media,
                    media,
                    (10 + 20 * n) * MS,
                    20_000,
                    false,
                );
                assert!(!a.reanchored);
                assert_eq!(a.dts, slot + n * 20 * MS);
            }
        }
    }

    #[test]
    fn audio_waits_for_video_only_so_long() {
        let mut timeline = Timeline::new(100 * MS);
        timeline.set_audio_leads(true);
        timeline.set_has_video(true);
        let mut audio = TrackPlayout::default();
        let until = 10 * MS + VIDEO_START_WAIT_NS;
        assert_eq!(
            timeline.hold_until(MediaKind::Audio, 0, 10 * MS, until - 1, false),
            Some(until)
        );
        assert_eq!(
            timeline.hold_until(MediaKind::Audio, 0, 10 * MS, until, false),
            None
        );
        // No video came: audio anchors where its wait ended, not in the past.
        let a = timeline.stamp(MediaKind::Audio, &mut audio, 0, 0, 10 * MS, 20_000, false);
        assert!(a.reanchored);
        assert_eq!(a.dts, until);
        // Without a video track, audio plays at once.
        let mut timeline = Timeline::new(100 * MS);
        assert_eq!(
            timeline.hold_until(MediaKind::Audio, 0, 10 * MS, 10 * MS, false),
            None
        );
        let a = timeline.stamp(
            MediaKind::Audio,
            &mut TrackPlayout::default(),
            0,
            0,
            10 * MS,
            20_000,
            false,
        );
        assert_eq!(a.dts, 10 * MS);
    }

    #[test]
    fn audio_held_long_before_its_slot_keeps_the_lead_over_late_video() {
        // An adaptive timeline 1.2 s deep: audio comes 1.2 s before its slot, waits, and
        // plays without a break; its latest frame (media 4000 ms) arrived at 3800 ms and
        // plays at 5000 ms.
        let mut timeline = Timeline::new(100 * MS);
        timeline.set_adaptive(true);
        timeline.set_audio_leads(true);
        let mut audio = TrackPlayout::default();
        for ms in (0..=4000u64).step_by(20) {
            let media = ms as i64 * 1000;
            let arrival = (1000 + ms).saturating_sub(1200).max(1000);
            let a = timeline.stamp(
                MediaKind::Audio,
                &mut audio,
                media,
                media,
                arrival * MS,
                20_000,
                false,
            );
            assert_eq!(a.dts, (1000 + ms) * MS);
        }
        // Video comes 300 ms later than the timeline allows. At 4900 ms, 1.1 s after the
        // latest audio arrived but while it plays, audio still leads: the video follows
        // and does not move the timeline under the audio already out.
        let need = |extra_ms: i64| Need {
            offset: (1000 + extra_ms) * MS as i64,
            floor: 1000 * MS as i64,
            settled: true,
        };
        timeline.set_need(MediaKind::Video, Some(need(300)));
        assert_eq!(
            timeline.adapt(MediaKind::Video, 4_000_000, 4900 * MS, 41_667),
            None
        );
        assert_eq!(timeline.offset(), Some(1000 * MS as i64));
        // Once audio stopped playing over a second ago, the video grows the timeline.
        let grown = timeline.adapt(MediaKind::Video, 4_100_000, 6100 * MS, 41_667);
        assert!(matches!(grown, Some(Adapted::Grew(_))), "{grown:?}");
    }

    #[test]
    fn without_a_leading_audio_track_nothing_is_held_and_jumps_always_move() {
        let mut timeline = Timeline::new(100 * MS);
        let mut video = TrackPlayout::default();
        timeline.stamp(MediaKind::Video, &mut video, 0, 0, 1000 * MS, 41_667, false);
        assert_eq!(
            timeline.hold_until(MediaKind::Video, 500_000, 1000 * MS, 1000 * MS, false),
            None
        );
        let j = jump_to(&mut timeline, &mut video, 150_000, 1100);
        assert!(j.reanchored);
        // Audio that led once but stopped over a second ago gives the timeline back.
        let (mut timeline, _) = audio_led(0, 0);
        let late = timeline.stamp(
            MediaKind::Video,
            &mut video,
            40_000,
            40_000,
            2500 * MS,
            41_667,
            false,
        );
        assert!(late.reanchored);
    }
}
