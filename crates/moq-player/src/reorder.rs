//! Receiver reorder buffer: puts frames from many QUIC streams back in decode order,
//! drops what arrives too late or can no longer be decoded, and decides when to jump
//! forward to a newer GoP (the source thesis's Algorithm 2 and GoP skipping; docs/design.md: Background).
//!
//! Frames are keyed by their decode index. A frame at the front of the buffer leaves
//! at once when it directly continues the last output frame. Otherwise it waits, at
//! most `target` after its arrival, for the missing frames before it:
//!
//! - a base-layer frame that continues the base layer only misses enhancement frames,
//!   which may never come: after the wait it goes, and those frames become late;
//! - an enhancement frame goes after the wait only if the base frame it depends on was
//!   output; otherwise it waits, as it may be ahead of that base frame;
//! - a keyframe behind missing base frames is a jump point: with skip-forward it goes
//!   after the wait (or at once when older frames are stuck behind a gap), without it
//!   only once the missing frames are known lost (their group's stream was reset);
//! - a non-key base frame behind missing base frames cannot decode: with skip-forward it
//!   is dropped after the wait, and so is everything until the next keyframe.
//!
//! Frames older than the last output one, or from a GoP older than the last output
//! frame's, are dropped on arrival. No clock is read: callers pass times in ns.

use std::collections::{BTreeMap, BTreeSet};

use h264::FrameKind;

use moq_media::FrameHeader;
use moq_media::catalog::TrackRole;

/// A received frame and whatever the caller carries with it.
#[derive(Debug, Clone)]
pub struct Frame<T> {
    pub header: FrameHeader,
    /// The track the frame came on.
    pub layer: TrackRole,
    /// Arrival time, ns on the caller's monotonic clock.
    pub arrival: u64,
    pub data: T,
}

impl<T> Frame<T> {
    fn is_key(&self) -> bool {
        self.header.kind == FrameKind::Key
    }
}

/// Why a frame was not output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// It arrived after a later frame was output.
    Late,
    /// Its GoP is older than the GoP being played.
    OldGroup,
    /// A frame it depends on was skipped or lost.
    Undecodable,
    /// Skipped over by a jump to a newer keyframe.
    Skipped,
    /// The same decode index is already buffered.
    Duplicate,
    /// The buffer held more frames than it may: the oldest goes, whatever it waited for.
    Overflow,
    /// Given up to bring an adaptive playout earlier (an audio frame; video slots are
    /// shortened instead).
    Drained,
}

/// A jump over missing media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jump {
    /// Media time skipped, in timescale units (µs): from the end of the last output frame
    /// to this one.
    pub skipped_us: u64,
    /// Base-layer frames never output between the two.
    pub skipped_base_frames: u64,
    /// GoPs of which nothing was output.
    pub skipped_groups: u64,
}

/// What [`ReorderBuffer::pop`] returns.
#[derive(Debug)]
pub enum Popped<T> {
    Frame { frame: Frame<T>, jump: Option<Jump> },
    Dropped { frame: Frame<T>, reason: DropReason },
}

#[derive(Debug, Clone, Copy)]
struct LastOutput {
    decode_index: u64,
    base_index: u64,
    base_group: u64,
    end_dts: i64,
}

/// Frames the buffer holds at most (over a minute at 60 fps). Only a sender that never
/// fills its gaps gets here; past it the oldest frame leaves so memory stays bounded.
pub const MAX_BUFFERED: usize = 4096;
/// Ends of groups remembered ahead of the one playing.
const MAX_ENDED_GROUPS: usize = 64;

#[derive(Debug)]
pub struct ReorderBuffer<T> {
    target_ns: u64,
    skip_forward: bool,
    buffer: BTreeMap<u64, Frame<T>>,
    last: Option<LastOutput>,
    /// A base frame was dropped: nothing but a keyframe decodes until one is output.
    need_key: bool,
    /// Base groups whose stream was reset: their missing frames will not come.
    lost_groups: BTreeSet<u64>,
    /// Base groups whose stream ended complete, with the decode index of their last
    /// frame: for formats that number frames within their group, where the next group's
    /// keyframe continues the stream although the index jumps.
    ended_groups: BTreeMap<u64, u64>,
    /// Base groups of the keyframes buffered, with how many: "is a newer keyframe
    /// waiting?" is asked on every pop, and must not scan the buffer.
    buffered_keys: BTreeMap<u64, usize>,
    /// Highest decode index seen, to count frames that arrive out of order.
    highest_seen: Option<u64>,
    reorder_events: u64,
}

