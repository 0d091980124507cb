//! Switching a video from one stream of it to another without a seam: from one rendition
//! to another, or (on a move, [`handover`](crate::handover)) from one publisher to another.
//!
//! Renditions of one video share its timestamps (one source, several encoders) but each
//! numbers its frames and groups on its own; so do two publishers of one encoder's output. A switch subscribes the new rendition while
//! the old one plays on, picks a keyframe of the new one that is later than anything
//! played, and cuts when the old rendition reaches that keyframe's time: the player sees
//! one stream whose keyframe follows the old rendition's last frame directly. The new
//! rendition's frames are renumbered to continue the old one's decode indices, groups and
//! base indices, so the reorder buffer needs to know nothing of renditions.
//!
//! If the old rendition does not get there within [`CUT_WAIT_US`] (its path is the reason
//! for the switch), the cut happens anyway, and the frames between are numbered as
//! missing: the player skips over them as over any other loss.
//!
//! No clock is read: callers pass times in µs.

use h264::FrameKind;

use moq_media::FrameHeader;

use crate::item::Item;

/// Longest the old rendition plays on once the new one's keyframe is here.
pub const CUT_WAIT_US: u64 = 1_000_000;
/// New frames held at most while the old rendition plays on; past it the cut happens.
pub const MAX_HELD: usize = 256;
/// Missing frames numbered between the two renditions at most.
const MAX_GAP: i128 = 1 << 20;

/// Maps a rendition's numbering onto the one the player has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Renumber {
    decode: i128,
    group: i128,
    base: i128,
}

fn shift(value: u64, by: i128) -> u64 {
    (i128::from(value) + by).clamp(0, i128::from(u64::MAX)) as u64
}

impl Renumber {
    /// The numbering that makes `same`, a frame of the new stream, the frame `played` it
    /// repeats: the new stream continues the track mid-group.
    pub fn onto(played: &FrameHeader, same: &FrameHeader) -> Renumber {
        let by = |onto: u64, from: u64| i128::from(onto) - i128::from(from);
        Renumber {
            decode: by(played.decode_index, same.decode_index),
            group: by(played.base_group, same.base_group),
            base: by(played.base_index, same.base_index),
        }
    }

    /// A frame header as the player sees it.
    pub fn apply(&self, header: &FrameHeader) -> FrameHeader {
        FrameHeader {
            decode_index: shift(header.decode_index, self.decode),
            base_group: shift(header.base_group, self.group),
            base_index: shift(header.base_index, self.base),
            ..*header
        }
    }

    /// A group of the rendition as the player numbers it.
    pub fn group(&self, group: u64) -> u64 {
        shift(group, self.group)
    }

    /// A group as the player numbers it, back in the rendition's numbering.
    pub fn rendition_group(&self, group: u64) -> u64 {
        shift(group, -self.group)
    }

    /// An item as the player numbers it: a frame's header, a group end's group and last
    /// frame.
    pub fn item<T>(&self, item: &mut Item<T>) {
        match item {
            Item::Frame(frame) => frame.header = self.apply(&frame.header),
            Item::GroupEnd { group, last, .. } => {
                *group = self.group(*group);
                *last = last.map(|last| shift(last, self.decode));
            }
            _ => {}
        }
    }
}

/// What to do with a frame of the new rendition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewFrame {
    /// Before the keyframe to cut to: never played.
    Discard,
    /// Kept until the cut.
    Hold,
}

/// What to do with a frame of the old rendition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldFrame {
    Play,
    /// It reaches the new rendition's keyframe: cut now; this frame and the rest of the
    /// old rendition are not played.
    Cut,
}

/// One switch, from the first frame of the new rendition to the cut.
#[derive(Debug, Clone)]
pub struct Splice {
    /// The frame played last, as the player numbers it.
    last: Option<FrameHeader>,
    /// The new rendition's keyframe to cut to, in its own numbering, and when it arrived.
    key: Option<(FrameHeader, u64)>,
    held: usize,
}

