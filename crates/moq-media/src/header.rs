//! The frame header carried at the start of every video object payload.
//!
//! Relays do not forward object extension headers (DESIGN.md §3), so everything a
//! receiver needs to place a frame in time travels inside the payload, ahead of the
//! access-unit bytes. The layout is versioned so fields can be added later:
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
    /// Appends the header to `out`. Values beyond 2^62 cannot occur for real media
    /// (that is 146 000 years of microseconds), so they are saturated rather than refused.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(HEADER_VERSION);
        out.push(kind_code(self.kind) | (slice_code(self.slice_type) << 2));
        let cts = self.pts.saturating_sub(self.dts);
        for v in [
            self.decode_index,
            zigzag(self.dts),
            zigzag(cts),
            self.duration,
            self.availability_us,
            self.base_group,
            self.base_index,
        ] {
            varint::encode(v.min(varint::MAX_VARINT), out).expect("value clamped to varint range");
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
        let pts = dts
            .checked_add(cts)
            .ok_or(HeaderError::Invalid("pts out of range"))?;
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
}
