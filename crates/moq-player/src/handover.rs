//! Moving a track from one session to another without a gap: make before break.
//!
//! A relay that is about to restart sends GOAWAY and grants a drain window. The receiver
//! opens a new session (the URI the GOAWAY names, the same URL, or a backup), subscribes
//! the track there from the start of the group under way where the draft allows it, and
//! keeps playing the old subscription meanwhile.
//!
//! When the new subscription carries a frame the track has played (the same presentation
//! time, kind and size: the same encoder's output, through another relay or another
//! publisher fed by that encoder), it continues the track right after the last frame
//! played, mid-group: its frames up to that one are dropped as already played, the rest
//! renumbered onto the track's numbering ([`Handover::renumber`]), and the old
//! subscription is left at once. Nothing is lost even if the old path stops delivering
//! before the next keyframe (a node whose publisher has already moved away).
//!
//! Otherwise (a new subscription that starts later, or another encoder's stream), the two
//! meet on media time, as renditions do ([`splice`](crate::splice)): the cut is the new
//! subscription's first keyframe later than anything played. Until it, the old
//! subscription's items go on to the track and the new one's are held; from it on the new
//! one's go, renumbered to continue the old numbering, and the old one's are dropped. The
//! cut happens when the old subscription reaches the keyframe's time, or when it has had
//! [`CUT_WAIT_US`](crate::splice::CUT_WAIT_US) since the keyframe came (it is the path that
//! is going away). Then the old subscription and its session can be closed.
//!
//! Free of the network and of clocks: the caller feeds items of both subscriptions with the
//! time (µs on a monotonic clock) and takes what goes to the track.

use std::collections::VecDeque;

use moq_media::FrameHeader;
use moq_media::catalog::TrackRole;

use crate::item::Item;
use crate::splice::{MAX_HELD, NewFrame, OldFrame, Renumber, Splice};

/// The base-layer frames a track played last, newest last: where a move's new subscription
/// can continue it (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct PlayedFrames {
    frames: VecDeque<(FrameHeader, usize)>,
}

impl PlayedFrames {
    /// A frame the track played, `size` bytes; a frame older than the newest is ignored.
    pub fn push(&mut self, header: FrameHeader, size: usize) {
        if self
            .last()
            .is_some_and(|last| header.decode_index <= last.decode_index)
        {
            return;
        }
        if self.frames.len() == MAX_HELD {
            self.frames.pop_front();
        }
        self.frames.push_back((header, size));
    }

    /// The newest frame played.
    pub fn last(&self) -> Option<FrameHeader> {
        self.frames.back().map(|(header, _)| *header)
    }

    /// The frame played that `header` (of `size` bytes) repeats, if any.
    fn repeated_by(&self, header: &FrameHeader, size: usize) -> Option<FrameHeader> {
        self.frames
            .iter()
            .rev()
            .find(|(played, bytes)| {
                played.pts == header.pts && played.kind == header.kind && *bytes == size
            })
            .map(|(played, _)| *played)
    }
}

/// One move, from the new subscription's start to the cut.
#[derive(Debug)]
pub struct Handover<T> {
    splice: Splice,
    /// The new subscription's items from the keyframe to cut to, until the cut.
    held: Vec<Item<T>>,
    /// Items for the track, in order.
    out: VecDeque<Item<T>>,
    /// The old subscription ended: the new one plays as soon as its keyframe is here.
    old_gone: bool,
    /// The new subscription's numbering as the track sees it, once cut.
    renumber: Option<Renumber>,
    /// The frames played, to find one the new subscription repeats; once cut, the last
    /// of them is where the new subscription's frames start to count.
    played: PlayedFrames,
}

impl<T> Default for Handover<T> {
    fn default() -> Self {
        Handover::new(PlayedFrames::default())
    }
}

impl<T> Handover<T> {
    /// A move of a track that has `played` these frames (as the track numbers them): the
    /// numbering carries on from the last even if the old subscription delivers nothing
    /// more.
    pub fn new(played: PlayedFrames) -> Handover<T> {
        Handover {
            splice: Splice::new(played.last()),
            held: Vec::new(),
            out: VecDeque::new(),
            old_gone: false,
            renumber: None,
            played,
        }
    }

