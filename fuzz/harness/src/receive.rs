//! Input model of the `receive_path` fuzz target: a receiver scenario, decoded from the fuzz
//! input with `arbitrary`, that drives `moq_player::Player`, the code `moqsrc` runs.
//!
//! Frame header fields are mostly given relative to the previous pushed frame (`Step::Delta`),
//! so short inputs already describe streams that look like real ones (consecutive decode
//! indices, the same GoP, 40 ms apart) and the decision logic is reached deep; `Step::Abs`
//! still lets every field take any value, extremes included.
//!
//! [`Encoder`] writes a scenario back into the bytes `arbitrary` decodes it from, so the seed
//! generator can turn real streams into corpus entries.

use arbitrary::Arbitrary;
use h264::{FrameKind, SliceType};
use moq_media::FrameHeader;

/// One receiver run: the element settings, then what happens, in order.
#[derive(Arbitrary, Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// `moqsrc latency`, ns: the reorder wait, and how late a frame may come.
    pub latency_ns: u64,
    pub skip_forward: bool,
    /// `playout=adaptive` (else fixed).
    pub adaptive: bool,
    /// Headers go through `FrameHeader::encode` and `decode` before they are pushed, as in
    /// `moqsrc`: values beyond what the wire carries are clamped. Otherwise they are pushed
    /// as they are, which tests the buffer's own range handling.
    pub wire: bool,
    pub ops: Vec<Op>,
}

/// One event at the receiver. Every op carries the time it happens at, which becomes "now".
#[derive(Arbitrary, Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A frame arrives (its arrival time is the op's time).
    Push {
        at: Time,
        header: HeaderSpec,
        enhancement: bool,
    },
    /// `count` frames arrive at once, each header `header` applied to the one before (so
    /// `Delta(1)` decode indices count up); a few bursts fill the buffer.
    Burst {
        at: Time,
        header: HeaderSpec,
        enhancement: bool,
        count: u8,
    },
    /// One `pop`.
    Pop(Time),
    /// `pop` until it returns nothing.
    Drain(Time),
    /// `deadline`.
    Deadline(Time),
    /// The stream of a base group was reset; relative to the last pushed frame's group.
    GroupLost(Step),
    /// A new timeline (a new session, a restarted publisher): the track's buffer is
    /// cleared and the timeline reset.
    Clear,
    /// A reset another track already applied: the track's buffer is cleared, the
    /// timeline kept.
    ResetClock,
}

/// When an op happens.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time {
    /// This many ns after the previous op (saturating).
    After(u32),
    /// At this absolute time, possibly before the previous op.
    At(u64),
}

impl Time {
    pub fn resolve(self, now: u64) -> u64 {
        match self {
            Time::After(ns) => now.saturating_add(u64::from(ns)),
            Time::At(t) => t,
        }
    }
}

/// An unsigned header field: relative to the same field of the previous pushed frame
/// (wrapping), or absolute.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Delta(i16),
    Abs(u64),
}

impl Step {
    pub fn resolve(self, previous: u64) -> u64 {
        match self {
            Step::Delta(d) => previous.wrapping_add_signed(i64::from(d)),
            Step::Abs(v) => v,
        }
    }

    /// The step that turns `previous` into `value`: a delta when it fits.
    pub fn between(previous: u64, value: u64) -> Step {
        i16::try_from(value.wrapping_sub(previous) as i64).map_or(Step::Abs(value), Step::Delta)
    }
}

/// A signed timestamp field: relative (wrapping) or absolute.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    Delta(i32),
    Abs(i64),
}

impl Stamp {
    pub fn resolve(self, base: i64) -> i64 {
        match self {
            Stamp::Delta(d) => base.wrapping_add(i64::from(d)),
            Stamp::Abs(v) => v,
        }
    }

    pub fn between(base: i64, value: i64) -> Stamp {
        i32::try_from(value.wrapping_sub(base)).map_or(Stamp::Abs(value), Stamp::Delta)
    }
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Key,
    Reference,
    NonReference,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slice {
    P,
    B,
    I,
    Sp,
    Si,
}

/// A frame header, field by field. `dts`, `duration`, the counters and the availability time
/// are relative to the previous pushed frame; `pts` is relative to this frame's `dts`.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderSpec {
    pub kind: Kind,
    pub slice: Slice,
    pub decode_index: Step,
    pub dts: Stamp,
    pub pts: Stamp,
    pub duration: Step,
    pub availability_us: Step,
    pub base_group: Step,
    pub base_index: Step,
}

/// What a [`HeaderSpec`] is relative to before the first push.
pub const INITIAL: FrameHeader = FrameHeader {
    kind: FrameKind::Key,
    slice_type: SliceType::I,
    decode_index: 0,
    dts: 0,
    pts: 0,
    duration: 0,
    availability_us: 0,
    base_group: 0,
    base_index: 0,
};

