//! The frame header carried at the start of every media object payload.
//!
//! Relays do not forward object extension headers, so everything a
//! receiver needs to place a frame in time travels inside the payload, ahead of the
//! frame's bytes. Audio frames use the same header: each is a key frame (slice type I,
//! which means nothing for audio), its decode index and base index count the track's
//! audio frames, and its base group is the audio group. The layout is versioned so
//! fields can be added later:
//!
//! ```text
//! version (8) = 1
//! flags (8)           bits 0-1: frame kind, bits 2-4: slice type, bits 5-7: zero
//! decode index (i)    position of the frame in decode order since the stream started
//! dts (i, zigzag)     decode timestamp, in the catalog timescale
//! pts - dts (i, zigzag)
//! duration (i)        in the catalog timescale
//! availability (i)    wall clock, µs since the UNIX epoch, when the frame reached the sender
//! base group (i)      the base-layer group (GoP) the frame belongs to
//! base index (i)      ordinal of the newest base-layer frame at or before this one in
//!                     decode order: a base frame's own position in its layer, or for an
//!                     enhancement frame the base frame it must be decoded after
//! ```
//!
//! `(i)` is a QUIC variable-length integer, as elsewhere in MoQ.

use h264::{FrameKind, SliceType};
use moq_wire::varint;
use thiserror::Error;

/// The only header version this crate writes and reads.
pub const HEADER_VERSION: u8 = 1;

/// Largest magnitude a time field may have, in timescale units (µs): 2^53 µs is 285 years,
/// far beyond any stream or wall clock, yet small enough that nanoseconds of it fit a
/// `u64` and sums of two fields cannot overflow. Decoding refuses larger values, so a
/// hostile peer cannot push timestamp arithmetic past its range.
pub const MAX_TIME_US: u64 = 1 << 53;