/// Result of [`ReorderBuffer::push`].
#[derive(Debug)]
pub enum Pushed<T> {
    Buffered {
        /// The frame arrived behind a frame later in decode order.
        out_of_order: bool,
    },
    Dropped(Frame<T>, DropReason),
}

impl<T> ReorderBuffer<T> {
    pub fn new(target_ns: u64, skip_forward: bool) -> ReorderBuffer<T> {
        ReorderBuffer {
            target_ns,
            skip_forward,
            buffer: BTreeMap::new(),
            last: None,
            need_key: true,
            lost_groups: BTreeSet::new(),
            ended_groups: BTreeMap::new(),
            buffered_keys: BTreeMap::new(),
            highest_seen: None,
            reorder_events: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// Frames that arrived behind a frame later in decode order.
    pub fn reorder_events(&self) -> u64 {
        self.reorder_events
    }

    /// Forgets everything (flush): the next output must be a keyframe.
    pub fn clear(&mut self) {
        *self = ReorderBuffer::new(self.target_ns, self.skip_forward);
    }

    pub fn push(&mut self, frame: Frame<T>) -> Pushed<T> {
        let index = frame.header.decode_index;
        if let Some(last) = self.last {
            if frame.header.base_group < last.base_group {
                return Pushed::Dropped(frame, DropReason::OldGroup);
            }
            if index <= last.decode_index {
                return Pushed::Dropped(frame, DropReason::Late);
            }
        }
        if self.buffer.contains_key(&index) {
            return Pushed::Dropped(frame, DropReason::Duplicate);
        }
        let out_of_order = self.highest_seen.is_some_and(|h| index < h);
        if out_of_order {
            self.reorder_events += 1;
        }
        self.highest_seen = Some(self.highest_seen.map_or(index, |h| h.max(index)));
        if frame.is_key() {
            *self
                .buffered_keys
                .entry(frame.header.base_group)
                .or_default() += 1;
        }
        self.buffer.insert(index, frame);
        Pushed::Buffered { out_of_order }
    }

    /// Takes the oldest frame out of the buffer.
    fn take_front(&mut self) -> Option<Frame<T>> {
        let (_, frame) = self.buffer.pop_first()?;
        if frame.is_key()
            && let Some(n) = self.buffered_keys.get_mut(&frame.header.base_group)
        {
            *n -= 1;
            if *n == 0 {
                self.buffered_keys.remove(&frame.header.base_group);
            }
        }
        Some(frame)
    }

    /// The stream of a base group was reset: frames of it that did not arrive never will.
    pub fn group_lost(&mut self, base_group: u64) {
        self.lost_groups.insert(base_group);
    }

    /// The stream of a base group ended complete with the frame at `last_index`: the
    /// keyframe of the next group follows that frame.
    pub fn group_ended(&mut self, base_group: u64, last_index: u64) {
        if self.last.is_some_and(|l| base_group < l.base_group) {
            return;
        }
        self.ended_groups.insert(base_group, last_index);
        // Only groups from the one playing on matter; a peer sending ends of groups far
        // ahead gets the oldest forgotten.
        while self.ended_groups.len() > MAX_ENDED_GROUPS {
            self.ended_groups.pop_last();
        }
    }

    /// Whether `h` is the keyframe of the group after the last output frame's, which
    /// ended with that frame.
    fn starts_next_group(&self, h: &FrameHeader, last: LastOutput) -> bool {
        h.kind == FrameKind::Key
            && follows(h.base_group, last.base_group)
            && self.ended_groups.get(&last.base_group) == Some(&last.base_index)
    }

    /// When waiting alone can next change a decision (ns, caller's clock); `None` when only
    /// a new frame or a lost group can.
    pub fn deadline(&self, now: u64) -> Option<u64> {
        let front = self.buffer.values().next()?;
        if self.buffer.len() > MAX_BUFFERED {
            return Some(now);
        }
        Some(front.arrival.saturating_add(self.target_ns)).filter(|d| *d > now)
    }

    /// Takes the next frame to output or drop at time `now`, if any is ready.
    pub fn pop(&mut self, now: u64) -> Option<Popped<T>> {
        let front = self.buffer.values().next()?;
        if self.buffer.len() > MAX_BUFFERED {
            return self.drop_front(DropReason::Overflow);
        }
        let decision = match self.last {
            None => self.decide_first(front, now),
            // Buffered before the first output, so `push` could not refuse it then.
            Some(last) if front.header.base_group < last.base_group => {
                Decision::Drop(DropReason::OldGroup)
            }
            Some(last) => match front.layer {
                TrackRole::Enhancement => self.decide_enhancement(front, last, now),
                TrackRole::Base => self.decide_base(front, last, now),
            },
        };
        match decision {
            Decision::Wait => None,
            Decision::Drop(reason) => self.drop_front(reason),
            Decision::Output => self.output_front(),
        }
    }

    fn waited(&self, frame: &Frame<T>, now: u64) -> bool {
        now >= frame.arrival.saturating_add(self.target_ns)
    }

    /// Nothing played yet: only a keyframe can start playback.
    fn decide_first(&self, front: &Frame<T>, now: u64) -> Decision {
        if front.is_key() {
            Decision::Output
        } else if self.waited(front, now) || self.newer_key_buffered(front.header.base_group) {
            Decision::Drop(DropReason::Undecodable)
        } else {
            Decision::Wait
        }
    }

    fn decide_enhancement(&self, front: &Frame<T>, last: LastOutput, now: u64) -> Decision {
        let h = &front.header;
        if h.base_index <= last.base_index {
            // Everything it references was output; only other enhancement frames are missing.
            let continuous = follows(h.decode_index, last.decode_index);
            return if continuous || self.waited(front, now) {
                Decision::Output
            } else {
                Decision::Wait
            };
        }
        // Its base frame has not been output: it may still be in flight, unless that
        // frame's GoP is already broken, lost, or about to be skipped.
        if self.need_key && h.base_group == last.base_group
            || self.lost_groups.contains(&h.base_group)
        {
            Decision::Drop(DropReason::Undecodable)
        } else if self.skip_forward && self.newer_key_buffered(h.base_group) {
            Decision::Drop(DropReason::Skipped)
        } else {
            Decision::Wait
        }
    }

    fn decide_base(&self, front: &Frame<T>, last: LastOutput, now: u64) -> Decision {
        let h = &front.header;
        let key = front.is_key();
        if self.need_key && !key {
            return Decision::Drop(DropReason::Undecodable);
        }
        let next_group = self.starts_next_group(h, last);
        if next_group || follows(h.base_index, last.base_index) {
            // The base layer is intact; at most enhancement frames are missing.
            let continuous = next_group || follows(h.decode_index, last.decode_index);
            return if continuous || self.waited(front, now) {
                Decision::Output
            } else {
                Decision::Wait
            };
        }
        // Base frames are missing before this one.
        let gap_lost = self
            .lost_groups
            .range(last.base_group..=h.base_group)
            .next()
            .is_some();
        if key {
            let jump = self.need_key
                || gap_lost
                || self.skip_forward
                    && (self.waited(front, now) || self.newer_key_buffered(h.base_group));
            if jump {
                Decision::Output
            } else {
                Decision::Wait
            }
        } else {
            let hopeless = gap_lost
                || self.skip_forward
                    && (self.waited(front, now) || self.newer_key_buffered(last.base_group));
            if hopeless {
                Decision::Drop(DropReason::Undecodable)
            } else {
                Decision::Wait
            }
        }
    }

    /// Whether a keyframe of a group newer than `group` is waiting in the buffer.
    fn newer_key_buffered(&self, group: u64) -> bool {
        group < u64::MAX && self.buffered_keys.range(group + 1..).next().is_some()
    }

    fn drop_front(&mut self, reason: DropReason) -> Option<Popped<T>> {
        let frame = self.take_front()?;
        if frame.layer == TrackRole::Base && self.last.is_some() {
            self.need_key = true;
        }
        Some(Popped::Dropped { frame, reason })
    }

    fn output_front(&mut self) -> Option<Popped<T>> {
        let frame = self.take_front()?;
        let h = &frame.header;
        let jump = match self.last {
            Some(last)
                if frame.is_key()
                    && !follows(h.base_index, last.base_index)
                    && !self.starts_next_group(h, last) =>
            {
                let skipped_us = h.dts.saturating_sub(last.end_dts).max(0) as u64;
                let by_index = h
                    .base_index
                    .saturating_sub(last.base_index.saturating_add(1));
                Some(Jump {
                    skipped_us,
                    // Indices numbered per group jump by more than the frames skipped:
                    // no more frames than fit in the time skipped.
                    skipped_base_frames: match h.duration {
                        0 => by_index,
                        d => by_index.min(skipped_us.div_ceil(d)),
                    },
                    skipped_groups: h
                        .base_group
                        .saturating_sub(last.base_group.saturating_add(1)),
                })
            }
            _ => None,
        };
        if frame.is_key() {
            self.need_key = false;
            let group = h.base_group;
            self.lost_groups = self.lost_groups.split_off(&group);
            self.ended_groups = self.ended_groups.split_off(&group);
        }
        let base_index = match frame.layer {
            TrackRole::Base => h.base_index,
            TrackRole::Enhancement => self.last.map_or(h.base_index, |l| l.base_index),
        };
        self.last = Some(LastOutput {
            decode_index: h.decode_index,
            base_index,
            base_group: h.base_group,
            end_dts: h.dts.saturating_add(h.duration as i64),
        });
        Some(Popped::Frame { frame, jump })
    }
}

/// Whether `next` comes right after `previous` (no overflow at the end of the range).
fn follows(next: u64, previous: u64) -> bool {
    previous.checked_add(1) == Some(next)
}

enum Decision {
    Output,
    Wait,
    Drop(DropReason),
}

#[cfg(test)]
mod tests {
    use super::*;
    use h264::SliceType;

    const MS: u64 = 1_000_000;
    const FRAME_US: i64 = 41_667;
    const TARGET: u64 = 100 * MS;

    /// A frame of a stream with GoP `gop` base frames; `d` is the decode index.
    fn frame(
        d: u64,
        kind: FrameKind,
        layer: TrackRole,
        group: u64,
        base: u64,
        at_ms: u64,
    ) -> Frame<u64> {
        Frame {
            header: FrameHeader {
                kind,
                slice_type: match kind {
                    FrameKind::Key => SliceType::I,
                    FrameKind::Reference => SliceType::P,
                    FrameKind::NonReference => SliceType::B,
                },
                decode_index: d,
                dts: d as i64 * FRAME_US,
                pts: d as i64 * FRAME_US,
                duration: FRAME_US as u64,
                availability_us: 0,
                base_group: group,
                base_index: base,
            },
            layer,
            arrival: at_ms * MS,
            data: d,
        }
    }

    fn key(d: u64, group: u64, base: u64, at: u64) -> Frame<u64> {
        frame(d, FrameKind::Key, TrackRole::Base, group, base, at)
    }
    fn p(d: u64, group: u64, base: u64, at: u64) -> Frame<u64> {
        frame(d, FrameKind::Reference, TrackRole::Base, group, base, at)
    }
    fn b(d: u64, group: u64, base: u64, at: u64) -> Frame<u64> {
        frame(
            d,
            FrameKind::NonReference,
            TrackRole::Enhancement,
            group,
            base,
            at,
        )
    }

    /// Pops everything ready at `now`: output decode indices, drops with reasons, jumps.
    fn drain(
        r: &mut ReorderBuffer<u64>,
        now_ms: u64,
    ) -> (Vec<u64>, Vec<(u64, DropReason)>, Vec<Jump>) {
        let (mut out, mut dropped, mut jumps) = (vec![], vec![], vec![]);
        while let Some(popped) = r.pop(now_ms * MS) {
            match popped {
                Popped::Frame { frame, jump } => {
                    out.push(frame.data);
                    jumps.extend(jump);
                }
                Popped::Dropped { frame, reason } => dropped.push((frame.data, reason)),
            }
        }
        (out, dropped, jumps)
    }

    fn push(r: &mut ReorderBuffer<u64>, f: Frame<u64>) {
        assert!(matches!(r.push(f), Pushed::Buffered { .. }));
    }

    #[test]
    fn in_order_frames_leave_at_once() {
        let mut r = ReorderBuffer::new(TARGET, true);
        // A baseline stream: every frame on the base track, including non-reference ones.
        for d in 0..30u64 {
            let group = d / 15;
            let f = if d % 15 == 0 {
                key(d, group, d, d * 41)
            } else {
                frame(
                    d,
                    FrameKind::NonReference,
                    TrackRole::Base,
                    group,
                    d,
                    d * 41,
                )
            };
            push(&mut r, f);
            let (out, dropped, jumps) = drain(&mut r, d * 41);
            assert_eq!(out, [d]);
            assert!(dropped.is_empty() && jumps.is_empty());
        }
        assert_eq!(r.reorder_events(), 0);
        assert!(r.is_empty());
    }

    /// A frame numbered within its group, as hang streams are (`group << 24 | object`).
    fn per_group(group: u64, object: u64, at: u64) -> Frame<u64> {
        let d = group << 24 | object;
        let kind = if object == 0 {
            FrameKind::Key
        } else {
            FrameKind::Reference
        };
        let mut f = frame(d, kind, TrackRole::Base, group, d, at);
        let t = (group * 10 + object) as i64 * FRAME_US;
        (f.header.dts, f.header.pts) = (t, t);
        f
    }

    #[test]
    fn the_next_group_after_one_that_ended_complete_continues_the_stream() {
        let mut r = ReorderBuffer::new(TARGET, true);
        for o in 0..10 {
            push(&mut r, per_group(4, o, o * 40));
        }
        assert_eq!(drain(&mut r, 360).0.len(), 10);
        // The next group's keyframe overtook the end of the group: it waits for it...
        push(&mut r, per_group(5, 0, 400));
        assert_eq!(drain(&mut r, 401).0, Vec::<u64>::new());
        // ...and goes as soon as the end says nothing is missing, without a jump.
        r.group_ended(4, 4 << 24 | 9);
        let (out, dropped, jumps) = drain(&mut r, 402);
        assert_eq!(out, [5 << 24]);
        assert!(dropped.is_empty() && jumps.is_empty(), "{jumps:?}");
    }

    #[test]
    fn without_the_end_of_its_group_the_next_keyframe_is_a_jump() {
        let mut r = ReorderBuffer::new(TARGET, true);
        for o in 0..5 {
            push(&mut r, per_group(4, o, o * 40));
        }
        drain(&mut r, 160);
        // Group 4 is cut short (its last five frames never come), and the end says so.
        r.group_ended(4, 4 << 24 | 9);
        push(&mut r, per_group(5, 0, 400));
        assert_eq!(drain(&mut r, 401).0, Vec::<u64>::new());
        let (out, _, jumps) = drain(&mut r, 500);
        assert_eq!(out, [5 << 24]);
        // Five frames' worth of time skipped; not 2^24 frames.
        assert_eq!(jumps.len(), 1);
        assert_eq!(jumps[0].skipped_base_frames, 5);
        assert_eq!(jumps[0].skipped_groups, 0);
    }

    #[test]
    fn ends_of_groups_far_ahead_are_bounded() {
        let mut r = ReorderBuffer::<u64>::new(TARGET, true);
        for group in 0..10_000 {
            r.group_ended(group, group << 24);
        }
        assert!(r.ended_groups.len() <= MAX_ENDED_GROUPS);
        assert!(r.ended_groups.contains_key(&0), "the nearest are kept");
    }

    #[test]
    fn playback_starts_at_a_keyframe() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, b(3, 0, 2, 0));
        assert_eq!(drain(&mut r, 10).0, Vec::<u64>::new());
        push(&mut r, key(15, 1, 10, 20));
        let (out, dropped, jumps) = drain(&mut r, 20);
        assert_eq!(out, [15]);
        assert_eq!(dropped, [(3, DropReason::Undecodable)]);
        assert!(jumps.is_empty(), "the first frame is not a jump");
    }