    /// An item of the old subscription, numbered as the track sees it.
    pub fn old(&mut self, item: Item<T>) {
        if self.is_done() {
            return;
        }
        if let Item::Frame(frame) = &item {
            if self.splice.on_old(&frame.header) == OldFrame::Cut {
                return self.finish();
            }
            if frame.layer == TrackRole::Base {
                self.played.push(frame.header, frame.size);
            }
        }
        self.out.push_back(item);
    }

    /// An item of the new subscription, in its own numbering, at `now_us`.
    pub fn new_item(&mut self, mut item: Item<T>, now_us: u64) {
        if let Some(renumber) = self.renumber {
            renumber.item(&mut item);
            // Once cut, nothing more is played from the old path.
            if !self.was_played(&item) {
                self.out.push_back(item);
            }
            return;
        }
        if let Item::Frame(frame) = &item
            && frame.layer == TrackRole::Base
            && let Some(played) = self.played.repeated_by(&frame.header, frame.size)
        {
            return self.continue_from(&played, &frame.header);
        }
        let keep = match &item {
            Item::Frame(frame) => self.splice.on_new(&frame.header, now_us) == NewFrame::Hold,
            _ => self.splice.has_key(),
        };
        if keep {
            self.held.push(item);
        }
        if self.old_gone || self.splice.overdue(now_us) {
            self.finish();
        }
    }

    /// Cuts over if the old subscription has had its time.
    pub fn tick(&mut self, now_us: u64) {
        if self.splice.overdue(now_us) {
            self.finish();
        }
    }

    /// The old subscription ended (its session went): the new one plays from its keyframe
    /// on.
    pub fn old_ended(&mut self) {
        self.old_gone = true;
        self.finish();
    }

    /// The new subscription's frame `same` repeats the frame `played`: it takes over from
    /// the last frame played, numbered on from it. What it held goes on too, renumbered:
    /// a later group's keyframe can come before the group under way (each group is a
    /// stream of its own), and the track needs it.
    fn continue_from(&mut self, played: &FrameHeader, same: &FrameHeader) {
        self.cut(Renumber::onto(played, same));
    }

    /// The new subscription plays from now on, numbered by `renumber`; what it held goes
    /// to the track, but for frames the old path played already.
    fn cut(&mut self, renumber: Renumber) {
        self.renumber = Some(renumber);
        for mut item in std::mem::take(&mut self.held) {
            renumber.item(&mut item);
            if !self.was_played(&item) {
                self.out.push_back(item);
            }
        }
    }

    /// Whether `item` (the track's numbering) is a frame at or before the last one played:
    /// it came on the old path already.
    fn was_played(&self, item: &Item<T>) -> bool {
        let last = self.played.last();
        matches!(item, Item::Frame(frame)
            if last.is_some_and(|last| frame.header.decode_index <= last.decode_index))
    }

    fn finish(&mut self) {
        if self.is_done() {
            return;
        }
        if let Some((renumber, _missing)) = self.splice.renumber() {
            // The keyframe cut to follows the last frame played: nothing held is skipped.
            self.cut(renumber);
        }
    }

    /// Whether the new subscription plays now: the old one can be dropped.
    pub fn is_done(&self) -> bool {
        self.renumber.is_some()
    }

    /// How the new subscription's items are numbered for the track from the cut on (None
    /// before it).
    pub fn renumber(&self) -> Option<Renumber> {
        self.renumber
    }