impl Splice {
    /// A switch after `last` (the player's numbering), the frame played last if any.
    pub fn new(last: Option<FrameHeader>) -> Splice {
        Splice {
            last,
            key: None,
            held: 0,
        }
    }

    /// A frame of the new rendition arrived at `now_us`.
    pub fn on_new(&mut self, header: &FrameHeader, now_us: u64) -> NewFrame {
        match &self.key {
            Some((key, _)) if header.decode_index > key.decode_index => {
                self.held += 1;
                NewFrame::Hold
            }
            Some(_) => NewFrame::Discard,
            None if header.kind == FrameKind::Key
                && self.last.is_none_or(|last| header.dts > last.dts) =>
            {
                self.key = Some((*header, now_us));
                self.held = 1;
                NewFrame::Hold
            }
            None => NewFrame::Discard,
        }
    }

    /// A frame of the old rendition arrived; `header` as the player numbers it.
    pub fn on_old(&mut self, header: &FrameHeader) -> OldFrame {
        if self.key.is_some_and(|(key, _)| header.dts >= key.dts) {
            return OldFrame::Cut;
        }
        if self
            .last
            .is_none_or(|last| header.decode_index > last.decode_index)
        {
            self.last = Some(*header);
        }
        OldFrame::Play
    }

    /// The keyframe to cut to has arrived.
    pub fn has_key(&self) -> bool {
        self.key.is_some()
    }

    /// The old rendition has had its time: cut without waiting for it.
    pub fn overdue(&self, now_us: u64) -> bool {
        self.key.is_some_and(|(_, at)| {
            now_us.saturating_sub(at) >= CUT_WAIT_US || self.held >= MAX_HELD
        })
    }

