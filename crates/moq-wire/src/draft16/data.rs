//! Draft-16 data streams and datagrams, read into and written from the message model's header types.
//!
//! As in draft-14 only headers are handled; payload bytes are the caller's. What draft-16
//! changes on the data plane:
//!
//! - Subgroup headers and datagrams may leave the publisher priority out (stream types
//!   0x30..=0x3D, datagram bit 0x08); the object then has the track's default publisher
//!   priority. Decoders ask the caller for it by track alias, encoders leave the byte out when
//!   the caller says what the default is and the header matches it.
//! - Extension header blocks delta-code their types ([`super::encode_extensions`] and
//!   [`super::decode_extensions`]); the `extensions` fields hold draft-16 blocks.
//! - The "object does not exist" status (0x1) is gone, and no object that is not Normal may
//!   carry extension headers.
//! - Fetch objects leave out what they share with the object before them, so reading and
//!   writing a fetch stream needs state: [`FetchObjectReader`] and [`FetchObjectWriter`].
//!
//! Unlike the draft-14 encoders, these return an error for a header they cannot write
//! instead of panicking.

use crate::cursor::{read_u8, take};
use crate::message::{
    DataStreamHeader, DatagramHeader, FetchHeader, FetchObjectHeader, Location, ObjectStatus,
    SubgroupHeader, SubgroupId, SubgroupObjectHeader,
};
use crate::varint::{Form, Quic};
use crate::{DecodeError, EncodeError, varint};

use super::kvp::read_block_in;

/// What sets apart the data planes of the drafts that share draft-16's design.
pub(crate) trait DataForm {
    /// The integers.
    type Int: Form;
    /// The largest ID the integers carry.
    const MAX_ID: u64;
    /// Subgroup header type bits draft-16 does not have (draft-20's FIRST_OBJECT).
    const MORE_SUBGROUP_BITS: u64;
    /// Whether fetch streams may carry an End of Timed-Out Range (draft-20).
    const TIMED_OUT_RANGE: bool;
    /// Refusal of the "does not exist" status, which these drafts dropped.
    const NO_DOES_NOT_EXIST: &'static str;
    /// Refusal of an extension block that is not Key-Value-Pairs of the draft.
    const NOT_PAIRS: &'static str;
}

/// Draft-16's data plane.
pub(crate) struct D16;

impl DataForm for D16 {
    type Int = Quic;
    const MAX_ID: u64 = varint::MAX_VARINT;
    const MORE_SUBGROUP_BITS: u64 = 0;
    const TIMED_OUT_RANGE: bool = false;
    const NO_DOES_NOT_EXIST: &'static str = "draft-16 has no 'does not exist' object status";
    const NOT_PAIRS: &'static str = "extension block is not draft-16 Key-Value-Pairs";
}

fn get<D: DataForm>(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    D::Int::get(buf)
}

fn put<D: DataForm>(v: u64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    D::Int::put(v, out)
}

const FETCH_HEADER: u64 = 0x05;

/// Subgroup header type bits.
const EXTENSIONS_BIT: u64 = 0x01;
const SUBGROUP_MODE_MASK: u64 = 0x06;
const FIRST_OBJECT_ID_BIT: u64 = 0x02;
const END_OF_GROUP_BIT: u64 = 0x08;
const DEFAULT_PRIORITY_BIT: u64 = 0x20;

/// Writes integers one after another.
fn put_all<D: DataForm>(values: &[u64], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    values.iter().try_for_each(|&v| put::<D>(v, out))
}

