//! Playout clock: maps media timestamps to the receiver's running time.
//!
//! A live source stamps each buffer with the running time at which it "captured" it;
//! downstream sinks render at that time plus the pipeline latency. The mapping is an
//! offset fixed at an anchor frame, so continuous media plays at 1×. When a frame would
//! already be too late to render (its slot plus the buffering latency has passed), the
//! player has rebuffered: the offset is re-anchored on that frame, relative to the point
//! where playback resumes rather than the absolute start (thesis Algorithm 1), and the
//! frame is flagged as a discontinuity.
//!
//! No clock is read here: callers pass `now` in nanoseconds of running time.

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

/// The media → running-time mapping of one broadcast, shared by all its tracks so they
/// stay in sync: a re-anchor on one track moves every track.
#[derive(Debug, Clone)]
pub struct PlayoutClock {
    latency_ns: u64,
    anchor: Option<Anchor>,
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
            anchors: 0,
            resets: 0,
        }
    }

    /// Forgets the timeline; the next frame of any track plays at once.
    pub fn reset(&mut self) {
        self.anchor = None;
        self.resets += 1;
    }

    fn map(anchor: Anchor, media: i64) -> Option<u64> {
        let delta = media.checked_sub(anchor.media)?.checked_mul(NS_PER_UNIT)?;
        anchor.running.checked_add_signed(delta)
    }

    /// Whether media time `media` lies before the anchor: after a jump such media was
    /// skipped, and a track that still has some drops it rather than moving the timeline
    /// back.
    pub fn is_before_anchor(&self, media: i64) -> bool {
        self.anchor.is_some_and(|a| media < a.media)
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

    /// Stamps a frame of a track that follows another track's timeline: it anchors the
    /// timeline only if there is none, so a late frame keeps its slot (and is `late`) and
    /// a jump on this track does not move the others.
    pub fn stamp_following(
        &mut self,
        track: &mut TrackPlayout,
        dts: i64,
        pts: i64,
        now: u64,
    ) -> Stamped {
        self.stamp_as(track, dts, pts, now, Anchoring::Never)
    }

    /// Stamps a frame, re-anchoring the timeline on it as `anchoring` says.
    pub fn stamp_as(
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
        let slot = self
            .anchor
            .filter(|_| anchoring != Anchoring::Always)
            .and_then(|a| Self::map(a, dts));
        let on_time = |running: &u64| running.saturating_add(self.latency_ns) >= now;
        let late = slot.as_ref().is_some_and(|r| !on_time(r));
        let kept = match anchoring {
            Anchoring::Never => slot,
            Anchoring::WhenLate | Anchoring::Always => slot.filter(on_time),
        };
        let (dts_running, reanchored) = match kept {
            Some(running) => (running, false),
            None => {
                self.anchor = Some(Anchor {
                    media: dts,
                    running: now,
                });
                self.anchors += 1;
                (now, true)
            }
        };
        let discont = reanchored || track.anchors != self.anchors;
        track.anchors = self.anchors;
        // Decode timestamps must never go backwards, whatever the sender did.
        let dts_running = track.last_dts.map_or(dts_running, |l| dts_running.max(l));
        track.last_dts = Some(dts_running);
        let pts_offset = (pts.saturating_sub(dts).max(0) as u64).saturating_mul(NS_PER_UNIT as u64);
        Stamped {
            dts: dts_running,
            pts: dts_running.saturating_add(pts_offset),
            discont,
            reanchored,
            late: late && !reanchored,
        }
    }
}

/// When a frame re-anchors the timeline (it always does when there is no anchor yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchoring {
    /// When it would otherwise be later than the latency allows (a rebuffer).
    WhenLate,
    /// Always: the caller jumped over media.
    Always,
    /// Never: the frame follows the timeline another track sets.
    Never,
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
        assert!(clock.is_before_anchor(2_999_999));
        assert!(!clock.is_before_anchor(3_000_000));
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
        assert!(!clock.is_before_anchor(i64::MIN));
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
        let v = clock.stamp_following(&mut video, 0, 0, 10 * MS);
        assert!(v.reanchored);
        // Audio, the leading track, re-anchors when late...
        let a = clock.stamp(&mut audio, 100_000, 100_000, 300 * MS);
        assert!(a.reanchored);
        // ... video behind it keeps its slot, marked late, and so does a video jump.
        let late = clock.stamp_following(&mut video, 41_667, 41_667, 400 * MS);
        assert!(late.late && !late.reanchored);
        assert_eq!(late.dts, 300 * MS - 58_333_000);
        let jump = clock.stamp_following(&mut video, 500_000, 500_000, 420 * MS);
        assert!(!jump.late && !jump.reanchored);
        assert_eq!(jump.dts, 700 * MS);
        // The leading track still plays on its own timeline.
        let a = clock.stamp(&mut audio, 120_000, 120_000, 320 * MS);
        assert!(!a.reanchored && !a.discont);
        assert_eq!(a.pts, 320 * MS);
    }
}