    /// The numbering that makes the keyframe follow the frame played last, leaving room
    /// for the frames of the time between the two, if any; and how many those are. None
    /// before the keyframe arrived.
    pub fn renumber(&self) -> Option<(Renumber, u64)> {
        let (key, _) = self.key?;
        let Some(last) = self.last else {
            return Some((Renumber::default(), 0));
        };
        let end = i128::from(last.dts) + i128::from(last.duration);
        let frame = i128::from(key.duration.max(1));
        let gap = ((i128::from(key.dts) - end + frame / 2) / frame).clamp(0, MAX_GAP);
        let to = |from: u64, onto: u64| i128::from(onto) + 1 + gap - i128::from(from);
        let renumber = Renumber {
            decode: to(key.decode_index, last.decode_index),
            base: to(key.base_index, last.base_index),
            // A new group, whatever the gap: the missing frames are the old group's.
            group: i128::from(last.base_group) + 1 - i128::from(key.base_group),
        };
        Some((renumber, gap as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h264::SliceType;

    const FRAME: u64 = 40_000;

    /// Frame `n` of a rendition whose groups are `gop` frames long and whose numbers start
    /// at `origin`.
    fn frame(n: u64, gop: u64, origin: u64) -> FrameHeader {
        let key = n.is_multiple_of(gop);
        FrameHeader {
            kind: if key {
                FrameKind::Key
            } else {
                FrameKind::Reference
            },
            slice_type: if key { SliceType::I } else { SliceType::P },
            decode_index: origin + n,
            dts: (n * FRAME) as i64,
            pts: (n * FRAME) as i64,
            duration: FRAME,
            availability_us: 0,
            base_group: origin + n / gop,
            base_index: origin + n,
        }
    }

    #[test]
    fn the_cut_lands_on_the_keyframe_that_follows_the_last_frame_played() {
        // Old: groups of 30 numbered from 0; new: groups of 30 numbered from 1000.
        let mut splice = Splice::new(Some(frame(40, 30, 0)));
        // The new rendition's current group started before what was played: skipped.
        for n in 30..60 {
            assert_eq!(splice.on_new(&frame(n, 30, 1000), 0), NewFrame::Discard);
        }
        assert_eq!(splice.on_new(&frame(60, 30, 1000), 0), NewFrame::Hold);
        assert_eq!(splice.on_new(&frame(61, 30, 1000), 0), NewFrame::Hold);
        for n in 41..60 {
            assert_eq!(splice.on_old(&frame(n, 30, 0)), OldFrame::Play);
        }
        assert_eq!(splice.on_old(&frame(60, 30, 0)), OldFrame::Cut);
        let (renumber, gap) = splice.renumber().unwrap();
        assert_eq!(gap, 0);
        let key = renumber.apply(&frame(60, 30, 1000));
        let last = frame(59, 30, 0);
        assert_eq!(key.decode_index, last.decode_index + 1);
        assert_eq!(key.base_index, last.base_index + 1);
        assert_eq!(key.base_group, last.base_group + 1);
        assert_eq!(key.dts, last.dts + FRAME as i64, "time is untouched");
        let next = renumber.apply(&frame(61, 30, 1000));
        assert_eq!(next.decode_index, key.decode_index + 1);
        assert_eq!(renumber.group(1002), key.base_group);
        assert_eq!(renumber.rendition_group(key.base_group), 1002);
    }

    #[test]
    fn new_frames_before_the_keyframe_in_decode_order_are_not_held() {
        let mut splice = Splice::new(Some(frame(10, 30, 0)));
        assert_eq!(splice.on_new(&frame(30, 30, 0), 0), NewFrame::Hold);
        assert_eq!(splice.on_new(&frame(29, 30, 0), 0), NewFrame::Discard);
        assert_eq!(splice.on_new(&frame(31, 30, 0), 0), NewFrame::Hold);
    }

    #[test]
    fn an_old_rendition_that_falls_behind_is_cut_with_the_missing_frames_numbered() {
        let mut splice = Splice::new(Some(frame(10, 30, 0)));
        assert!(!splice.overdue(5_000_000));
        assert_eq!(
            splice.on_new(&frame(30, 30, 500), 2_000_000),
            NewFrame::Hold
        );
        assert!(splice.has_key());
        assert!(!splice.overdue(2_000_000 + CUT_WAIT_US - 1));
        assert!(splice.overdue(2_000_000 + CUT_WAIT_US));
        let (renumber, gap) = splice.renumber().unwrap();
        // Frames 11..=29 of the old rendition never came.
        assert_eq!(gap, 19);
        let key = renumber.apply(&frame(30, 30, 500));
        assert_eq!(key.decode_index, 30);
        assert_eq!(key.base_group, 1, "a new group after the old one");
    }

    #[test]
    fn too_many_held_frames_make_the_cut_due() {
        let mut splice = Splice::new(None);
        for n in 0..MAX_HELD as u64 {
            assert!(!splice.overdue(0));
            assert_eq!(splice.on_new(&frame(n, 1000, 0), 0), NewFrame::Hold);
        }
        assert!(splice.overdue(0));
        // Nothing played yet: the new rendition's own numbers stand.
        assert_eq!(splice.renumber(), Some((Renumber::default(), 0)));
    }

    #[test]
    fn hostile_numbers_saturate() {
        let mut far = frame(0, 30, 0);
        far.decode_index = u64::MAX;
        far.base_group = u64::MAX;
        far.dts = i64::MAX;
        let mut splice = Splice::new(Some(frame(5, 30, 0)));
        assert_eq!(splice.on_new(&far, 0), NewFrame::Hold);
        let (renumber, gap) = splice.renumber().unwrap();
        assert_eq!(gap, MAX_GAP as u64);
        let mapped = renumber.apply(&far);
        assert_eq!(mapped.decode_index, 6 + MAX_GAP as u64);
        assert_eq!(renumber.group(u64::MAX), 1);
        assert_eq!(renumber.group(0), 0);
    }
}