/// Runs `write`, leaving `out` as it was if it fails.
fn atomically(
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let result = write(out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// The draft-16 stream type of a subgroup header: draft-14's type (0x10..=0x1D), plus 0x20
/// when the priority byte is left out.
pub fn subgroup_stream_type(header: &SubgroupHeader, priority_omitted: bool) -> u64 {
    header.stream_type()
        | if priority_omitted {
            DEFAULT_PRIORITY_BIT
        } else {
            0
        }
}

/// [`encode_data_stream_header`] in the form `D`.
pub(crate) fn encode_data_stream_header_in<D: DataForm>(
    header: &DataStreamHeader,
    default_priority: Option<u8>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    atomically(out, |out| match header {
        DataStreamHeader::Subgroup(h) => {
            let omitted = default_priority == Some(h.publisher_priority);
            put_all::<D>(
                &[subgroup_stream_type(h, omitted), h.track_alias, h.group_id],
                out,
            )?;
            if let SubgroupId::Explicit(id) = h.subgroup_id {
                put::<D>(id, out)?;
            }
            if !omitted {
                out.push(h.publisher_priority);
            }
            Ok(())
        }
        DataStreamHeader::Fetch(h) => put_all::<D>(&[FETCH_HEADER, h.request_id], out),
    })
}

/// [`decode_data_stream_header`] in the form `D`.
pub(crate) fn decode_data_stream_header_in<D: DataForm>(
    buf: &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<(DataStreamHeader, usize), DecodeError> {
    let mut rest = buf;
    let stream_type = get::<D>(&mut rest)?;
    let header = match stream_type {
        FETCH_HEADER => DataStreamHeader::Fetch(FetchHeader {
            request_id: get::<D>(&mut rest)?,
        }),
        stream_type if is_subgroup_type::<D>(stream_type) => DataStreamHeader::Subgroup(
            read_subgroup_header::<D>(stream_type, &mut rest, default_priority)?,
        ),
        _ => return Err(DecodeError::UnknownStreamType(stream_type)),
    };
    Ok((header, buf.len() - rest.len()))
}

/// Whether `stream_type` names a subgroup header in `D`'s form: bit 4 set, no bit the form
/// does not define, and not the reserved subgroup ID mode 0b11.
fn is_subgroup_type<D: DataForm>(stream_type: u64) -> bool {
    const SUBGROUP_BIT: u64 = 0x10;
    let defined = SUBGROUP_BIT
        | EXTENSIONS_BIT
        | SUBGROUP_MODE_MASK
        | END_OF_GROUP_BIT
        | DEFAULT_PRIORITY_BIT
        | D::MORE_SUBGROUP_BITS;
    stream_type & SUBGROUP_BIT != 0
        && stream_type & !defined == 0
        && stream_type & SUBGROUP_MODE_MASK != SUBGROUP_MODE_MASK
}

fn read_subgroup_header<D: DataForm>(
    stream_type: u64,
    buf: &mut &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<SubgroupHeader, DecodeError> {
    let track_alias = get::<D>(buf)?;
    let group_id = get::<D>(buf)?;
    let subgroup_id = match stream_type & SUBGROUP_MODE_MASK {
        0 => SubgroupId::Zero,
        FIRST_OBJECT_ID_BIT => SubgroupId::FirstObjectId,
        _ => SubgroupId::Explicit(get::<D>(buf)?),
    };
    let publisher_priority = if stream_type & DEFAULT_PRIORITY_BIT != 0 {
        default_priority(track_alias)
    } else {
        read_u8(buf)?
    };
    Ok(SubgroupHeader {
        track_alias,
        group_id,
        subgroup_id,
        publisher_priority,
        extensions_present: stream_type & EXTENSIONS_BIT != 0,
        contains_end_of_group: stream_type & END_OF_GROUP_BIT != 0,
    })
}

// ---------------------------------------------------------------------------------------------
// Objects on subgroup streams

const NOT_NORMAL_WITH_EXTENSIONS: &str = "extension headers on an object that is not Normal";

fn read_status<D: DataForm>(buf: &mut &[u8]) -> Result<ObjectStatus, DecodeError> {
    match get::<D>(buf)? {
        0 => Ok(ObjectStatus::Normal),
        3 => Ok(ObjectStatus::EndOfGroup),
        4 => Ok(ObjectStatus::EndOfTrack),
        _ => Err(DecodeError::ProtocolViolation("unknown object status")),
    }
}

/// Reads a length-prefixed extension block, checking that it parses as draft-16 pairs.
fn read_extensions<D: DataForm>(buf: &mut &[u8]) -> Result<Vec<u8>, DecodeError> {
    let len = get::<D>(buf)?;
    let block = take(buf, len)?;
    read_block_in::<D::Int>(block)?;
    Ok(block.to_vec())
}

fn write_extensions<D: DataForm>(block: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    read_block_in::<D::Int>(block).map_err(|_| EncodeError::Invalid(D::NOT_PAIRS))?;
    put::<D>(block.len() as u64, out)?;
    out.extend_from_slice(block);
    Ok(())
}

/// Writes the payload length and, for an empty payload, the status.
fn write_length_and_status<D: DataForm>(
    payload_len: u64,
    status: ObjectStatus,
    extensions: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if status != ObjectStatus::Normal && !extensions.is_empty() {
        return Err(EncodeError::Invalid(NOT_NORMAL_WITH_EXTENSIONS));
    }
    put::<D>(payload_len, out)?;
    if payload_len != 0 {
        if status != ObjectStatus::Normal {
            return Err(EncodeError::Invalid("only empty objects carry a status"));
        }
        return Ok(());
    }
    match status {
        ObjectStatus::DoesNotExist => Err(EncodeError::Invalid(D::NO_DOES_NOT_EXIST)),
        status => put::<D>(status as u64, out),
    }
}

/// [`encode_subgroup_object`] in the form `D`.
pub(crate) fn encode_subgroup_object_in<D: DataForm>(
    header: &SubgroupObjectHeader,
    extensions_present: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    atomically(out, |out| {
        put::<D>(header.object_id_delta, out)?;
        if extensions_present {
            write_extensions::<D>(&header.extensions, out)?;
        } else if !header.extensions.is_empty() {
            return Err(EncodeError::Invalid(
                "extensions on a subgroup stream without extensions",
            ));
        }
        write_length_and_status::<D>(header.payload_len, header.status, &header.extensions, out)
    })
}

/// [`decode_subgroup_object`] in the form `D`.
pub(crate) fn decode_subgroup_object_in<D: DataForm>(
    buf: &[u8],
    extensions_present: bool,
) -> Result<(SubgroupObjectHeader, usize), DecodeError> {
    let mut rest = buf;
    let object_id_delta = get::<D>(&mut rest)?;
    let extensions = if extensions_present {
        read_extensions::<D>(&mut rest)?
    } else {
        Vec::new()
    };
    let payload_len = get::<D>(&mut rest)?;
    let status = if payload_len == 0 {
        read_status::<D>(&mut rest)?
    } else {
        ObjectStatus::Normal
    };
    if status != ObjectStatus::Normal && !extensions.is_empty() {
        return Err(DecodeError::ProtocolViolation(NOT_NORMAL_WITH_EXTENSIONS));
    }
    let header = SubgroupObjectHeader {
        object_id_delta,
        extensions,
        payload_len,
        status,
    };
    Ok((header, buf.len() - rest.len()))
}

// ---------------------------------------------------------------------------------------------
// Objects on fetch streams

/// Serialization Flags bits.
const FLAG_SUBGROUP_MODE: u64 = 0x03;
const SUBGROUP_IS_ZERO: u64 = 0x00;
const SUBGROUP_IS_PRIOR: u64 = 0x01;
const SUBGROUP_IS_NEXT: u64 = 0x02;
const SUBGROUP_IS_SENT: u64 = 0x03;
const FLAG_OBJECT_ID: u64 = 0x04;
const FLAG_GROUP_ID: u64 = 0x08;
const FLAG_PRIORITY: u64 = 0x10;
const FLAG_EXTENSIONS: u64 = 0x20;
const FLAG_DATAGRAM: u64 = 0x40;
/// Serialization Flags values at or above this one are not flags.
const FLAGS_END: u64 = 0x80;
const END_OF_NON_EXISTENT_RANGE: u64 = 0x8C;
const END_OF_UNKNOWN_RANGE: u64 = 0x10C;
const END_OF_TIMED_OUT_RANGE: u64 = 0x20C;

const NO_PRIOR: &str = "fetch object refers to a prior object that is not there";
const OUT_OF_RANGE: &str = "fetch object ID out of range";

/// One entry on a fetch stream of draft-16 or later.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FetchObject {
    /// An object; `header.payload_len` bytes of payload follow. `header.status` is always
    /// [`ObjectStatus::Normal`] (these fetch objects carry no status; an empty payload is an
    /// empty Normal object) and `header.extensions` is a block of the draft.
    Object {
        header: FetchObjectHeader,
        /// The object was published as a datagram and has no subgroup: as in draft-14,
        /// `header.subgroup_id` then equals `header.object_id`.
        datagram: bool,
    },
    /// No object exists after the previous entry (or from the start of the range) up to and
    /// including `end`. Draft-14 expressed a single missing object with the "does not exist"
    /// status; see [`FetchObject::from_draft14`].
    NonExistentRange { end: Location },
    /// The publisher does not know which objects exist after the previous entry up to and
    /// including `end`.
    UnknownRange { end: Location },
    /// The publisher gave up waiting for the objects after the previous entry up to and
    /// including `end` (draft-20's FILL_TIMEOUT ran out; draft-16 has no such entry).
    TimedOutRange { end: Location },
}

impl FetchObject {
    /// The draft-16 form of a draft-14 fetch object header: a Normal object becomes an
    /// object (not a datagram), a "does not exist" one a non-existent range ending at it
    /// (draft-14 reads gaps in a fetch stream as missing objects too, so the range says the
    /// same thing). End of Group and End of Track have no draft-16 form in a fetch.
    pub fn from_draft14(header: FetchObjectHeader) -> Result<Self, EncodeError> {
        match header.status {
            ObjectStatus::Normal => Ok(Self::Object {
                header,
                datagram: false,
            }),
            ObjectStatus::DoesNotExist => Ok(Self::NonExistentRange {
                end: Location::new(header.group_id, header.object_id),
            }),
            ObjectStatus::EndOfGroup | ObjectStatus::EndOfTrack => Err(EncodeError::Invalid(
                "draft-16 fetch streams carry no End of Group / End of Track status",
            )),
        }
    }
}

/// What the next fetch object may refer back to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Prior {
    /// Group and object of the previous entry, object or range end.
    location: Option<Location>,
    /// Subgroup of the last object; `None` before the first object or after a datagram
    /// object, which has none.
    subgroup: Option<u64>,
    /// Priority of the last object.
    priority: Option<u8>,
}

impl Prior {
    fn after(self, entry: &FetchObject) -> Self {
        match entry {
            FetchObject::Object { header, datagram } => Self {
                location: Some(Location::new(header.group_id, header.object_id)),
                subgroup: (!datagram).then_some(header.subgroup_id),
                priority: Some(header.publisher_priority),
            },
            FetchObject::NonExistentRange { end }
            | FetchObject::UnknownRange { end }
            | FetchObject::TimedOutRange { end } => Self {
                location: Some(*end),
                ..self
            },
        }
    }

    /// The object ID one past the previous entry's.
    fn next_object<D: DataForm>(self) -> Option<u64> {
        let id = self.location?.object.checked_add(1)?;
        (id <= D::MAX_ID).then_some(id)
    }

    /// The subgroup ID one past the last object's.
    fn next_subgroup<D: DataForm>(self) -> Option<u64> {
        let id = self.subgroup?.checked_add(1)?;
        (id <= D::MAX_ID).then_some(id)
    }

    /// Decodes the entry after this one, in `D`'s form; see [`FetchObjectReader::decode`].
    pub(crate) fn decode<D: DataForm>(
        &mut self,
        buf: &[u8],
    ) -> Result<(FetchObject, usize), DecodeError> {
        let mut rest = buf;
        let flags = get::<D>(&mut rest)?;
        let entry = match flags {
            END_OF_NON_EXISTENT_RANGE => FetchObject::NonExistentRange {
                end: read_location::<D>(&mut rest)?,
            },
            END_OF_UNKNOWN_RANGE => FetchObject::UnknownRange {
                end: read_location::<D>(&mut rest)?,
            },
            END_OF_TIMED_OUT_RANGE if D::TIMED_OUT_RANGE => FetchObject::TimedOutRange {
                end: read_location::<D>(&mut rest)?,
            },
            flags if flags < FLAGS_END => read_fetch_object::<D>(flags, &mut rest, *self)?,
            _ => {
                return Err(DecodeError::ProtocolViolation(
                    "unknown fetch object serialization flags",
                ));
            }
        };
        *self = self.after(&entry);
        Ok((entry, buf.len() - rest.len()))
    }

    /// Appends the entry after this one, in `D`'s form; see [`FetchObjectWriter::encode`].
    pub(crate) fn encode<D: DataForm>(
        &mut self,
        entry: &FetchObject,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let prior = *self;
        atomically(out, |out| match entry {
            FetchObject::Object { header, datagram } => {
                write_fetch_object::<D>(header, *datagram, prior, out)
            }
            FetchObject::NonExistentRange { end } => {
                put_all::<D>(&[END_OF_NON_EXISTENT_RANGE, end.group, end.object], out)
            }
            FetchObject::UnknownRange { end } => {
                put_all::<D>(&[END_OF_UNKNOWN_RANGE, end.group, end.object], out)
            }
            FetchObject::TimedOutRange { end } if D::TIMED_OUT_RANGE => {
                put_all::<D>(&[END_OF_TIMED_OUT_RANGE, end.group, end.object], out)
            }
            FetchObject::TimedOutRange { .. } => Err(EncodeError::Invalid(
                "the draft has no End of Timed-Out Range",
            )),
        })?;
        *self = self.after(entry);
        Ok(())
    }
}

/// Reads the objects of one draft-16 fetch stream (after its [`FetchHeader`]), remembering
/// what the next object may refer back to. Use one reader per stream.
#[derive(Debug, Clone, Default)]
pub struct FetchObjectReader {
    prior: Prior,
}

impl FetchObjectReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes the next entry from the front of `buf`, returning it and the bytes used. For an
    /// object, the next `payload_len` bytes of the stream are its payload, to be consumed
    /// before decoding again. The reader only advances on success.
    ///
    /// An End of Range entry is read as its flags, Group ID and Object ID, without a payload
    /// length: draft-16 lists no other field for it, and implementations agree.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(FetchObject, usize), DecodeError> {
        self.prior.decode::<D16>(buf)
    }
}

