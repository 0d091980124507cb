//! Mapping of access units onto MoQ tracks, groups and objects, and the QUIC send
//! priority of the stream each one travels on (docs/design.md: Delivery modes).

use crate::catalog::TrackRole;
use h264::FrameKind;

/// How moqsink maps frames to streams and prioritises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum DeliveryMode {
    /// One stream per GoP, older GoPs first: behaves like a single in-order stream.
    Baseline,
    /// As baseline for key/reference pictures; every non-reference picture goes on its
    /// own stream of the enhancement track, newest first, below every base stream.
    DeprioritizeB,
    /// One stream per GoP, newest GoP first, so the receiver can jump to the live edge.
    /// The default: a viewer behind a slow path catches up instead of falling behind.
    #[default]
    SkipGops,
    /// Newest GoP first for the base layer plus the deprioritised enhancement layer.
    Combined,
}

impl DeliveryMode {
    pub const ALL: [DeliveryMode; 4] = [
        DeliveryMode::Baseline,
        DeliveryMode::DeprioritizeB,
        DeliveryMode::SkipGops,
        DeliveryMode::Combined,
    ];

    /// Whether non-reference pictures travel on the separate enhancement track.
    pub fn splits_layers(self) -> bool {
        matches!(self, DeliveryMode::DeprioritizeB | DeliveryMode::Combined)
    }

    /// Whether a newer base group pre-empts older ones.
    /// The mode with the same group order and no layer split: what a format with one
    /// track per video stream (hang) does in this mode.
    pub fn base_layer_only(self) -> DeliveryMode {
        match self {
            DeliveryMode::DeprioritizeB => DeliveryMode::Baseline,
            DeliveryMode::Combined => DeliveryMode::SkipGops,
            other => other,
        }
    }

    pub fn newest_group_first(self) -> bool {
        matches!(self, DeliveryMode::SkipGops | DeliveryMode::Combined)
    }

    pub fn name(self) -> &'static str {
        match self {
            DeliveryMode::Baseline => "baseline",
            DeliveryMode::DeprioritizeB => "deprioritize-b",
            DeliveryMode::SkipGops => "skip-gops",
            DeliveryMode::Combined => "combined",
        }
    }

    pub fn from_name(name: &str) -> Option<DeliveryMode> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Where one access unit goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub role: TrackRole,
    pub group: u64,
    pub object: u64,
    /// The frame opens a new group (and therefore a new stream).
    pub starts_group: bool,
    /// The base-layer group current when the frame was produced.
    pub base_group: u64,
    /// Ordinal of the newest base-layer frame at or before this one (see `FrameHeader`).
    pub base_index: u64,
}

/// Assigns groups and objects to access units in decode order.
#[derive(Debug, Clone)]
pub struct Mapper {
    mode: DeliveryMode,
    /// First group ID and first base index (see [`Mapper::starting_at`]).
    origin: u64,
    base_group: Option<u64>,
    next_base_object: u64,
    next_enhancement_group: u64,
    base_frames: u64,
}

impl Mapper {
    pub fn new(mode: DeliveryMode) -> Mapper {
        Mapper::starting_at(mode, 0)
    }

    /// Group IDs and base indices start at `origin`. A publisher that starts from the
    /// wall clock keeps its IDs increasing across restarts, which relays caching the
    /// largest group (and receivers dropping older GoPs) rely on.
    pub fn starting_at(mode: DeliveryMode, origin: u64) -> Mapper {
        Mapper {
            mode,
            origin,
            base_group: None,
            next_base_object: 0,
            next_enhancement_group: origin,
            base_frames: origin,
        }
    }

    pub fn mode(&self) -> DeliveryMode {
        self.mode
    }

