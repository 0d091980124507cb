//! Moving a track from one session to another without a gap: make before break.
//!
//! A relay that is about to restart sends GOAWAY and grants a drain window. The receiver
//! opens a new session (the URI the GOAWAY names, the same URL, or a backup), subscribes
//! the track there from the next group start, and keeps playing the old subscription
//! meanwhile. Both carry the same publisher's numbering, so they meet at a group boundary:
//! the first group the new subscription delivers is the cut. Until it, the old
//! subscription's items go on to the track and the new one's are held; from it on the new
//! one's go and the old one's groups at or past the cut are dropped. The cut happens when
//! the old subscription reaches the cut group (it delivered everything before it), or when
//! it has had [`OLD_WAIT_US`] since the new one's first frame (it is the path that is
//! going away). Then the old subscription and its session can be closed.
//!
//! Free of the network and of clocks: the caller feeds items of both subscriptions with the
//! time (µs on a monotonic clock) and takes what goes to the track.

use std::collections::VecDeque;

use crate::item::Item;

/// Longest the old subscription plays on once the new one has delivered its first frame.
pub const OLD_WAIT_US: u64 = 1_000_000;
/// New items held at most before the cut; past it the cut happens.
const MAX_HELD: usize = 512;

/// One move, from the new subscription's start to the cut.
#[derive(Debug)]
pub struct Handover<T> {
    /// The first group of the new subscription, and when its first frame came.
    cut: Option<(u64, u64)>,
    /// The new subscription's items until the cut.
    held: Vec<Item<T>>,
    /// Items for the track, in order.
    out: VecDeque<Item<T>>,
    /// The old subscription ended: the new one plays as soon as it delivers.
    old_gone: bool,
    done: bool,
}

impl<T> Default for Handover<T> {
    fn default() -> Self {
        Handover {
            cut: None,
            held: Vec::new(),
            out: VecDeque::new(),
            old_gone: false,
            done: false,
        }
    }
}

/// The group an item belongs to, for items that belong to one.
fn group_of<T>(item: &Item<T>) -> Option<u64> {
    match item {
        Item::Frame(f) => Some(f.group),
        Item::GroupEnd { group, .. } => Some(*group),
        _ => None,
    }
}

impl<T> Handover<T> {
    /// An item of the old subscription.
    pub fn old(&mut self, item: Item<T>) {
        if self.done {
            return;
        }
        match (self.cut, group_of(&item)) {
            (Some((cut, _)), Some(group)) if group >= cut => self.finish(),
            _ => self.out.push_back(item),
        }
    }

    /// An item of the new subscription, at `now_us`.
    pub fn new_item(&mut self, item: Item<T>, now_us: u64) {
        if self.done {
            self.out.push_back(item);
            return;
        }
        if self.cut.is_none()
            && let Item::Frame(f) = &item
        {
            self.cut = Some((f.group, now_us));
        }
        if self.cut.is_some() {
            self.held.push(item);
            if self.old_gone || self.held.len() >= MAX_HELD {
                self.finish();
            }
        }
    }

    /// Cuts over if the old subscription has had its time.
    pub fn tick(&mut self, now_us: u64) {
        if let Some((_, since)) = self.cut
            && now_us.saturating_sub(since) >= OLD_WAIT_US
        {
            self.finish();
        }
    }

    /// The old subscription ended (its session went): the new one plays from its cut on.
    pub fn old_ended(&mut self) {
        self.old_gone = true;
        self.finish();
    }

    fn finish(&mut self) {
        if self.done || self.cut.is_none() {
            return;
        }
        self.done = true;
        self.out.extend(self.held.drain(..));
    }

    /// Whether the new subscription plays now: the old one can be dropped.
    pub fn is_done(&self) -> bool {
        self.done
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
    use h264::{FrameKind, SliceType};
    use moq_media::FrameHeader;
    use moq_media::catalog::TrackRole;

    const GOP: u64 = 12;

    fn frame(index: u64) -> Item<()> {
        let key = index.is_multiple_of(GOP);
        let header = FrameHeader {
            kind: if key { FrameKind::Key } else { FrameKind::Reference },
            slice_type: if key { SliceType::I } else { SliceType::P },
            decode_index: index,
            dts: index as i64 * 41_667,
            pts: index as i64 * 41_667,
            duration: 41_667,
            availability_us: 0,
            base_group: index / GOP,
            base_index: index,
        };
        Item::Frame(Incoming {
            epoch: 1,
            group: index / GOP,
            header,
            layer: TrackRole::Base,
            size: 100,
            received_us: 0,
            data: (),
        })
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
        h.tick(5_000 + OLD_WAIT_US - 1);
        assert!(!h.is_done());
        h.tick(5_000 + OLD_WAIT_US);
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
}