fn read_location<D: DataForm>(buf: &mut &[u8]) -> Result<Location, DecodeError> {
    Ok(Location::new(get::<D>(buf)?, get::<D>(buf)?))
}

fn read_fetch_object<D: DataForm>(
    flags: u64,
    buf: &mut &[u8],
    prior: Prior,
) -> Result<FetchObject, DecodeError> {
    let datagram = flags & FLAG_DATAGRAM != 0;
    let mode = flags & FLAG_SUBGROUP_MODE;
    // Refuse references to a missing prior object before reading on, so the error does not
    // depend on how much of the object has arrived.
    let needs_location = flags & (FLAG_GROUP_ID | FLAG_OBJECT_ID) != FLAG_GROUP_ID | FLAG_OBJECT_ID;
    let needs_subgroup = !datagram && matches!(mode, SUBGROUP_IS_PRIOR | SUBGROUP_IS_NEXT);
    let needs_priority = flags & FLAG_PRIORITY == 0;
    if (needs_location && prior.location.is_none())
        || (needs_subgroup && prior.subgroup.is_none())
        || (needs_priority && prior.priority.is_none())
    {
        return Err(DecodeError::ProtocolViolation(NO_PRIOR));
    }
    if (!datagram && mode == SUBGROUP_IS_NEXT && prior.next_subgroup::<D>().is_none())
        || (flags & FLAG_OBJECT_ID == 0 && prior.next_object::<D>().is_none())
    {
        return Err(DecodeError::ProtocolViolation(OUT_OF_RANGE));
    }
    let violation = DecodeError::ProtocolViolation;
    let group_id = match prior.location {
        _ if flags & FLAG_GROUP_ID != 0 => get::<D>(buf)?,
        Some(location) => location.group,
        None => return Err(violation(NO_PRIOR)),
    };
    let subgroup_id = match mode {
        _ if datagram => None,
        SUBGROUP_IS_ZERO => Some(0),
        SUBGROUP_IS_PRIOR => Some(prior.subgroup.ok_or(violation(NO_PRIOR))?),
        SUBGROUP_IS_NEXT => Some(prior.next_subgroup::<D>().ok_or(violation(OUT_OF_RANGE))?),
        _ => Some(get::<D>(buf)?),
    };
    let object_id = if flags & FLAG_OBJECT_ID != 0 {
        get::<D>(buf)?
    } else {
        prior.next_object::<D>().ok_or(violation(OUT_OF_RANGE))?
    };
    let publisher_priority = match prior.priority {
        _ if flags & FLAG_PRIORITY != 0 => read_u8(buf)?,
        Some(priority) => priority,
        None => return Err(violation(NO_PRIOR)),
    };
    let extensions = if flags & FLAG_EXTENSIONS != 0 {
        read_extensions::<D>(buf)?
    } else {
        Vec::new()
    };
    let payload_len = get::<D>(buf)?;
    Ok(FetchObject::Object {
        header: FetchObjectHeader {
            group_id,
            subgroup_id: subgroup_id.unwrap_or(object_id),
            object_id,
            publisher_priority,
            extensions,
            payload_len,
            status: ObjectStatus::Normal,
        },
        datagram,
    })
}

