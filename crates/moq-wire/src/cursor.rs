//! Bounds-checked reads from a byte slice that advance it, so no decoder ever indexes past the
//! end of its input.

use crate::DecodeError;

/// Splits `n` bytes off the front of `buf`.
pub(crate) fn take<'a>(buf: &mut &'a [u8], n: u64) -> Result<&'a [u8], DecodeError> {
    let n = usize::try_from(n).map_err(|_| DecodeError::Incomplete)?;
    if n > buf.len() {
        return Err(DecodeError::Incomplete);
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Ok(head)
}

/// Reads one byte.
pub(crate) fn read_u8(buf: &mut &[u8]) -> Result<u8, DecodeError> {
    let (&first, rest) = buf.split_first().ok_or(DecodeError::Incomplete)?;
    *buf = rest;
    Ok(first)
}

/// Reads a big-endian 16-bit integer.
pub(crate) fn read_u16(buf: &mut &[u8]) -> Result<u16, DecodeError> {
    let bytes = take(buf, 2)?;
    Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
}
