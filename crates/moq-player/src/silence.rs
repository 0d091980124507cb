//! When a relay's route to the publisher has gone quiet: media stops while the session
//! lives.
//!
//! A relay may keep a subscription on a route that no longer carries anything (moq-relay
//! keeps it on the cluster peer the publisher first came through, and may learn that peer
//! is gone only at QUIC's idle timeout), while a new SUBSCRIBE on the same session takes a
//! route that works. The receiver then subscribes again, but only once the silence is
//! unusual for the stream: longer than [`MIN_SILENCE_US`] and than [`GAP_FACTOR`] times the
//! longest recent gap between frames, so a stream of one frame a second or a path that
//! stalls now and then does not subscribe again at every pause, and never while the
//! receiver expects a pause (a rendition switch waiting for its keyframe). Each silence is
//! acted on once; what else is wrong with the session is the failover's and the media timeout's.

/// No silence shorter than this is suspect: a keyframe's transfer and a congested
/// path's stalls are shorter.
pub const MIN_SILENCE_US: u64 = 500_000;
/// A silence is suspect past this many times the longest recent gap between frames.
pub const GAP_FACTOR: u64 = 4;
/// The longest gap seen is remembered with this half-life.
pub const GAP_HALF_LIFE_US: u64 = 10_000_000;

/// Watches the frames of a broadcast's tracks arrive (time as an input, µs).
#[derive(Debug, Default, Clone)]
pub struct SilenceWatch {
    /// When the latest frame came.
    last: Option<u64>,
    /// The longest gap between frames, as it stood at `longest_at`.
    longest: u64,
    longest_at: u64,
    /// The silence since `last` was acted on.
    acted: bool,
}

impl SilenceWatch {
    /// A frame came at `now`.
    pub fn arrived(&mut self, now: u64) {
        if let Some(last) = self.last {
            // A gap that was acted on was the route's, not the stream's.
            let gap = now.saturating_sub(last);
            if !self.acted && gap > self.longest_recent(now) {
                self.longest = gap;
                self.longest_at = now;
            }
        }
        self.last = Some(now.max(self.last.unwrap_or(0)));
        self.acted = false;
    }

    /// The longest gap between frames lately, decayed by its age.
    fn longest_recent(&self, now: u64) -> u64 {
        let halvings = now.saturating_sub(self.longest_at) / GAP_HALF_LIFE_US;
        self.longest.checked_shr(halvings as u32).unwrap_or(0)
    }

    /// When the silence since the latest frame becomes suspect; `None` before a first
    /// frame, and once this silence was acted on.
    pub fn suspect_at(&self) -> Option<u64> {
        let last = self.last.filter(|_| !self.acted)?;
        let usual = self.longest_recent(last).saturating_mul(GAP_FACTOR);
        Some(last.saturating_add(usual.max(MIN_SILENCE_US)))
    }

    /// The receiver acted on the silence under way (subscribed again).
    pub fn acted(&mut self) {
        self.acted = true;
    }

    /// The silence acted on is still under way: no frame came since.
    pub fn still_silent(&self) -> bool {
        self.acted
    }

    /// A pause the receiver expects at `now` (a rendition switch waiting for its first
    /// keyframe): the silence counts from here, and is no gap of the stream's.
    pub fn hold_off(&mut self, now: u64) {
        self.last = self.last.map(|last| last.max(now));
    }

    /// New subscriptions start: the wait for their first frame is not a gap of the
    /// stream's.
    pub fn restart(&mut self) {
        self.last = None;
        self.acted = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000;

    fn frames(watch: &mut SilenceWatch, from: u64, count: u64, every: u64) -> u64 {
        for i in 0..count {
            watch.arrived(from + i * every);
        }
        from + (count - 1) * every
    }

    #[test]
    fn nothing_is_suspect_before_the_first_frame() {
        assert_eq!(SilenceWatch::default().suspect_at(), None);
    }

    #[test]
    fn a_stream_of_24_frames_a_second_is_suspect_after_half_a_second() {
        let mut watch = SilenceWatch::default();
        let last = frames(&mut watch, 0, 240, 42 * MS);
        assert_eq!(watch.suspect_at(), Some(last + MIN_SILENCE_US));
    }

    #[test]
    fn a_stream_of_one_frame_a_second_is_suspect_only_after_four() {
        let mut watch = SilenceWatch::default();
        let last = frames(&mut watch, 0, 10, 1_000 * MS);
        assert_eq!(watch.suspect_at(), Some(last + 4_000 * MS));
    }

    #[test]
    fn a_stall_makes_the_watch_patient_for_a_while_then_it_forgets() {
        let mut watch = SilenceWatch::default();
        let mut last = frames(&mut watch, 0, 100, 40 * MS);
        // A 300 ms stall of the path: 1.2 s of silence is usual for now.
        last = frames(&mut watch, last + 300 * MS, 25, 40 * MS);
        assert_eq!(watch.suspect_at(), Some(last + 1_200 * MS));
        // 40 s later the stall has halved four times over: back to the minimum.
        last = frames(&mut watch, last + 40 * MS, 1_000, 40 * MS);
        assert_eq!(watch.suspect_at(), Some(last + MIN_SILENCE_US));
    }

    #[test]
    fn a_silence_is_acted_on_once_and_does_not_teach_the_watch_patience() {
        let mut watch = SilenceWatch::default();
        let last = frames(&mut watch, 0, 50, 40 * MS);
        watch.acted();
        assert_eq!(watch.suspect_at(), None, "acted on");
        assert!(watch.still_silent());
        // Media comes back 2 s later: the next silence is suspect as soon as before.
        let back = frames(&mut watch, last + 2_000 * MS, 10, 40 * MS);
        assert!(!watch.still_silent());
        assert_eq!(watch.suspect_at(), Some(back + MIN_SILENCE_US));
    }

    #[test]
    fn the_wait_for_new_subscriptions_is_not_a_gap() {
        let mut watch = SilenceWatch::default();
        let last = frames(&mut watch, 0, 50, 40 * MS);
        watch.restart();
        assert_eq!(watch.suspect_at(), None);
        let first = last + 3_000 * MS;
        watch.arrived(first);
        assert_eq!(watch.suspect_at(), Some(first + MIN_SILENCE_US));
    }

    #[test]
    fn an_expected_pause_is_neither_suspect_nor_a_gap() {
        let mut watch = SilenceWatch::default();
        let last = frames(&mut watch, 0, 50, 40 * MS);
        // A switch waits 2 s for its keyframe, held off every 50 ms.
        let mut now = last;
        while now < last + 2_000 * MS {
            now += 50 * MS;
            watch.hold_off(now);
            assert_eq!(watch.suspect_at(), Some(now + MIN_SILENCE_US));
        }
        watch.arrived(now + 10 * MS);
        assert_eq!(watch.suspect_at(), Some(now + 10 * MS + MIN_SILENCE_US));
    }

    #[test]
    fn frames_of_several_tracks_out_of_time_order_do_not_move_it_back() {
        let mut watch = SilenceWatch::default();
        watch.arrived(1_000 * MS);
        watch.arrived(990 * MS);
        assert_eq!(watch.suspect_at(), Some(1_000 * MS + MIN_SILENCE_US));
    }
}
