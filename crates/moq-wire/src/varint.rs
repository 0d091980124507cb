//! QUIC variable-length integers (RFC 9000 §16): the two most significant bits of the first
//! byte give the total length (1, 2, 4 or 8 bytes), the remaining bits the value, big-endian.

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
}