/// Writes the objects of one fetch stream (after its [`FetchHeader`]), leaving out what the
/// reader can take from the entry before. Use one writer per stream.
#[derive(Debug, Clone, Default)]
pub struct FetchObjectWriter {
    prior: Prior,
}

impl FetchObjectWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the next entry; for an object, the caller then appends its `payload_len`
    /// bytes of payload. On error nothing is written and the writer does not advance.
    pub fn encode(&mut self, entry: &FetchObject, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.prior.encode::<D16>(entry, out)
    }

    /// Appends a draft-14 fetch object header in its draft-16 form
    /// ([`FetchObject::from_draft14`]).
    pub fn encode_draft14(
        &mut self,
        header: &FetchObjectHeader,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        self.encode(&FetchObject::from_draft14(header.clone())?, out)
    }
}

fn write_fetch_object<D: DataForm>(
    header: &FetchObjectHeader,
    datagram: bool,
    prior: Prior,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if header.status != ObjectStatus::Normal {
        return Err(EncodeError::Invalid(
            "draft-16 fetch objects carry no status (see FetchObject::from_draft14)",
        ));
    }
    if datagram && header.subgroup_id != header.object_id {
        return Err(EncodeError::Invalid(
            "a datagram object's subgroup_id must equal its object_id",
        ));
    }
    for v in [
        header.group_id,
        header.subgroup_id,
        header.object_id,
        header.payload_len,
    ] {
        if v > D::MAX_ID {
            return Err(EncodeError::VarintOutOfRange(v));
        }
    }
    let mut flags = 0;
    let group_sent = prior.location.map(|l| l.group) != Some(header.group_id);
    if group_sent {
        flags |= FLAG_GROUP_ID;
    }
    let object_sent = prior.next_object::<D>() != Some(header.object_id);
    if object_sent {
        flags |= FLAG_OBJECT_ID;
    }
    let priority_sent = prior.priority != Some(header.publisher_priority);
    if priority_sent {
        flags |= FLAG_PRIORITY;
    }
    let mode = if datagram {
        flags |= FLAG_DATAGRAM;
        SUBGROUP_IS_ZERO
    } else if header.subgroup_id == 0 {
        SUBGROUP_IS_ZERO
    } else if prior.subgroup == Some(header.subgroup_id) {
        SUBGROUP_IS_PRIOR
    } else if prior.next_subgroup::<D>() == Some(header.subgroup_id) {
        SUBGROUP_IS_NEXT
    } else {
        SUBGROUP_IS_SENT
    };
    flags |= mode;
    if !header.extensions.is_empty() {
        flags |= FLAG_EXTENSIONS;
    }
    put::<D>(flags, out)?;
    if group_sent {
        put::<D>(header.group_id, out)?;
    }
    if !datagram && mode == SUBGROUP_IS_SENT {
        put::<D>(header.subgroup_id, out)?;
    }
    if object_sent {
        put::<D>(header.object_id, out)?;
    }
    if priority_sent {
        out.push(header.publisher_priority);
    }
    if !header.extensions.is_empty() {
        write_extensions::<D>(&header.extensions, out)?;
    }
    put::<D>(header.payload_len, out)
}

