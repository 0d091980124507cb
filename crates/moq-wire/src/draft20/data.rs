//! Draft-20 data streams and datagrams: draft-16's design ([`crate::draft16`]) with `vi64`
//! integers, the FIRST_OBJECT bit of subgroup headers (0x40: the stream starts at the first
//! object of its subgroup), which the model does not keep, and the End of Timed-Out Range
//! entry of fetch streams.

use crate::draft16::FetchObject;
use crate::draft16::data::{
    DataForm, Prior, decode_data_stream_header_in, decode_datagram_in, decode_subgroup_object_in,
    encode_data_stream_header_in, encode_datagram_in, encode_subgroup_object_in,
};
use crate::message::{DataStreamHeader, DatagramHeader, SubgroupObjectHeader};
use crate::varint::Vi64;
use crate::{DecodeError, EncodeError};

/// Draft-20's data plane.
pub(crate) struct D20;

impl DataForm for D20 {
    type Int = Vi64;
    const MAX_ID: u64 = u64::MAX;
    const MORE_SUBGROUP_BITS: u64 = 0x40;
    const TIMED_OUT_RANGE: bool = true;
    const NO_DOES_NOT_EXIST: &'static str = "draft-20 has no 'does not exist' object status";
    const NOT_PAIRS: &'static str = "extension block is not draft-20 Key-Value-Pairs";
}

/// Appends a stream header, stream type included; the priority byte is left out when
/// `default_priority` is `Some` and equal to the header's priority.
pub fn encode_data_stream_header(
    header: &DataStreamHeader,
    default_priority: Option<u8>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_data_stream_header_in::<D20>(header, default_priority, out)
}

/// Decodes the header at the start of a unidirectional stream, returning it and the bytes
/// used; a subgroup header without a priority byte gets `default_priority(track_alias)`.
pub fn decode_data_stream_header(
    buf: &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<(DataStreamHeader, usize), DecodeError> {
    decode_data_stream_header_in::<D20>(buf, default_priority)
}

/// Appends the header of an object on a subgroup stream.
pub fn encode_subgroup_object(
    header: &SubgroupObjectHeader,
    extensions_present: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_subgroup_object_in::<D20>(header, extensions_present, out)
}

/// Decodes the header of an object on a subgroup stream, returning it and the bytes used.
pub fn decode_subgroup_object(
    buf: &[u8],
    extensions_present: bool,
) -> Result<(SubgroupObjectHeader, usize), DecodeError> {
    decode_subgroup_object_in::<D20>(buf, extensions_present)
}

/// Appends a datagram header, leaving the priority out as [`encode_data_stream_header`]
/// does.
pub fn encode_datagram(
    header: &DatagramHeader,
    default_priority: Option<u8>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_datagram_in::<D20>(header, default_priority, out)
}

/// Decodes the header of a whole datagram, returning it and the offset of its payload.
pub fn decode_datagram(
    buf: &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<(DatagramHeader, usize), DecodeError> {
    decode_datagram_in::<D20>(buf, default_priority)
}

/// Reads the objects of one draft-20 fetch stream (after its header). One per stream.
#[derive(Debug, Clone, Default)]
pub struct FetchObjectReader {
    prior: Prior,
}

impl FetchObjectReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes the next entry from the front of `buf`, returning it and the bytes used; the
    /// reader only advances on success.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(FetchObject, usize), DecodeError> {
        self.prior.decode::<D20>(buf)
    }
}

/// Writes the objects of one draft-20 fetch stream (after its header). One per stream.
#[derive(Debug, Clone, Default)]
pub struct FetchObjectWriter {
    prior: Prior,
}

impl FetchObjectWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the next entry; for an object, the caller then appends its payload. On error
    /// nothing is written and the writer does not advance.
    pub fn encode(&mut self, entry: &FetchObject, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.prior.encode::<D20>(entry, out)
    }
}