    /// Places the next access unit. Returns `None` for frames before the first keyframe:
    /// nothing could decode them.
    pub fn place(&mut self, kind: FrameKind) -> Option<Placement> {
        if kind == FrameKind::Key {
            let group = self.base_group.map_or(self.origin, |g| g + 1);
            self.base_group = Some(group);
            self.next_base_object = 1;
            self.base_frames += 1;
            return Some(Placement {
                role: TrackRole::Base,
                group,
                object: 0,
                starts_group: true,
                base_group: group,
                base_index: self.base_frames - 1,
            });
        }
        let base_group = self.base_group?;
        if kind == FrameKind::NonReference && self.mode.splits_layers() {
            let group = self.next_enhancement_group;
            self.next_enhancement_group += 1;
            return Some(Placement {
                role: TrackRole::Enhancement,
                group,
                object: 0,
                starts_group: true,
                base_group,
                base_index: self.base_frames - 1,
            });
        }
        let object = self.next_base_object;
        self.next_base_object += 1;
        self.base_frames += 1;
        Some(Placement {
            role: TrackRole::Base,
            group: base_group,
            object,
            starts_group: false,
            base_group,
            base_index: self.base_frames - 1,
        })
    }
}

/// Send order of each stream: the catalog before everything, then audio, every video
/// base-layer stream before every enhancement stream.
pub mod priority {
    use super::DeliveryMode;