// ---------------------------------------------------------------------------------------------
// Datagrams

/// Datagram type bits.
const DATAGRAM_EXTENSIONS_BIT: u64 = 0x01;
const DATAGRAM_END_OF_GROUP_BIT: u64 = 0x02;
const DATAGRAM_ZERO_OBJECT_ID_BIT: u64 = 0x04;
const DATAGRAM_DEFAULT_PRIORITY_BIT: u64 = 0x08;
const DATAGRAM_STATUS_BIT: u64 = 0x20;
/// Bits a datagram type may have.
const DATAGRAM_BITS: u64 = 0x2F;

/// The draft-16 type of a datagram header (0x00..=0x0F, or 0x20..=0x2D for status
/// datagrams), given whether the priority is left out.
pub fn datagram_type(header: &DatagramHeader, priority_omitted: bool) -> u64 {
    let bit = |on: bool, bit: u64| if on { bit } else { 0 };
    bit(!header.extensions.is_empty(), DATAGRAM_EXTENSIONS_BIT)
        | bit(header.end_of_group, DATAGRAM_END_OF_GROUP_BIT)
        | bit(header.object_id == 0, DATAGRAM_ZERO_OBJECT_ID_BIT)
        | bit(priority_omitted, DATAGRAM_DEFAULT_PRIORITY_BIT)
        | bit(header.status.is_some(), DATAGRAM_STATUS_BIT)
}

