//! Draft-16 Key-Value-Pairs: each pair's type is sent as the difference from the type of the
//! pair before it (the first from 0), so a list is always in ascending type order and a
//! repeated type shows up as a difference of 0.
//!
//! The same encoding serves setup parameters, message parameters, track extensions and object
//! extension headers. The values are [`KeyValuePair`]s with absolute types, as in draft-14;
//! only the wire form differs. Later drafts keep the encoding with their own integers (for
//! setup options, track properties and object properties), so the readers and writers here
//! take the integer form; draft-16's are QUIC's.

use crate::message::common::{read_bytes_in, write_bytes_in};
use crate::message::{KeyValuePair, MAX_KVP_BYTES_LEN, Value};
use crate::varint::{Form, Quic};
use crate::{DecodeError, EncodeError};

const TOO_LONG: &str = "key-value byte value longer than 65535";
const OVERFLOW: &str = "key-value type beyond 2^64 - 1";
const OVERRUN: &str = "extension headers overrun their length";

/// Even types carry an integer, odd types a byte string.
fn carries_int(key: u64) -> bool {
    key.is_multiple_of(2)
}

/// Reads one pair whose type follows `previous` (0 before the first pair).
fn read_pair<F: Form>(buf: &mut &[u8], previous: &mut u64) -> Result<KeyValuePair, DecodeError> {
    let delta = F::get(buf)?;
    let key = previous
        .checked_add(delta)
        .ok_or(DecodeError::ProtocolViolation(OVERFLOW))?;
    let value = if carries_int(key) {
        Value::Int(F::get(buf)?)
    } else {
        Value::Bytes(read_bytes_in::<F>(buf, MAX_KVP_BYTES_LEN, TOO_LONG)?.to_vec())
    };
    *previous = key;
    Ok(KeyValuePair { key, value })
}

/// Writes one pair after a pair of type `previous`; the caller sorted the pairs.
fn write_pair<F: Form>(
    pair: &KeyValuePair,
    previous: u64,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let delta = pair.key - previous;
    match (&pair.value, carries_int(pair.key)) {
        (Value::Int(v), true) => {
            F::put(delta, out)?;
            F::put(*v, out)
        }
        (Value::Bytes(bytes), false) => {
            if bytes.len() > MAX_KVP_BYTES_LEN {
                return Err(EncodeError::Invalid(TOO_LONG));
            }
            F::put(delta, out)?;
            write_bytes_in::<F>(bytes, out)
        }
        (Value::Int(_), false) => Err(EncodeError::Invalid("integer value under an odd key")),
        (Value::Bytes(_), true) => Err(EncodeError::Invalid("byte value under an even key")),
    }
}

/// Writes `pairs` in ascending type order (pairs of equal type keep their order), without a
/// count (a block whose end is known otherwise).
pub(crate) fn write_block_in<F: Form>(
    pairs: &[KeyValuePair],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut sorted: Vec<&KeyValuePair> = pairs.iter().collect();
    sorted.sort_by_key(|pair| pair.key);
    let mut previous = 0;
    for pair in sorted {
        write_pair::<F>(pair, previous, out)?;
        previous = pair.key;
    }
    Ok(())
}

/// [`write_block_in`] with QUIC integers.
pub(crate) fn write_block(pairs: &[KeyValuePair], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    write_block_in::<Quic>(pairs, out)
}

/// Reads a count, then that many pairs.
pub(crate) fn read_list(buf: &mut &[u8]) -> Result<Vec<KeyValuePair>, DecodeError> {
    let count = Quic::get(buf)?;
    let mut previous = 0;
    let mut pairs = Vec::new();
    for _ in 0..count {
        pairs.push(read_pair::<Quic>(buf, &mut previous)?);
    }
    Ok(pairs)
}

/// Writes the number of pairs, then the pairs sorted by type.
pub(crate) fn write_list(pairs: &[KeyValuePair], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    Quic::put(pairs.len() as u64, out)?;
    write_block(pairs, out)
}

/// Reads pairs until `block` is used up; a pair cut off by the end of the block is a
/// KEY_VALUE_FORMATTING_ERROR.
pub(crate) fn read_block_in<F: Form>(mut block: &[u8]) -> Result<Vec<KeyValuePair>, DecodeError> {
    let mut previous = 0;
    let mut pairs = Vec::new();
    while !block.is_empty() {
        let pair = read_pair::<F>(&mut block, &mut previous).map_err(|err| match err {
            DecodeError::Incomplete => DecodeError::KeyValueFormatting(OVERRUN),
            other => other,
        })?;
        pairs.push(pair);
    }
    Ok(pairs)
}

/// [`read_block_in`] with QUIC integers.
pub(crate) fn read_block(block: &[u8]) -> Result<Vec<KeyValuePair>, DecodeError> {
    read_block_in::<Quic>(block)
}

/// Serialises object extension headers into the draft-16 block carried on the wire (without
/// its length prefix): sorted by type, types delta-coded. This is the form the
/// `extensions` fields of [`crate::message::SubgroupObjectHeader`],
/// [`crate::message::FetchObjectHeader`] and [`crate::message::DatagramHeader`] hold when
/// they travel with the draft-16 codec.
pub fn encode_extensions(headers: &[KeyValuePair]) -> Result<Vec<u8>, EncodeError> {
    let mut block = Vec::new();
    write_block(headers, &mut block)?;
    Ok(block)
}

/// Parses a draft-16 object extension header block into pairs with absolute types, in wire
/// order (which is ascending). A pair cut off by the end of the block is a
/// KEY_VALUE_FORMATTING_ERROR; a type beyond 2^64 - 1 a PROTOCOL_VIOLATION.
pub fn decode_extensions(block: &[u8]) -> Result<Vec<KeyValuePair>, DecodeError> {
    read_block(block)
}

/// True if a type in `single` appears more than once in `pairs`.
pub(crate) fn has_repeat(pairs: &[KeyValuePair], single: &[u64]) -> bool {
    single
        .iter()
        .any(|&key| pairs.iter().filter(|p| p.key == key).count() > 1)
}

/// The integer value of the first pair of type `key`.
pub(crate) fn int_of(pairs: &[KeyValuePair], key: u64) -> Option<u64> {
    pairs.iter().find_map(|p| match p.value {
        Value::Int(v) if p.key == key => Some(v),
        _ => None,
    })
}

/// The byte value of the first pair of type `key`.
pub(crate) fn bytes_of(pairs: &[KeyValuePair], key: u64) -> Option<&[u8]> {
    pairs.iter().find_map(|p| match &p.value {
        Value::Bytes(v) if p.key == key => Some(v.as_slice()),
        _ => None,
    })
}