/// Per-frame metadata that precedes the access unit in an object payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: FrameKind,
    pub slice_type: SliceType,
    pub decode_index: u64,
    /// Decode timestamp in the catalog timescale (may be negative before the first PTS).
    pub dts: i64,
    /// Presentation timestamp in the catalog timescale.
    pub pts: i64,
    pub duration: u64,
    /// Wall-clock time the frame became available at the sender, µs since the UNIX epoch.
    pub availability_us: u64,
    pub base_group: u64,
    pub base_index: u64,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HeaderError {
    #[error("frame header truncated")]
    Truncated,
    #[error("unsupported frame header version {0}")]
    UnsupportedVersion(u8),
    #[error("invalid frame header field: {0}")]
    Invalid(&'static str),
}

fn kind_code(kind: FrameKind) -> u8 {
    match kind {
        FrameKind::Key => 0,
        FrameKind::Reference => 1,
        FrameKind::NonReference => 2,
    }
}

fn slice_code(slice: SliceType) -> u8 {
    match slice {
        SliceType::P => 0,
        SliceType::B => 1,
        SliceType::I => 2,
        SliceType::Sp => 3,
        SliceType::Si => 4,
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

impl FrameHeader {
    /// Appends the header to `out`. Values beyond what [`decode`](Self::decode) accepts
    /// cannot occur for real media, so they are saturated rather than refused.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(HEADER_VERSION);
        out.push(kind_code(self.kind) | (slice_code(self.slice_type) << 2));
        let max = MAX_TIME_US as i64;
        let dts = self.dts.clamp(-max, max);
        let pts = self.pts.clamp(-max, max);
        for v in [
            self.decode_index,
            zigzag(dts),
            zigzag(pts - dts),
            self.duration.min(MAX_TIME_US),
            self.availability_us.min(MAX_TIME_US),
            self.base_group,
            self.base_index,
        ] {
            // Cannot fail: the value is clamped to the varint range.
            let _ = varint::encode(v.min(varint::MAX_VARINT), out);
        }
    }

    /// Parses a header from the start of `payload`, returning it and the access unit behind it.
    pub fn decode(payload: &[u8]) -> Result<(FrameHeader, &[u8]), HeaderError> {
        let [version, flags, rest @ ..] = payload else {
            return Err(HeaderError::Truncated);
        };
        if *version != HEADER_VERSION {
            return Err(HeaderError::UnsupportedVersion(*version));
        }
        if flags & 0xe0 != 0 {
            return Err(HeaderError::Invalid("reserved flag bits set"));
        }
        let kind = match flags & 0x03 {
            0 => FrameKind::Key,
            1 => FrameKind::Reference,
            2 => FrameKind::NonReference,
            _ => return Err(HeaderError::Invalid("frame kind")),
        };
        let slice_type = match (flags >> 2) & 0x07 {
            0 => SliceType::P,
            1 => SliceType::B,
            2 => SliceType::I,
            3 => SliceType::Sp,
            4 => SliceType::Si,
            _ => return Err(HeaderError::Invalid("slice type")),
        };
        let mut cursor = rest;
        let mut next = || varint::decode(&mut cursor).map_err(|_| HeaderError::Truncated);
        let decode_index = next()?;
        let dts = unzigzag(next()?);
        let cts = unzigzag(next()?);
        let duration = next()?;
        let availability_us = next()?;
        let base_group = next()?;
        let base_index = next()?;
        let in_range = |v: i64| v.unsigned_abs() <= MAX_TIME_US;
        if !in_range(dts) {
            return Err(HeaderError::Invalid("dts out of range"));
        }
        let pts = dts
            .checked_add(cts)
            .filter(|pts| in_range(*pts))
            .ok_or(HeaderError::Invalid("pts out of range"))?;
        if duration > MAX_TIME_US {
            return Err(HeaderError::Invalid("duration out of range"));
        }
        if availability_us > MAX_TIME_US {
            return Err(HeaderError::Invalid("availability time out of range"));
        }
        let header = FrameHeader {
            kind,
            slice_type,
            decode_index,
            dts,
            pts,
            duration,
            availability_us,
            base_group,
            base_index,
        };
        Ok((header, cursor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FrameHeader {
        FrameHeader {
            kind: FrameKind::NonReference,
            slice_type: SliceType::B,
            decode_index: 300,
            dts: 12_458_333,
            pts: 12_500_000,
            duration: 41_667,
            availability_us: 1_795_000_000_123_456,
            base_group: 20,
            base_index: 210,
        }
    }

    #[test]
    fn round_trip_keeps_every_field_and_the_access_unit() {
        let mut payload = Vec::new();
        sample().encode(&mut payload);
        payload.extend_from_slice(&[0, 0, 0, 1, 0x01, 0xaa]);
        let (header, au) = FrameHeader::decode(&payload).unwrap();
        assert_eq!(header, sample());
        assert_eq!(au, &[0, 0, 0, 1, 0x01, 0xaa]);
    }

    #[test]
    fn negative_timestamps_survive() {
        let h = FrameHeader {
            dts: -83_333,
            pts: 0,
            ..sample()
        };
        let mut payload = Vec::new();
        h.encode(&mut payload);
        assert_eq!(FrameHeader::decode(&payload).unwrap().0, h);
    }

    #[test]
    fn byte_layout_is_stable() {
        let h = FrameHeader {
            kind: FrameKind::Key,
            slice_type: SliceType::I,
            decode_index: 0,
            dts: -1,
            pts: 0,
            duration: 40,
            availability_us: 64,
            base_group: 1,
            base_index: 2,
        };
        let mut out = Vec::new();
        h.encode(&mut out);
        // version, flags (kind 0 | slice I=2 << 2), index 0, dts zigzag(-1)=1,
        // cts zigzag(1)=2, duration 40, availability 64 (two-byte varint), group 1, base index 2.
        assert_eq!(out, [1, 0x08, 0, 1, 2, 40, 0x40, 0x40, 1, 2]);
    }

    #[test]
    fn malformed_headers_are_errors_not_panics() {
        assert_eq!(FrameHeader::decode(&[]), Err(HeaderError::Truncated));
        assert_eq!(FrameHeader::decode(&[1]), Err(HeaderError::Truncated));
        assert_eq!(
            FrameHeader::decode(&[2, 0, 0]),
            Err(HeaderError::UnsupportedVersion(2))
        );
        assert!(matches!(
            FrameHeader::decode(&[1, 0x03, 0, 0, 0, 0, 0, 0, 0]),
            Err(HeaderError::Invalid(_))
        ));
        assert!(matches!(
            FrameHeader::decode(&[1, 0x80, 0, 0, 0, 0, 0, 0, 0]),
            Err(HeaderError::Invalid(_))
        ));
        let mut full = Vec::new();
        sample().encode(&mut full);
        for cut in 0..full.len() {
            assert!(FrameHeader::decode(&full[..cut]).is_err(), "prefix {cut}");
        }
    }

    /// Header fields as raw varints, to build what no encoder of ours writes.
    fn raw(fields: [u64; 7]) -> Vec<u8> {
        let mut out = vec![HEADER_VERSION, 0];
        for v in fields {
            varint::encode(v, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn time_fields_beyond_the_range_are_refused() {
        let big = varint::MAX_VARINT;
        let past = MAX_TIME_US + 1;
        // decode index, dts (zigzag), cts (zigzag), duration, availability, group, index
        for (fields, why) in [
            ([0, 2 * past, 0, 0, 0, 0, 0], "dts"),
            ([0, 2 * past - 1, 0, 0, 0, 0, 0], "dts"),
            ([0, 2 * MAX_TIME_US, 2, 0, 0, 0, 0], "pts"),
            ([0, 0, big, 0, 0, 0, 0], "pts"),
            ([0, 0, 0, past, 0, 0, 0], "duration"),
            // The moqsrc crash: µs beyond what a ClockTime holds in ns.
            ([0, 0, 0, 0, big, 0, 0], "availability"),
        ] {
            let err = FrameHeader::decode(&raw(fields)).unwrap_err();
            assert!(
                matches!(err, HeaderError::Invalid(what) if what.starts_with(why)),
                "{fields:?}: {err}"
            );
        }
        // The extremes of the range still decode, and indices may use all 62 bits.
        let edge = raw([big, 2 * MAX_TIME_US, 0, MAX_TIME_US, MAX_TIME_US, big, big]);
        let (h, _) = FrameHeader::decode(&edge).unwrap();
        assert_eq!((h.dts, h.pts), (MAX_TIME_US as i64, MAX_TIME_US as i64));
    }

    #[test]
    fn encoding_saturates_into_the_decodable_range() {
        let h = FrameHeader {
            dts: i64::MIN,
            pts: i64::MAX,
            duration: u64::MAX,
            availability_us: u64::MAX,
            decode_index: u64::MAX,
            ..sample()
        };
        let mut out = Vec::new();
        h.encode(&mut out);
        let (back, _) = FrameHeader::decode(&out).unwrap();
        let max = MAX_TIME_US as i64;
        assert_eq!((back.dts, back.pts), (-max, max));
        assert_eq!(
            (back.duration, back.availability_us),
            (MAX_TIME_US, MAX_TIME_US)
        );
        assert_eq!(back.decode_index, varint::MAX_VARINT);
    }
}