/// [`encode_datagram`] in the form `D`.
pub(crate) fn encode_datagram_in<D: DataForm>(
    header: &DatagramHeader,
    default_priority: Option<u8>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if header.end_of_group && header.status.is_some() {
        return Err(EncodeError::Invalid(
            "status datagrams cannot carry the end-of-group flag",
        ));
    }
    if header.status.is_some_and(|s| s != ObjectStatus::Normal) && !header.extensions.is_empty() {
        return Err(EncodeError::Invalid(NOT_NORMAL_WITH_EXTENSIONS));
    }
    if header.status == Some(ObjectStatus::DoesNotExist) {
        return Err(EncodeError::Invalid(D::NO_DOES_NOT_EXIST));
    }
    let omitted = default_priority == Some(header.publisher_priority);
    let datagram_type = datagram_type(header, omitted);
    atomically(out, |out| {
        put_all::<D>(&[datagram_type, header.track_alias, header.group_id], out)?;
        if header.object_id != 0 {
            put::<D>(header.object_id, out)?;
        }
        if !omitted {
            out.push(header.publisher_priority);
        }
        if !header.extensions.is_empty() {
            write_extensions::<D>(&header.extensions, out)?;
        }
        match header.status {
            Some(status) => put::<D>(status as u64, out),
            None => Ok(()),
        }
    })
}

