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
    /// Media DTS of the anchor frame, in timescale units.
    media: i64,
    /// Running time assigned to it, in ns.
    running: u64,
}

/// Running-time stamps for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamped {
    pub dts: u64,
    pub pts: u64,
    /// The timeline was re-anchored at this frame (first frame, rebuffer or jump).
    pub discont: bool,
}

#[derive(Debug, Clone)]
pub struct PlayoutClock {
    latency_ns: u64,
    anchor: Option<Anchor>,
    last_dts: Option<u64>,
}

impl PlayoutClock {
    /// `latency_ns` is the buffering the pipeline adds after this element (what the
    /// source reports in the LATENCY query); a frame later than that is a rebuffer.
    pub fn new(latency_ns: u64) -> PlayoutClock {
        PlayoutClock {
            latency_ns,
            anchor: None,
            last_dts: None,
        }
    }

    /// Forgets the timeline; the next frame plays at once.
    pub fn reset(&mut self) {
        self.anchor = None;
        self.last_dts = None;
    }

    fn map(anchor: Anchor, media: i64) -> Option<u64> {
        let delta = media.checked_sub(anchor.media)?.checked_mul(NS_PER_UNIT)?;
        anchor.running.checked_add_signed(delta)
    }

    /// Stamps a frame output now. `dts`/`pts` are in timescale units.
    pub fn stamp(&mut self, dts: i64, pts: i64, now: u64) -> Stamped {
        self.stamp_with(dts, pts, now, false)
    }

    /// Like [`stamp`](Self::stamp), but `jump` forces a re-anchor (the caller skipped media).
    pub fn stamp_with(&mut self, dts: i64, pts: i64, now: u64, jump: bool) -> Stamped {
        let mapped = self
            .anchor
            .filter(|_| !jump)
            .and_then(|a| Self::map(a, dts))
            .filter(|running| running.saturating_add(self.latency_ns) >= now);
        let (dts_running, discont) = match mapped {
            Some(running) => (running, false),
            None => {
                self.anchor = Some(Anchor {
                    media: dts,
                    running: now,
                });
                (now, true)
            }
        };
        // Decode timestamps must never go backwards, whatever the sender did.
        let dts_running = self.last_dts.map_or(dts_running, |l| dts_running.max(l));
        self.last_dts = Some(dts_running);
        let pts_offset = (pts.saturating_sub(dts).max(0) as u64).saturating_mul(NS_PER_UNIT as u64);
        Stamped {
            dts: dts_running,
            pts: dts_running.saturating_add(pts_offset),
            discont,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const FRAME_US: i64 = 41_667;

    #[test]
    fn continuous_media_plays_at_one_x_from_the_first_frame() {
        let mut clock = PlayoutClock::new(100 * MS);
        let first = clock.stamp(5_000_000, 5_083_334, 7 * MS);
        assert_eq!(first.dts, 7 * MS);
        assert_eq!(first.pts, 7 * MS + 83_334_000);
        assert!(first.discont);
        // Frames arriving with jitter keep their media spacing.
        for i in 1..50 {
            let s = clock.stamp(
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
        let mut clock = PlayoutClock::new(100 * MS);
        clock.stamp(0, 0, 0);
        // Slot of frame 1 is 41.667 ms; arriving 200 ms later than that is a rebuffer.
        let late = clock.stamp(FRAME_US, FRAME_US, 242 * MS);
        assert!(late.discont);
        assert_eq!(late.dts, 242 * MS);
        // Later frames are timed relative to the resume point, not the original start.
        let next = clock.stamp(2 * FRAME_US, 2 * FRAME_US, 250 * MS);
        assert!(!next.discont);
        assert_eq!(next.dts, 242 * MS + FRAME_US as u64 * 1000);
    }

    #[test]
    fn a_frame_within_the_latency_is_not_a_rebuffer() {
        let mut clock = PlayoutClock::new(100 * MS);
        clock.stamp(0, 0, 0);
        let s = clock.stamp(FRAME_US, FRAME_US, 140 * MS);
        assert!(!s.discont);
        assert_eq!(s.dts, FRAME_US as u64 * 1000);
    }

    #[test]
    fn jumps_and_resets_re_anchor_and_dts_never_decreases() {
        let mut clock = PlayoutClock::new(100 * MS);
        clock.stamp(10 * FRAME_US, 10 * FRAME_US, 500 * MS);
        // A jump to much newer media plays at once.
        let j = clock.stamp_with(100 * FRAME_US, 100 * FRAME_US, 510 * MS, true);
        assert!(j.discont);
        assert_eq!(j.dts, 510 * MS);
        // A sender that steps back in time cannot make DTS go backwards.
        let back = clock.stamp(99 * FRAME_US, 99 * FRAME_US, 520 * MS);
        assert!(back.dts >= j.dts);
        clock.reset();
        assert!(clock.stamp(0, 0, 600 * MS).discont);
    }

    #[test]
    fn extreme_timestamps_do_not_overflow() {
        let mut clock = PlayoutClock::new(0);
        clock.stamp(i64::MIN, i64::MIN, 0);
        let s = clock.stamp(i64::MAX, i64::MAX, 1);
        assert!(s.discont);
        let s = clock.stamp(i64::MAX, i64::MIN, 2);
        assert_eq!(s.pts, s.dts);
        // A composition offset beyond what nanoseconds can hold saturates.
        let s = clock.stamp(i64::MIN, i64::MAX, u64::MAX - 1);
        assert_eq!(s.pts, u64::MAX);
    }
}