    /// The next item for the track.
    pub fn poll_item(&mut self) -> Option<Item<T>> {
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Incoming;
    use crate::splice::CUT_WAIT_US;
    use h264::{FrameKind, SliceType};
    use moq_media::FrameHeader;
    use moq_media::catalog::TrackRole;

    const GOP: u64 = 12;

    fn frame(index: u64) -> Item<()> {
        numbered(index, 0)
    }

    /// Frame `index` of a publisher whose frames and groups are numbered from `origin`
    /// (its media time is the index's).
    fn numbered(index: u64, origin: u64) -> Item<()> {
        let key = index.is_multiple_of(GOP);
        let header = FrameHeader {
            kind: if key {
                FrameKind::Key
            } else {
                FrameKind::Reference
            },
            slice_type: if key { SliceType::I } else { SliceType::P },
            decode_index: origin + index,
            dts: index as i64 * 41_667,
            pts: index as i64 * 41_667,
            duration: 41_667,
            availability_us: 0,
            base_group: origin + index / GOP,
            base_index: origin + index,
        };
        Item::Frame(Incoming {
            epoch: 1,
            group: origin + index / GOP,
            header,
            layer: TrackRole::Base,
            size: 100,
            received_us: 0,
            data: (),
        })
    }

    /// `item` with frames of `size` bytes: another encoder's output.
    fn sized(mut item: Item<()>, size: usize) -> Item<()> {
        if let Item::Frame(frame) = &mut item {
            frame.size = size;
        }
        item
    }

    fn group_end(group: u64, last: u64) -> Item<()> {
        Item::GroupEnd {
            epoch: 1,
            group,
            complete: true,
            last: Some(last),
        }
    }

    /// The frames' (decode index, group) as the track numbers them.
    fn indices_and_groups(out: &[Item<()>]) -> Vec<(u64, u64)> {
        out.iter()
            .filter_map(|i| match i {
                Item::Frame(f) => Some((f.header.decode_index, f.header.base_group)),
                _ => None,
            })
            .collect()
    }

    fn ends_group_3_at_47(out: &[Item<()>]) -> bool {
        matches!(
            out.last(),
            Some(Item::GroupEnd {
                group: 3,
                last: Some(47),
                ..
            })
        )
    }

    fn indices(h: &mut Handover<()>) -> Vec<u64> {
        std::iter::from_fn(|| h.poll_item())
            .filter_map(|i| match i {
                Item::Frame(f) => Some(f.header.decode_index),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_old_path_plays_up_to_the_new_ones_first_group_then_the_new_one_takes_over() {
        let mut h = Handover::default();
        for i in 30..34 {
            h.old(frame(i));
        }
        // The new subscription starts at the next group, 36, while the old one still
        // delivers 34 and 35.
        for i in 36..39 {
            h.new_item(frame(i), 1_000);
        }
        h.old(frame(34));
        h.old(frame(35));
        assert!(!h.is_done());
        // The old path reaches group 3 (frame 36): cut. Its copy of 36 is not played.
        h.old(frame(36));
        assert!(h.is_done());
        h.new_item(frame(39), 2_000);
        h.old(frame(37));
        assert_eq!(indices(&mut h), (30..40).collect::<Vec<_>>());
    }

    #[test]
    fn an_old_path_that_stalls_is_cut_after_its_wait() {
        let mut h = Handover::default();
        h.old(frame(20));
        h.new_item(frame(24), 5_000);
        h.tick(5_000 + CUT_WAIT_US - 1);
        assert!(!h.is_done());
        h.tick(5_000 + CUT_WAIT_US);
        assert!(h.is_done());
        assert_eq!(indices(&mut h), [20, 24]);
    }

    #[test]
    fn nothing_is_cut_before_the_new_path_delivered_a_frame() {
        let mut h = Handover::default();
        h.old(frame(1));
        h.tick(10_000_000);
        assert!(!h.is_done(), "no cut without the new path's first frame");
        // The old session went first: the new path plays from its first frame.
        h.old_ended();
        assert!(!h.is_done());
        h.new_item(frame(12), 0);
        assert!(h.is_done());
        h.new_item(frame(13), 0);
        assert_eq!(indices(&mut h), [1, 12, 13]);
    }

    #[test]
    fn another_encoders_stream_is_cut_in_on_media_time_and_renumbered() {
        let mut h = Handover::default();
        for i in 30..34 {
            h.old(frame(i));
        }
        // Another encoder of the same source, numbering from 5000 (its frames have other
        // sizes: none repeats one played). It joined mid-group (33-35: no keyframe to
        // start on, never played), then its next group starts at 36.
        for i in 33..39 {
            h.new_item(sized(numbered(i, 5000), 90), 1_000);
        }
        h.old(frame(34));
        h.old(frame(35));
        assert!(!h.is_done());
        h.old(frame(36));
        assert!(h.is_done(), "the old path reached the keyframe's time");
        h.new_item(sized(numbered(39, 5000), 90), 2_000);
        h.new_item(group_end(5003, 5047), 2_000);
        let out: Vec<_> = std::iter::from_fn(|| h.poll_item()).collect();
        let frames = indices_and_groups(&out);
        let expected: Vec<(u64, u64)> = (30..40).map(|i| (i, i / GOP)).collect();
        assert_eq!(frames, expected, "one numbering across the cut");
        assert!(ends_group_3_at_47(&out), "the group end renumbered");
        let renumber = h.renumber().expect("cut");
        assert_eq!(renumber.group(5004), 4);
    }

    /// The frames `range` of [`frame`] as played before a move.
    fn played(range: std::ops::Range<u64>) -> PlayedFrames {
        let mut played = PlayedFrames::default();
        for i in range {
            let Item::Frame(f) = frame(i) else {
                unreachable!()
            };
            played.push(f.header, f.size);
        }
        played
    }

    #[test]
    fn a_new_path_repeating_a_frame_played_continues_right_after_the_last_one_played() {
        // 24 (a keyframe) to 33 played before the move; the old path then delivers nothing
        // more (its node's publisher has left). The new path starts at the group under way.
        let mut h = Handover::new(played(24..34));
        h.new_item(frame(24), 1_000);
        assert!(
            h.is_done(),
            "its keyframe repeats one played: the new path takes over"
        );
        for i in 25..40 {
            h.new_item(frame(i), 1_000);
        }
        h.old(frame(34));
        assert_eq!(
            indices(&mut h),
            (34..40).collect::<Vec<_>>(),
            "on from the last frame played, each frame once, the next keyframe not waited for"
        );
    }

    #[test]
    fn a_new_path_behind_the_old_one_drops_what_the_old_one_played_meanwhile() {
        let mut h = Handover::default();
        for i in 36..41 {
            h.old(frame(i));
        }
        // Another publisher of the same encoder's output, numbering from 900, starts at
        // the group the old path plays; its first frames come after the old path's.
        for i in 36..46 {
            h.new_item(numbered(i, 900), 1_000);
        }
        h.old(frame(41));
        h.new_item(group_end(903, 947), 1_000);
        let out: Vec<_> = std::iter::from_fn(|| h.poll_item()).collect();
        let frames = indices_and_groups(&out);
        let expected: Vec<(u64, u64)> = (36..46).map(|i| (i, i / GOP)).collect();
        assert_eq!(frames, expected, "one numbering, each frame once");
        assert!(ends_group_3_at_47(&out), "the group end renumbered");
    }

    #[test]
    fn a_keyframe_no_later_than_what_played_is_not_cut_to() {
        let mut h = Handover::default();
        for i in 36..40 {
            h.old(frame(i));
        }
        // Another encoder's stream starts at the group the old one is playing: its
        // keyframe (36) is in the past, and none of its frames repeats one played, so the
        // cut waits for the next keyframe (48).
        for i in 36..48 {
            h.new_item(sized(numbered(i, 900), 90), 1_000);
        }
        h.old_ended();
        assert!(!h.is_done());
        h.new_item(sized(numbered(48, 900), 90), 1_000);
        assert!(h.is_done());
        assert_eq!(indices(&mut h), [36, 37, 38, 39, 48]);
    }

    #[test]
    fn a_cut_before_the_old_path_delivered_again_numbers_on_from_the_last_frame_played() {
        // 30-33 played before the move; the old path delivers nothing after it.
        let Item::Frame(last) = frame(33) else {
            unreachable!()
        };
        let mut played = PlayedFrames::default();
        played.push(last.header, last.size);
        let mut h = Handover::new(played);
        h.new_item(numbered(36, 700), 1_000);
        h.old_ended();
        assert!(h.is_done());
        h.new_item(numbered(37, 700), 1_000);
        assert_eq!(indices(&mut h), [36, 37]);
    }

    #[test]
    fn a_later_groups_keyframe_that_comes_before_the_group_under_way_is_kept() {
        // 24 (a keyframe) to 33 played. The new path's next group (36) opens its stream
        // before the group under way (24) does: its keyframe comes first, is newer than
        // anything played and is held; then 24 repeats a frame played.
        let mut h = Handover::new(played(24..34));
        h.new_item(numbered(36, 900), 1_000);
        assert!(!h.is_done());
        for i in 24..36 {
            h.new_item(numbered(i, 900), 1_000);
        }
        assert!(h.is_done(), "the group under way repeats a frame played");
        for i in 37..40 {
            h.new_item(numbered(i, 900), 1_000);
        }
        let mut out = indices(&mut h);
        out.sort_unstable();
        assert_eq!(
            out,
            (34..40).collect::<Vec<_>>(),
            "each frame once from the last one played, the next group's keyframe too"
        );
    }
}