    /// Lower `class` first; within a class higher `rank` first. `publisher` is the MoQ
    /// publisher priority for relays (lower first).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Urgency {
        pub class: u8,
        pub rank: i64,
        pub publisher: u8,
    }

    pub const CATALOG: Urgency = Urgency {
        class: 0,
        rank: 0,
        publisher: 0,
    };

    /// The stream carrying audio group `group`: older first. Audio is small and must never
    /// stall, so it goes before all video, whatever the delivery mode.
    pub fn audio(group: u64) -> Urgency {
        Urgency {
            class: 1,
            rank: -(group.min(i64::MAX as u64) as i64),
            publisher: 32,
        }
    }

    /// The stream carrying base group `group`: older first, or newest first in the
    /// modes that skip old GoPs.
    pub fn base(mode: DeliveryMode, group: u64) -> Urgency {
        let group = group.min(i64::MAX as u64) as i64;
        Urgency {
            class: 2,
            rank: if mode.newest_group_first() {
                group
            } else {
                -group
            },
            publisher: 64,
        }
    }

    /// The stream carrying enhancement frame `sequence`: newest first.
    pub fn enhancement(sequence: u64) -> Urgency {
        Urgency {
            class: 3,
            rank: sequence.min(i64::MAX as u64) as i64,
            publisher: 192,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FrameKind::*;

    fn run(mode: DeliveryMode, kinds: &[FrameKind]) -> Vec<Option<Placement>> {
        let mut m = Mapper::new(mode);
        kinds.iter().map(|k| m.place(*k)).collect()
    }

    #[test]
    fn frames_before_the_first_keyframe_are_not_placed() {
        let out = run(DeliveryMode::Baseline, &[Reference, NonReference, Key]);
        assert_eq!(out[0], None);
        assert_eq!(out[1], None);
        assert_eq!(out[2].unwrap().group, 0);
    }

    #[test]
    fn baseline_keeps_every_frame_in_the_gop_group() {
        let out = run(
            DeliveryMode::Baseline,
            &[Key, Reference, NonReference, Reference, Key, NonReference],
        );
        let places: Vec<_> = out
            .iter()
            .map(|p| {
                let p = p.unwrap();
                (p.role, p.group, p.object, p.starts_group)
            })
            .collect();
        assert_eq!(
            places,
            [
                (TrackRole::Base, 0, 0, true),
                (TrackRole::Base, 0, 1, false),
                (TrackRole::Base, 0, 2, false),
                (TrackRole::Base, 0, 3, false),
                (TrackRole::Base, 1, 0, true),
                (TrackRole::Base, 1, 1, false),
            ]
        );
    }

    #[test]
    fn split_modes_send_non_reference_frames_as_single_frame_groups() {
        for mode in [DeliveryMode::DeprioritizeB, DeliveryMode::Combined] {
            let out = run(
                mode,
                &[
                    Key,
                    Reference,
                    NonReference,
                    NonReference,
                    Reference,
                    Key,
                    NonReference,
                ],
            );
            let enh: Vec<_> = out
                .iter()
                .flatten()
                .filter(|p| p.role == TrackRole::Enhancement)
                .map(|p| (p.group, p.object, p.base_group, p.base_index))
                .collect();
            // Each enhancement frame names the base frame decoded just before it.
            assert_eq!(enh, [(0, 0, 0, 1), (1, 0, 0, 1), (2, 0, 1, 3)]);
            let base_objects: Vec<_> = out
                .iter()
                .flatten()
                .filter(|p| p.role == TrackRole::Base)
                .map(|p| (p.group, p.object, p.base_index))
                .collect();
            // Object IDs stay contiguous in a group even when frames leave for the enhancement track.
            assert_eq!(base_objects, [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 3)]);
        }
    }

    /// Whether `a`'s stream goes before `b`'s.
    fn before(a: priority::Urgency, b: priority::Urgency) -> bool {
        (a.class, std::cmp::Reverse(a.rank)) < (b.class, std::cmp::Reverse(b.rank))
    }

    #[test]
    fn priorities_order_streams_as_each_mode_intends() {
        use priority::*;
        for mode in DeliveryMode::ALL {
            for g in [0, 1, 1000] {
                assert!(before(CATALOG, audio(g)));
                assert!(before(audio(g + 5), base(mode, g)));
                assert!(audio(g).publisher < base(mode, g).publisher);
                assert!(before(CATALOG, base(mode, g)));
                assert!(before(base(mode, g), enhancement(g * 7 + 3)));
                assert!(CATALOG.publisher < base(mode, g).publisher);
                assert!(base(mode, g).publisher < enhancement(g).publisher);
            }
            let older_wins = before(base(mode, 4), base(mode, 5));
            assert_eq!(older_wins, !mode.newest_group_first(), "{mode:?}");
        }
        assert!(before(enhancement(11), enhancement(10)));
        assert!(before(audio(10), audio(11)));
    }

    #[test]
    fn priority_arithmetic_holds_over_long_streams() {
        use priority::*;
        // Ten years of 24 fps enhancement frames and 1.6 GoPs/s, and the far end of u64.
        let frames = 24 * 3600 * 24 * 365 * 10u64;
        let gops = frames / 15;
        for mode in DeliveryMode::ALL {
            for g in [u32::MAX as u64, gops, i64::MAX as u64 - 1] {
                assert_eq!(
                    before(base(mode, g), base(mode, g + 1)),
                    !mode.newest_group_first()
                );
                assert!(before(base(mode, g), enhancement(frames)));
            }
        }
        for n in [u32::MAX as u64, frames, i64::MAX as u64 - 1] {
            assert!(before(enhancement(n + 1), enhancement(n)));
        }
        // Saturates rather than wrapping at the very end of the range.
        assert!(!before(enhancement(u64::MAX), enhancement(u64::MAX - 1)));
    }

    #[test]
    fn ids_start_at_the_origin() {
        let mut m = Mapper::starting_at(DeliveryMode::Combined, 1_000);
        let key = m.place(Key).unwrap();
        assert_eq!((key.group, key.object, key.base_index), (1_000, 0, 1_000));
        let b = m.place(NonReference).unwrap();
        assert_eq!(
            (b.role, b.group, b.base_index),
            (TrackRole::Enhancement, 1_000, 1_000)
        );
        assert_eq!(m.place(Key).unwrap().group, 1_001);
    }

    #[test]
    fn mode_names_round_trip() {
        for mode in DeliveryMode::ALL {
            assert_eq!(DeliveryMode::from_name(mode.name()), Some(mode));
        }
        assert_eq!(DeliveryMode::from_name("fastest"), None);
    }
}