    #[test]
    fn late_non_reference_frame_is_dropped() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, key(0, 0, 0, 0));
        push(&mut r, p(1, 0, 1, 40));
        // Enhancement frame 2 (after P 1) is missing; P 3 waits for it, then goes.
        push(&mut r, p(3, 0, 2, 120));
        assert_eq!(drain(&mut r, 120).0, [0, 1]);
        assert_eq!(r.deadline(120 * MS), Some(220 * MS));
        assert_eq!(drain(&mut r, 219).0, Vec::<u64>::new());
        assert_eq!(drain(&mut r, 220).0, [3]);
        match r.push(b(2, 0, 1, 230)) {
            Pushed::Dropped(f, DropReason::Late) => assert_eq!(f.data, 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn early_non_reference_frame_waits_for_its_base_frame() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, key(0, 0, 0, 0));
        drain(&mut r, 0);
        // B 2 depends on P 1 (base index 1), which is still in flight.
        assert!(matches!(
            r.push(b(2, 0, 1, 10)),
            Pushed::Buffered {
                out_of_order: false
            }
        ));
        assert_eq!(
            drain(&mut r, 500).0,
            Vec::<u64>::new(),
            "waits past the target"
        );
        assert_eq!(r.deadline(500 * MS), None);
        assert!(matches!(
            r.push(p(1, 0, 1, 510)),
            Pushed::Buffered { out_of_order: true }
        ));
        assert_eq!(drain(&mut r, 510).0, [1, 2]);
        assert_eq!(r.reorder_events(), 1);
    }

    #[test]
    fn early_non_reference_frame_behind_buffered_base_frame_goes_after_the_wait() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, key(0, 0, 0, 0));
        push(&mut r, p(1, 0, 1, 0));
        drain(&mut r, 0);
        // B 2 never comes; B 3 (also after P 1) and P 4 are here.
        push(&mut r, b(3, 0, 1, 50));
        push(&mut r, p(4, 0, 2, 60));
        assert_eq!(drain(&mut r, 100).0, Vec::<u64>::new());
        assert_eq!(drain(&mut r, 150).0, [3, 4]);
    }

    #[test]
    fn only_enhancement_frames_buffered_means_wait() {
        let mut r = ReorderBuffer::new(TARGET, false);
        push(&mut r, key(0, 0, 0, 0));
        drain(&mut r, 0);
        push(&mut r, b(5, 0, 3, 10));
        push(&mut r, b(6, 0, 3, 20));
        assert_eq!(drain(&mut r, 10_000).0, Vec::<u64>::new());
        for (d, base) in [(1, 1), (2, 2), (4, 3)] {
            push(&mut r, p(d, 0, base, 10_000));
        }
        // Frame 3 (an enhancement frame after base 2) never comes.
        let (out, _, _) = drain(&mut r, 10_000);
        assert_eq!(out, [1, 2]);
        assert_eq!(drain(&mut r, 10_100).0, [4, 5, 6]);
    }

    #[test]
    fn skip_forward_jumps_to_a_newer_group_and_drops_the_old_one() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, key(0, 0, 0, 0));
        push(&mut r, p(1, 0, 1, 40));
        drain(&mut r, 40);
        // Group 0 is starved; group 1's keyframe (decode 15, base 10) arrives.
        push(&mut r, key(15, 1, 10, 1_000));
        assert_eq!(
            drain(&mut r, 1_050).0,
            Vec::<u64>::new(),
            "gives the old group the target"
        );
        let (out, _, jumps) = drain(&mut r, 1_100);
        assert_eq!(out, [15]);
        assert_eq!(
            jumps,
            [Jump {
                skipped_us: 13 * FRAME_US as u64,
                skipped_base_frames: 8,
                skipped_groups: 0,
            }]
        );
        assert!(matches!(
            r.push(p(2, 0, 2, 1_200)),
            Pushed::Dropped(_, DropReason::OldGroup)
        ));
        push(&mut r, p(16, 1, 11, 1_210));
        assert_eq!(drain(&mut r, 1_210).0, [16]);
    }

    #[test]
    fn a_buffered_newer_keyframe_cuts_the_wait_short() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, key(0, 0, 0, 0));
        drain(&mut r, 0);
        // Base frames 1.. of group 0 are lost; two newer keyframes are here.
        push(&mut r, p(3, 0, 3, 10));
        push(&mut r, key(15, 1, 10, 20));
        push(&mut r, key(30, 2, 20, 30));
        let (out, dropped, jumps) = drain(&mut r, 30);
        assert_eq!(dropped, [(3, DropReason::Undecodable)]);
        assert_eq!(out, [15], "jumps to the first newer keyframe at once");
        assert_eq!(jumps.len(), 1);
        // Group 1 may still deliver its frames: the next jump waits the target.
        assert_eq!(drain(&mut r, 129).0, Vec::<u64>::new());
        assert_eq!(drain(&mut r, 130).0, [30]);
    }

    #[test]
    fn without_skip_forward_a_gap_is_waited_for_until_its_group_is_lost() {
        let mut r = ReorderBuffer::new(TARGET, false);
        push(&mut r, key(0, 0, 0, 0));
        drain(&mut r, 0);
        push(&mut r, key(15, 1, 10, 100));
        push(&mut r, p(16, 1, 11, 110));
        assert_eq!(drain(&mut r, 60_000).0, Vec::<u64>::new());
        // The missing frames arrive late but in full: they play, in order.
        for d in 1..15 {
            push(&mut r, p(d, 0, d.min(9), 60_000));
        }
        let mut r2 = ReorderBuffer::new(TARGET, false);
        push(&mut r2, key(0, 0, 0, 0));
        drain(&mut r2, 0);
        push(&mut r2, key(15, 1, 10, 100));
        r2.group_lost(0);
        let (out, _, jumps) = drain(&mut r2, 100);
        assert_eq!(out, [15]);
        assert_eq!(jumps.len(), 1);
    }

    #[test]
    fn after_a_dropped_base_frame_only_a_keyframe_resumes() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, key(0, 0, 0, 0));
        drain(&mut r, 0);
        push(&mut r, p(2, 0, 2, 10)); // base 1 lost
        push(&mut r, b(3, 0, 2, 10));
        push(&mut r, p(4, 0, 3, 10));
        let (out, dropped, _) = drain(&mut r, 110);
        assert!(out.is_empty());
        assert_eq!(
            dropped,
            [
                (2, DropReason::Undecodable),
                (3, DropReason::Undecodable),
                (4, DropReason::Undecodable)
            ]
        );
        push(&mut r, key(15, 1, 10, 200));
        assert_eq!(drain(&mut r, 200).0, [15]);
    }

    #[test]
    fn duplicates_are_refused_and_clear_restarts_at_a_keyframe() {
        let mut r = ReorderBuffer::new(TARGET, true);
        push(&mut r, key(0, 0, 0, 0));
        assert!(matches!(
            r.push(key(0, 0, 0, 1)),
            Pushed::Dropped(_, DropReason::Duplicate)
        ));
        drain(&mut r, 0);
        r.clear();
        push(&mut r, p(1, 0, 1, 10));
        assert_eq!(drain(&mut r, 200).1, [(1, DropReason::Undecodable)]);
    }

    #[test]
    fn indices_at_the_end_of_the_range_do_not_overflow() {
        for skip_forward in [true, false] {
            let mut r = ReorderBuffer::new(TARGET, skip_forward);
            let max = u64::MAX;
            push(&mut r, key(max - 1, max - 1, max - 1, 0));
            push(&mut r, key(max, max, max, 1));
            let (out, _, _) = drain(&mut r, 1_000);
            assert_eq!(out, [max - 1, max]);
            // Nothing follows the last index: anything else is late.
            assert!(matches!(r.push(key(max, max, max, 2)), Pushed::Dropped(..)));
            assert!(r.pop(u64::MAX).is_none());
        }
    }

    #[test]
    fn a_buffer_that_never_fills_its_gaps_stays_bounded() {
        // Without skip-forward a keyframe behind a gap waits for the gap; a sender that
        // never fills it must not grow the buffer without bound.
        let mut r = ReorderBuffer::new(TARGET, false);
        push(&mut r, key(0, 0, 0, 0));
        assert_eq!(drain(&mut r, 0).0, [0]);
        for d in 2..(MAX_BUFFERED as u64 + 10) {
            push(&mut r, p(d, 0, d, 0));
        }
        assert!(r.len() > MAX_BUFFERED);
        assert_eq!(r.deadline(5), Some(5));
        // The overflow drops the oldest; with a base frame gone the rest cannot decode.
        let extra = r.len() - MAX_BUFFERED;
        assert_eq!(extra, 8);
        let (out, dropped, _) = drain(&mut r, 1);
        assert!(out.is_empty());
        assert!(
            dropped[..extra]
                .iter()
                .all(|(_, why)| *why == DropReason::Overflow)
        );
        assert!(
            dropped[extra..]
                .iter()
                .all(|(_, why)| *why == DropReason::Undecodable)
        );
        assert!(r.is_empty());
    }

    #[test]
    fn a_frame_of_an_older_group_buffered_before_the_first_output_is_dropped() {
        // Found by fuzzing: an older group's frame with a later decode index arrives
        // before anything is output, then a lost group is reported.
        for skip_forward in [false, true] {
            let mut r = ReorderBuffer::new(TARGET, skip_forward);
            push(&mut r, key(1, 5, 10, 0));
            push(&mut r, p(3, 3, 20, 0));
            r.group_lost(7);
            let (out, dropped, _) = drain(&mut r, 1_000);
            assert_eq!(out, [1]);
            assert_eq!(dropped, [(3, DropReason::OldGroup)]);
        }
    }
}