/// [`decode_datagram`] in the form `D`.
pub(crate) fn decode_datagram_in<D: DataForm>(
    buf: &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<(DatagramHeader, usize), DecodeError> {
    read_datagram::<D>(buf, default_priority).map_err(|err| match err {
        DecodeError::Incomplete => DecodeError::ProtocolViolation("truncated datagram"),
        other => other,
    })
}

fn read_datagram<D: DataForm>(
    buf: &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<(DatagramHeader, usize), DecodeError> {
    let mut rest = buf;
    let datagram_type = get::<D>(&mut rest)?;
    let is_status = datagram_type & DATAGRAM_STATUS_BIT != 0;
    if datagram_type & !DATAGRAM_BITS != 0
        || (is_status && datagram_type & DATAGRAM_END_OF_GROUP_BIT != 0)
    {
        return Err(DecodeError::UnknownDatagramType(datagram_type));
    }
    let track_alias = get::<D>(&mut rest)?;
    let group_id = get::<D>(&mut rest)?;
    let object_id = if datagram_type & DATAGRAM_ZERO_OBJECT_ID_BIT == 0 {
        get::<D>(&mut rest)?
    } else {
        0
    };
    let publisher_priority = if datagram_type & DATAGRAM_DEFAULT_PRIORITY_BIT != 0 {
        default_priority(track_alias)
    } else {
        read_u8(&mut rest)?
    };
    let extensions = if datagram_type & DATAGRAM_EXTENSIONS_BIT != 0 {
        let block = read_extensions::<D>(&mut rest)?;
        if block.is_empty() {
            return Err(DecodeError::ProtocolViolation(
                "datagram announces extensions but has none",
            ));
        }
        block
    } else {
        Vec::new()
    };
    let status = if is_status {
        let status = read_status::<D>(&mut rest)?;
        if status != ObjectStatus::Normal && !extensions.is_empty() {
            return Err(DecodeError::ProtocolViolation(NOT_NORMAL_WITH_EXTENSIONS));
        }
        if !rest.is_empty() {
            return Err(DecodeError::ProtocolViolation(
                "status datagram with a payload",
            ));
        }
        Some(status)
    } else {
        None
    };
    let header = DatagramHeader {
        track_alias,
        group_id,
        object_id,
        publisher_priority,
        extensions,
        end_of_group: datagram_type & DATAGRAM_END_OF_GROUP_BIT != 0,
        status,
    };
    Ok((header, buf.len() - rest.len()))
}

// ---------------------------------------------------------------------------------------------
// Draft-16's form

/// Appends a stream header, stream type included.
///
/// A subgroup header leaves its priority byte out (type 0x30..=0x3D) when `default_priority`
/// is `Some` and equal to the header's priority: pass the track's default publisher priority
/// as the peer knows it (128 unless the track announced another), or `None` to always send
/// the byte.
pub fn encode_data_stream_header(
    header: &DataStreamHeader,
    default_priority: Option<u8>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_data_stream_header_in::<D16>(header, default_priority, out)
}

/// Decodes the header at the start of a unidirectional stream, returning it and the bytes
/// used.
///
/// A subgroup header without a priority byte (type 0x30..=0x3D) gets
/// `default_priority(track_alias)`: the default publisher priority of that track (128 when
/// the track announced none, or when the caller does not track it).
pub fn decode_data_stream_header(
    buf: &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<(DataStreamHeader, usize), DecodeError> {
    decode_data_stream_header_in::<D16>(buf, default_priority)
}

/// Appends the header of an object on a subgroup stream; `extensions_present` comes from the
/// stream's [`SubgroupHeader`]. `header.extensions` must be a draft-16 block.
pub fn encode_subgroup_object(
    header: &SubgroupObjectHeader,
    extensions_present: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_subgroup_object_in::<D16>(header, extensions_present, out)
}

/// Decodes the header of an object on a subgroup stream, returning it and the bytes used;
/// the next `payload_len` bytes of the stream are the payload. Object IDs follow from the
/// deltas as in draft-14 ([`SubgroupObjectHeader::object_id`]).
pub fn decode_subgroup_object(
    buf: &[u8],
    extensions_present: bool,
) -> Result<(SubgroupObjectHeader, usize), DecodeError> {
    decode_subgroup_object_in::<D16>(buf, extensions_present)
}

/// Appends a datagram header; for a payload datagram the caller appends the payload. The
/// priority is left out as for [`encode_data_stream_header`]; the object ID is left out when
/// it is 0 and the extension block when it is empty.
pub fn encode_datagram(
    header: &DatagramHeader,
    default_priority: Option<u8>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_datagram_in::<D16>(header, default_priority, out)
}

/// Decodes the header of a whole datagram, returning it and the offset of the payload
/// (`buf.len()` for a status datagram). A datagram that leaves its priority out gets
/// `default_priority(track_alias)`, as in [`decode_data_stream_header`]. A datagram arrives
/// whole, so one that ends inside the header is a protocol violation.
pub fn decode_datagram(
    buf: &[u8],
    default_priority: &dyn Fn(u64) -> u8,
) -> Result<(DatagramHeader, usize), DecodeError> {
    decode_datagram_in::<D16>(buf, default_priority)
}