impl HeaderSpec {
    pub fn resolve(&self, previous: &FrameHeader) -> FrameHeader {
        let dts = self.dts.resolve(previous.dts);
        FrameHeader {
            kind: match self.kind {
                Kind::Key => FrameKind::Key,
                Kind::Reference => FrameKind::Reference,
                Kind::NonReference => FrameKind::NonReference,
            },
            slice_type: match self.slice {
                Slice::P => SliceType::P,
                Slice::B => SliceType::B,
                Slice::I => SliceType::I,
                Slice::Sp => SliceType::Sp,
                Slice::Si => SliceType::Si,
            },
            decode_index: self.decode_index.resolve(previous.decode_index),
            dts,
            pts: self.pts.resolve(dts),
            duration: self.duration.resolve(previous.duration),
            availability_us: self.availability_us.resolve(previous.availability_us),
            base_group: self.base_group.resolve(previous.base_group),
            base_index: self.base_index.resolve(previous.base_index),
        }
    }

    /// The spec that turns `previous` into `header` (the inverse of [`HeaderSpec::resolve`]).
    pub fn between(previous: &FrameHeader, header: &FrameHeader) -> HeaderSpec {
        HeaderSpec {
            kind: match header.kind {
                FrameKind::Key => Kind::Key,
                FrameKind::Reference => Kind::Reference,
                FrameKind::NonReference => Kind::NonReference,
            },
            slice: match header.slice_type {
                SliceType::P => Slice::P,
                SliceType::B => Slice::B,
                SliceType::I => Slice::I,
                SliceType::Sp => Slice::Sp,
                SliceType::Si => Slice::Si,
            },
            decode_index: Step::between(previous.decode_index, header.decode_index),
            dts: Stamp::between(previous.dts, header.dts),
            pts: Stamp::between(header.dts, header.pts),
            duration: Step::between(previous.duration, header.duration),
            availability_us: Step::between(previous.availability_us, header.availability_us),
            base_group: Step::between(previous.base_group, header.base_group),
            base_index: Step::between(previous.base_index, header.base_index),
        }
    }
}

/// Writes values in the byte layout `arbitrary` 1.x reads them from: integers little-endian,
/// `bool` as one byte, an enum variant as the `u32` that maps to it, `Vec` elements each
/// behind a "more" byte, the last field of the top-level value taking the rest. The seed
/// generator checks every scenario it writes by decoding it again.
#[derive(Debug, Default)]
pub struct Encoder {
    pub bytes: Vec<u8>,
}

impl Encoder {
    fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// Variant `index` of an enum with `count` variants: the derive picks
    /// `(u32 * count) >> 32`, so the smallest `u32` that lands on `index` is written.
    fn variant(&mut self, index: u32, count: u32) {
        let v = (u64::from(index) << 32).div_ceil(u64::from(count));
        self.u32(v as u32);
    }

    fn time(&mut self, t: Time) {
        match t {
            Time::After(ns) => {
                self.variant(0, 2);
                self.u32(ns);
            }
            Time::At(ns) => {
                self.variant(1, 2);
                self.u64(ns);
            }
        }
    }

    fn step(&mut self, s: Step) {
        match s {
            Step::Delta(d) => {
                self.variant(0, 2);
                self.bytes.extend_from_slice(&d.to_le_bytes());
            }
            Step::Abs(v) => {
                self.variant(1, 2);
                self.u64(v);
            }
        }
    }

