//! Variable-length integers. Drafts up to 16 use QUIC's (RFC 9000 §16, the functions at the
//! top level): the two most significant bits of the first byte give the total length (1, 2, 4
//! or 8 bytes), the remaining bits the value, big-endian. From draft-17 on the drafts use
//! their own 64-bit form ([`vi64`]). Code shared between drafts that differ only in the integer
//! form is written against [`Form`].

use crate::cursor::{read_u8, take};
use crate::{DecodeError, EncodeError};

/// The largest value a variable-length integer can carry, 2^62 - 1.
pub const MAX_VARINT: u64 = (1 << 62) - 1;

/// Number of bytes the shortest encoding of `v` takes (8 for anything above 2^30 - 1,
/// including values above [`MAX_VARINT`], which [`encode`] rejects).
pub fn encoded_len(v: u64) -> usize {
    match v {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Appends the shortest encoding of `v`.
pub fn encode(v: u64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if v > MAX_VARINT {
        return Err(EncodeError::VarintOutOfRange(v));
    }
    let len = encoded_len(v);
    // The length prefix (0b00, 0b01, 0b10, 0b11) is log2 of the byte count.
    let prefix = (len.trailing_zeros() as u64) << (len * 8 - 2);
    out.extend_from_slice(&(v | prefix).to_be_bytes()[8 - len..]);
    Ok(())
}

/// Reads one variable-length integer and advances `buf` past it. Longer-than-needed encodings
/// are accepted, as RFC 9000 requires. On [`DecodeError::Incomplete`] `buf` is left as it was.
pub fn decode(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut rest = *buf;
    let first = read_u8(&mut rest)?;
    let len = 1usize << (first >> 6);
    let tail = take(&mut rest, len as u64 - 1)?;
    let value = tail
        .iter()
        .fold(u64::from(first & 0x3f), |acc, &b| (acc << 8) | u64::from(b));
    *buf = rest;
    Ok(value)
}

/// An integer encoding, for codec code that drafts share apart from it.
pub(crate) trait Form {
    /// The largest value the form carries.
    const MAX: u64;
    fn get(buf: &mut &[u8]) -> Result<u64, DecodeError>;
    fn put(v: u64, out: &mut Vec<u8>) -> Result<(), EncodeError>;
}

/// QUIC's variable-length integers (drafts 14 and 16).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quic;

impl Form for Quic {
    const MAX: u64 = MAX_VARINT;

    fn get(buf: &mut &[u8]) -> Result<u64, DecodeError> {
        decode(buf)
    }

    fn put(v: u64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        encode(v, out)
    }
}

/// The drafts' own variable-length integers (`vi64`, draft-17 on).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Vi64;

impl Form for Vi64 {
    const MAX: u64 = u64::MAX;

    fn get(buf: &mut &[u8]) -> Result<u64, DecodeError> {
        vi64::decode(buf)
    }

    fn put(v: u64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        vi64::encode(v, out);
        Ok(())
    }
}

/// The `vi64` integers of draft-17 on: the number of leading 1 bits of the first byte is the
/// number of bytes that follow it (0 to 8), the bits after the first 0 and the following bytes
/// the value, big-endian. Every 64-bit value fits, so encoding cannot fail; nine bytes (a
/// first byte of all ones) carry a whole `u64` after it.
pub mod vi64 {
    use crate::DecodeError;
    use crate::cursor::{read_u8, take};

    /// Bytes the shortest encoding of `v` takes: 7 value bits per byte up to 8 bytes, then 9.
    pub fn encoded_len(v: u64) -> usize {
        let bits = 64 - v.leading_zeros() as usize;
        if bits > 56 {
            9
        } else {
            bits.div_ceil(7).max(1)
        }
    }

    /// Appends the shortest encoding of `v`.
    pub fn encode(v: u64, out: &mut Vec<u8>) {
        let len = encoded_len(v);
        if len == 9 {
            out.push(0xff);
            out.extend_from_slice(&v.to_be_bytes());
            return;
        }
        // `len - 1` leading ones, then a zero, in the first byte.
        let marker = !(0xffu16 >> (len - 1)) as u8;
        let bytes = v.to_be_bytes();
        let mut first = bytes[8 - len];
        first |= marker;
        out.push(first);
        out.extend_from_slice(&bytes[9 - len..]);
    }

    /// Reads one integer and advances `buf` past it. Longer-than-needed encodings are
    /// accepted, as the drafts allow. On [`DecodeError::Incomplete`] `buf` is left as it was.
    pub fn decode(buf: &mut &[u8]) -> Result<u64, DecodeError> {
        let mut rest = *buf;
        let first = read_u8(&mut rest)?;
        let more = first.leading_ones() as u64;
        let tail = take(&mut rest, more)?;
        // The bits after the marker (none in the first byte of the 9-byte form).
        let high = u64::from(first) & (0xff >> (more + 1));
        let value = tail.iter().fold(high, |acc, &b| (acc << 8) | u64::from(b));
        *buf = rest;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode(v, &mut out).unwrap();
        out
    }

    #[test]
    fn boundaries_use_the_shortest_form() {
        for (v, len) in [
            (0, 1),
            (63, 1),
            (64, 2),
            (16383, 2),
            (16384, 4),
            ((1 << 30) - 1, 4),
            (1 << 30, 8),
            (MAX_VARINT, 8),
        ] {
            let bytes = enc(v);
            assert_eq!(bytes.len(), len, "{v}");
            assert_eq!(encoded_len(v), len);
            let mut slice = bytes.as_slice();
            assert_eq!(decode(&mut slice).unwrap(), v);
            assert!(slice.is_empty());
        }
    }

    #[test]
    fn rejects_values_above_62_bits() {
        let mut out = Vec::new();
        assert_eq!(
            encode(MAX_VARINT + 1, &mut out),
            Err(EncodeError::VarintOutOfRange(MAX_VARINT + 1))
        );
        assert!(out.is_empty());
    }

    #[test]
    fn incomplete_leaves_the_input_untouched() {
        let bytes = [0x80, 0x01, 0x02];
        let mut slice = &bytes[..];
        assert_eq!(decode(&mut slice), Err(DecodeError::Incomplete));
        assert_eq!(slice.len(), 3);
    }

    fn vi64(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        vi64::encode(v, &mut out);
        out
    }

    #[test]
    fn vi64_examples_of_the_draft() {
        // The table of example encodings in draft-ietf-moq-transport-19 §1.4.1.
        for (hex, value) in [
            ("25", 37u64),
            ("8025", 37),
            ("bbbd", 15_293),
            ("ed7f3e7d", 226_442_877),
            ("faa1a0e403d8", 2_893_212_287_960),
            ("fc8998abc66bc0", 151_288_809_941_952),
            ("fefa318fa8e3ca11", 70_423_237_261_249_041),
            ("ffffffffffffffffff", u64::MAX),
        ] {
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let mut slice = bytes.as_slice();
            assert_eq!(vi64::decode(&mut slice), Ok(value), "{hex}");
            assert!(slice.is_empty(), "{hex}");
        }
        // The shortest forms of those values.
        assert_eq!(vi64(37), [0x25]);
        assert_eq!(vi64(15_293), [0xbb, 0xbd]);
        assert_eq!(vi64(226_442_877), [0xed, 0x7f, 0x3e, 0x7d]);
        assert_eq!(vi64(u64::MAX), [0xff; 9]);
    }

    #[test]
    fn vi64_boundaries_round_trip_in_the_shortest_form() {
        let mut values = vec![0, u64::MAX];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1 << bits]);
        }
        for v in values {
            let bytes = vi64(v);
            assert_eq!(bytes.len(), vi64::encoded_len(v), "{v:#x}");
            let expected = match 64 - v.leading_zeros() {
                0..=7 => 1,
                bits @ 8..=56 => (bits as usize).div_ceil(7),
                _ => 9,
            };
            assert_eq!(bytes.len(), expected, "{v:#x}");
            let mut slice = bytes.as_slice();
            assert_eq!(vi64::decode(&mut slice), Ok(v), "{v:#x}");
            assert!(slice.is_empty());
        }
    }

    #[test]
    fn vi64_incomplete_leaves_the_input_untouched() {
        for bytes in [&[][..], &[0x80], &[0xfe, 0, 0, 0, 0, 0, 0], &[0xff; 8]] {
            let mut slice = bytes;
            assert_eq!(vi64::decode(&mut slice), Err(DecodeError::Incomplete));
            assert_eq!(slice.len(), bytes.len());
        }
    }
}