    fn stamp(&mut self, s: Stamp) {
        match s {
            Stamp::Delta(d) => {
                self.variant(0, 2);
                self.bytes.extend_from_slice(&d.to_le_bytes());
            }
            Stamp::Abs(v) => {
                self.variant(1, 2);
                self.bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
    }

    fn header(&mut self, h: &HeaderSpec) {
        self.variant(h.kind as u32, 3);
        self.variant(h.slice as u32, 5);
        self.step(h.decode_index);
        self.stamp(h.dts);
        self.stamp(h.pts);
        self.step(h.duration);
        self.step(h.availability_us);
        self.step(h.base_group);
        self.step(h.base_index);
    }

    fn op(&mut self, op: &Op) {
        const OPS: u32 = 8;
        match op {
            Op::Push {
                at,
                header,
                enhancement,
            } => {
                self.variant(0, OPS);
                self.time(*at);
                self.header(header);
                self.bool(*enhancement);
            }
            Op::Burst {
                at,
                header,
                enhancement,
                count,
            } => {
                self.variant(1, OPS);
                self.time(*at);
                self.header(header);
                self.bool(*enhancement);
                self.u8(*count);
            }
            Op::Pop(t) => {
                self.variant(2, OPS);
                self.time(*t);
            }
            Op::Drain(t) => {
                self.variant(3, OPS);
                self.time(*t);
            }
            Op::Deadline(t) => {
                self.variant(4, OPS);
                self.time(*t);
            }
            Op::GroupLost(s) => {
                self.variant(5, OPS);
                self.step(*s);
            }
            Op::Clear => self.variant(6, OPS),
            Op::ResetClock => self.variant(7, OPS),
        }
    }

    /// The bytes a fuzz target taking a `Scenario` decodes into `scenario`.
    pub fn scenario(scenario: &Scenario) -> Vec<u8> {
        let mut e = Encoder::default();
        e.u64(scenario.latency_ns);
        e.bool(scenario.skip_forward);
        e.bool(scenario.adaptive);
        e.bool(scenario.wire);
        for op in &scenario.ops {
            e.bool(true);
            e.op(op);
        }
        e.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbitrary::Unstructured;

    fn decode(bytes: &[u8]) -> Scenario {
        Scenario::arbitrary_take_rest(Unstructured::new(bytes)).unwrap()
    }

    #[test]
    fn encoder_writes_what_arbitrary_reads() {
        let header = HeaderSpec {
            kind: Kind::NonReference,
            slice: Slice::Si,
            decode_index: Step::Delta(-3),
            dts: Stamp::Abs(i64::MIN),
            pts: Stamp::Delta(41_667),
            duration: Step::Abs(u64::MAX),
            availability_us: Step::Delta(i16::MAX),
            base_group: Step::Delta(1),
            base_index: Step::Abs(7),
        };
        let scenario = Scenario {
            latency_ns: u64::MAX,
            skip_forward: true,
            adaptive: true,
            wire: true,
            ops: vec![
                Op::Push {
                    at: Time::After(41_666_667),
                    header,
                    enhancement: true,
                },
                Op::Burst {
                    at: Time::After(1),
                    header,
                    enhancement: false,
                    count: 255,
                },
                Op::Pop(Time::At(5)),
                Op::Drain(Time::After(0)),
                Op::Deadline(Time::At(u64::MAX)),
                Op::GroupLost(Step::Delta(-1)),
                Op::Clear,
                Op::ResetClock,
            ],
        };
        assert_eq!(decode(&Encoder::scenario(&scenario)), scenario);
    }

    /// The committed reproducers decode to the scenarios they were written from; a change
    /// to the input model that breaks this must rewrite them.
    #[test]
    fn regressions_decode_as_written() {
        const MS: u64 = 1_000_000;
        let push = |at, kind, decode_index, base_group, base_index| Op::Push {
            at: Time::After(at),
            header: HeaderSpec {
                kind,
                slice: if kind == Kind::Key {
                    Slice::I
                } else {
                    Slice::P
                },
                decode_index: Step::Abs(decode_index),
                dts: Stamp::Abs(decode_index as i64 * 41_667),
                pts: Stamp::Delta(0),
                duration: Step::Abs(41_667),
                availability_us: Step::Abs(0),
                base_group: Step::Abs(base_group),
                base_index: Step::Abs(base_index),
            },
            enhancement: false,
        };
        // A keyframe of group 5 is output; behind it waits a base frame of the older group
        // 3 after a gap in the base layer, and some group was lost.
        let older_group = Scenario {
            latency_ns: 100 * MS,
            skip_forward: false,
            adaptive: false,
            wire: true,
            ops: vec![
                push(0, Kind::Key, 1, 5, 10),
                push(1_000_000, Kind::Reference, 3, 3, 20),
                Op::GroupLost(Step::Abs(7)),
                Op::Drain(Time::After(0)),
            ],
        };
        let bytes = include_bytes!("../../regressions/receive_path/older-group-behind-base-gap");
        assert_eq!(decode(bytes), older_group);
        assert_eq!(Encoder::scenario(&older_group), bytes);
    }

    #[test]
    fn between_inverts_resolve() {
        let previous = FrameHeader {
            decode_index: 10,
            dts: 1_000,
            base_group: 3,
            ..INITIAL
        };
        let header = FrameHeader {
            kind: FrameKind::NonReference,
            slice_type: SliceType::B,
            decode_index: 9,
            dts: i64::MAX,
            pts: i64::MIN,
            duration: 41_667,
            availability_us: 1_795_000_000_000_000,
            base_group: 3,
            base_index: u64::MAX,
        };
        let spec = HeaderSpec::between(&previous, &header);
        assert_eq!(spec.decode_index, Step::Delta(-1));
        assert_eq!(spec.resolve(&previous), header);
    }
}
