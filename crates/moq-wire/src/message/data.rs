//! Objects on unidirectional streams (subgroup and fetch streams) and in datagrams.
//!
//! Only headers are encoded and decoded here; payload bytes are never copied. A stream reader
//! decodes the stream header once, then for each object decodes its header and reads
//! `payload_len` bytes of payload straight from the stream. A datagram's payload is whatever
//! follows its header.
//!
//! Unlike control messages, stream data has no framing, so running out of bytes is always
//! [`DecodeError::Incomplete`] here. The encoders cannot fail on values a peer could send; a
//! field that cannot be represented (a varint above 2^62 - 1, or a combination the draft
//! forbids, listed under each encoder's "Panics") is a bug in the caller and panics.

use crate::cursor::{read_u8, take};
use crate::{DecodeError, varint};

use super::common::{get, put_infallible};
use super::params::decode_extensions;

const FETCH_HEADER: u64 = 0x05;

/// Subgroup header type bits (on top of 0x10).
const EXTENSIONS_BIT: u64 = 0x01;
const FIRST_OBJECT_ID_BIT: u64 = 0x02;
const EXPLICIT_SUBGROUP_BIT: u64 = 0x04;
const END_OF_GROUP_BIT: u64 = 0x08;

/// How a subgroup stream names its subgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubgroupId {
    /// Subgroup 0, not sent.
    Zero,
    /// The ID of the first object on the stream, not sent.
    FirstObjectId,
    /// Sent in the header.
    Explicit(u64),
}

impl SubgroupId {
    /// The subgroup ID, given the ID of the first object on the stream.
    pub fn resolve(self, first_object_id: u64) -> u64 {
        match self {
            Self::Zero => 0,
            Self::FirstObjectId => first_object_id,
            Self::Explicit(id) => id,
        }
    }
}

/// The header that opens a subgroup stream: which track, group and subgroup its objects belong
/// to, and how they are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubgroupHeader {
    pub track_alias: u64,
    pub group_id: u64,
    pub subgroup_id: SubgroupId,
    pub publisher_priority: u8,
    /// Every object on the stream carries an extension block (possibly empty).
    pub extensions_present: bool,
    /// The last object before FIN is the last object of the group.
    pub contains_end_of_group: bool,
}

impl SubgroupHeader {
    /// The stream type (0x10..=0x1D) this header's flags select.
    pub fn stream_type(&self) -> u64 {
        let subgroup_bits = match self.subgroup_id {
            SubgroupId::Zero => 0,
            SubgroupId::FirstObjectId => FIRST_OBJECT_ID_BIT,
            SubgroupId::Explicit(_) => EXPLICIT_SUBGROUP_BIT,
        };
        0x10 | subgroup_bits
            | if self.extensions_present {
                EXTENSIONS_BIT
            } else {
                0
            }
            | if self.contains_end_of_group {
                END_OF_GROUP_BIT
            } else {
                0
            }
    }

    /// Appends the header, stream type included.
    ///
    /// # Panics
    /// If an ID exceeds 2^62 - 1.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_infallible(self.stream_type(), out);
        put_infallible(self.track_alias, out);
        put_infallible(self.group_id, out);
        if let SubgroupId::Explicit(id) = self.subgroup_id {
            put_infallible(id, out);
        }
        out.push(self.publisher_priority);
    }

    fn read(stream_type: u64, buf: &mut &[u8]) -> Result<Self, DecodeError> {
        let track_alias = get(buf)?;
        let group_id = get(buf)?;
        let subgroup_id = match stream_type & (FIRST_OBJECT_ID_BIT | EXPLICIT_SUBGROUP_BIT) {
            0 => SubgroupId::Zero,
            FIRST_OBJECT_ID_BIT => SubgroupId::FirstObjectId,
            _ => SubgroupId::Explicit(get(buf)?),
        };
        Ok(Self {
            track_alias,
            group_id,
            subgroup_id,
            publisher_priority: read_u8(buf)?,
            extensions_present: stream_type & EXTENSIONS_BIT != 0,
            contains_end_of_group: stream_type & END_OF_GROUP_BIT != 0,
        })
    }
}

/// The header that opens a fetch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FetchHeader {
    /// The FETCH this stream answers.
    pub request_id: u64,
}

impl FetchHeader {
    /// Appends the header, stream type included.
    ///
    /// # Panics
    /// If the request ID exceeds 2^62 - 1.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_infallible(FETCH_HEADER, out);
        put_infallible(self.request_id, out);
    }
}

/// The header at the start of any unidirectional data stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataStreamHeader {
    Subgroup(SubgroupHeader),
    Fetch(FetchHeader),
}

impl DataStreamHeader {
    /// Decodes the stream header from the front of `buf`, returning it and the bytes used.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut rest = buf;
        let stream_type = get(&mut rest)?;
        let header = match stream_type {
            FETCH_HEADER => Self::Fetch(FetchHeader {
                request_id: get(&mut rest)?,
            }),
            // 0x16, 0x17, 0x1E and 0x1F would set both subgroup bits.
            0x10..=0x1D if stream_type & 0x06 != 0x06 => {
                Self::Subgroup(SubgroupHeader::read(stream_type, &mut rest)?)
            }
            _ => return Err(DecodeError::UnknownStreamType(stream_type)),
        };
        Ok((header, buf.len() - rest.len()))
    }

    /// Appends the header, stream type included.
    ///
    /// # Panics
    /// If an ID exceeds 2^62 - 1.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Subgroup(header) => header.encode(out),
            Self::Fetch(header) => header.encode(out),
        }
    }
}

/// What an object is: ordinary data, or a marker standing in for objects that will never come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum ObjectStatus {
    #[default]
    Normal = 0,
    /// This object does not exist and never will.
    DoesNotExist = 1,
    /// The group has no objects from this ID on.
    EndOfGroup = 3,
    /// The track has no objects from this location on.
    EndOfTrack = 4,
}

impl ObjectStatus {
    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        match get(buf)? {
            0 => Ok(Self::Normal),
            1 => Ok(Self::DoesNotExist),
            3 => Ok(Self::EndOfGroup),
            4 => Ok(Self::EndOfTrack),
            _ => Err(DecodeError::ProtocolViolation("unknown object status")),
        }
    }

    fn write(self, out: &mut Vec<u8>) {
        put_infallible(self as u64, out);
    }
}

/// Reads a length-prefixed extension block, checking that it parses as Key-Value-Pairs.
fn read_extensions(buf: &mut &[u8]) -> Result<Vec<u8>, DecodeError> {
    let len = get(buf)?;
    let block = take(buf, len)?;
    decode_extensions(block)?;
    Ok(block.to_vec())
}

fn write_extensions(block: &[u8], out: &mut Vec<u8>) {
    put_infallible(block.len() as u64, out);
    out.extend_from_slice(block);
}

/// Reads the payload length and, for an empty payload, the status that follows it.
fn read_length_and_status(buf: &mut &[u8]) -> Result<(u64, ObjectStatus), DecodeError> {
    let payload_len = get(buf)?;
    let status = if payload_len == 0 {
        ObjectStatus::read(buf)?
    } else {
        ObjectStatus::Normal
    };
    Ok((payload_len, status))
}

fn write_length_and_status(payload_len: u64, status: ObjectStatus, out: &mut Vec<u8>) {
    put_infallible(payload_len, out);
    if payload_len == 0 {
        status.write(out);
    } else {
        assert_eq!(
            status,
            ObjectStatus::Normal,
            "only empty objects carry a status"
        );
    }
}

/// An object that does not exist may not carry extension headers.
fn check_extensions_allowed(status: ObjectStatus, extensions: &[u8]) -> Result<(), DecodeError> {
    if status == ObjectStatus::DoesNotExist && !extensions.is_empty() {
        return Err(DecodeError::ProtocolViolation(
            "non-existent object with extension headers",
        ));
    }
    Ok(())
}

/// The fields of one object on a subgroup stream, up to (not including) its payload, so a
/// reader can pass the payload on as it arrives.
///
/// `extensions` holds the raw extension header block exactly as on the wire (without its length
/// prefix): relays must forward unknown extensions unchanged, and keeping the bytes makes that
/// free. [`super::decode_extensions`] / [`super::encode_extensions`] convert to and from
/// Key-Value-Pairs; decoding already checked that the block parses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SubgroupObjectHeader {
    /// Object ID minus the previous object's ID minus 1, or the object ID itself for the first
    /// object on the stream; see [`SubgroupObjectHeader::object_id`].
    pub object_id_delta: u64,
    pub extensions: Vec<u8>,
    /// Payload bytes following the header.
    pub payload_len: u64,
    /// Always [`ObjectStatus::Normal`] when `payload_len` is not zero.
    pub status: ObjectStatus,
}

impl SubgroupObjectHeader {
    /// The object's ID, given the previous object's ID on the same stream (`None` for the
    /// first object). An ID beyond 2^62 - 1 is a protocol violation.
    pub fn object_id(&self, previous: Option<u64>) -> Result<u64, DecodeError> {
        let id = match previous {
            None => Some(self.object_id_delta),
            Some(prev) => prev
                .checked_add(self.object_id_delta)
                .and_then(|id| id.checked_add(1)),
        };
        id.filter(|&id| id <= varint::MAX_VARINT)
            .ok_or(DecodeError::ProtocolViolation("object ID out of range"))
    }

    /// The delta to send for `object_id` after `previous`; `None` if the IDs do not increase.
    pub fn object_id_delta(previous: Option<u64>, object_id: u64) -> Option<u64> {
        match previous {
            None => Some(object_id),
            Some(prev) => object_id.checked_sub(prev)?.checked_sub(1),
        }
    }

    /// Appends the header; `extensions_present` comes from the stream's [`SubgroupHeader`].
    ///
    /// # Panics
    /// If a field exceeds 2^62 - 1, if `extensions` is non-empty on a stream without
    /// extensions, or if a non-empty object has a status other than Normal.
    pub fn encode(&self, extensions_present: bool, out: &mut Vec<u8>) {
        put_infallible(self.object_id_delta, out);
        if extensions_present {
            write_extensions(&self.extensions, out);
        } else {
            assert!(
                self.extensions.is_empty(),
                "extensions on a subgroup stream without extensions"
            );
        }
        write_length_and_status(self.payload_len, self.status, out);
    }

    /// Decodes an object header from the front of `buf`, returning it and the bytes used.
    /// The next `payload_len` bytes of the stream are the payload.
    pub fn decode(buf: &[u8], extensions_present: bool) -> Result<(Self, usize), DecodeError> {
        let mut rest = buf;
        let object_id_delta = get(&mut rest)?;
        let extensions = if extensions_present {
            read_extensions(&mut rest)?
        } else {
            Vec::new()
        };
        let (payload_len, status) = read_length_and_status(&mut rest)?;
        check_extensions_allowed(status, &extensions)?;
        let header = Self {
            object_id_delta,
            extensions,
            payload_len,
            status,
        };
        Ok((header, buf.len() - rest.len()))
    }
}

/// The fields of one object on a fetch stream, up to (not including) its payload. Fetch
/// objects name their full location since a fetch spans groups. `extensions` is the raw block,
/// as in [`SubgroupObjectHeader`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FetchObjectHeader {
    pub group_id: u64,
    /// For objects of a datagram track, equal to the object ID.
    pub subgroup_id: u64,
    pub object_id: u64,
    pub publisher_priority: u8,
    pub extensions: Vec<u8>,
    pub payload_len: u64,
    /// Always [`ObjectStatus::Normal`] when `payload_len` is not zero.
    pub status: ObjectStatus,
}

impl FetchObjectHeader {
    /// Appends the header.
    ///
    /// # Panics
    /// If a field exceeds 2^62 - 1, or if a non-empty object has a status other than Normal.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_infallible(self.group_id, out);
        put_infallible(self.subgroup_id, out);
        put_infallible(self.object_id, out);
        out.push(self.publisher_priority);
        write_extensions(&self.extensions, out);
        write_length_and_status(self.payload_len, self.status, out);
    }

    /// Decodes an object header from the front of `buf`, returning it and the bytes used.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut rest = buf;
        let group_id = get(&mut rest)?;
        let subgroup_id = get(&mut rest)?;
        let object_id = get(&mut rest)?;
        let publisher_priority = read_u8(&mut rest)?;
        let extensions = read_extensions(&mut rest)?;
        let (payload_len, status) = read_length_and_status(&mut rest)?;
        check_extensions_allowed(status, &extensions)?;
        let header = Self {
            group_id,
            subgroup_id,
            object_id,
            publisher_priority,
            extensions,
            payload_len,
            status,
        };
        Ok((header, buf.len() - rest.len()))
    }
}

/// Datagram type bits.
const DATAGRAM_END_OF_GROUP_BIT: u64 = 0x02;
const DATAGRAM_NO_OBJECT_ID_BIT: u64 = 0x04;
const DATAGRAM_STATUS: u64 = 0x20;

/// The header of an OBJECT_DATAGRAM; the rest of the datagram is the payload.
///
/// The encoder picks the shortest of the ten datagram types that fits: the object ID is left
/// out when it is 0 (payload datagrams only), and the extension block is sent only when it is
/// non-empty. `extensions` is the raw block, as in [`SubgroupObjectHeader`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DatagramHeader {
    pub track_alias: u64,
    pub group_id: u64,
    pub object_id: u64,
    pub publisher_priority: u8,
    pub extensions: Vec<u8>,
    /// This object is the last of its group (payload datagrams only).
    pub end_of_group: bool,
    /// `Some` for a status datagram, which has no payload; `None` when a payload follows.
    pub status: Option<ObjectStatus>,
}

impl DatagramHeader {
    /// The datagram type (0x00..=0x07, 0x20 or 0x21) this header is sent as.
    pub fn datagram_type(&self) -> u64 {
        let extensions = if self.extensions.is_empty() {
            0
        } else {
            EXTENSIONS_BIT
        };
        if self.status.is_some() {
            return DATAGRAM_STATUS | extensions;
        }
        extensions
            | if self.end_of_group {
                DATAGRAM_END_OF_GROUP_BIT
            } else {
                0
            }
            | if self.object_id == 0 {
                DATAGRAM_NO_OBJECT_ID_BIT
            } else {
                0
            }
    }

    /// Appends the header; for a payload datagram the caller appends the payload.
    ///
    /// # Panics
    /// If a field exceeds 2^62 - 1, or if `end_of_group` is set on a status datagram (send
    /// [`ObjectStatus::EndOfGroup`] instead).
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(
            !(self.end_of_group && self.status.is_some()),
            "status datagrams cannot carry the end-of-group flag"
        );
        let datagram_type = self.datagram_type();
        put_infallible(datagram_type, out);
        put_infallible(self.track_alias, out);
        put_infallible(self.group_id, out);
        if datagram_type & DATAGRAM_NO_OBJECT_ID_BIT == 0 {
            put_infallible(self.object_id, out);
        }
        out.push(self.publisher_priority);
        if !self.extensions.is_empty() {
            write_extensions(&self.extensions, out);
        }
        if let Some(status) = self.status {
            status.write(out);
        }
    }

    /// Decodes the header of a whole datagram, returning it and the offset of the payload
    /// (`buf.len()` for a status datagram). A datagram arrives whole, so one that ends inside
    /// the header is a protocol violation, never [`DecodeError::Incomplete`].
    pub fn decode(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        Self::read(buf).map_err(|err| match err {
            DecodeError::Incomplete => DecodeError::ProtocolViolation("truncated datagram"),
            other => other,
        })
    }

    fn read(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut rest = buf;
        let datagram_type = get(&mut rest)?;
        let is_status = match datagram_type {
            0x00..=0x07 => false,
            0x20 | 0x21 => true,
            _ => return Err(DecodeError::UnknownDatagramType(datagram_type)),
        };
        let track_alias = get(&mut rest)?;
        let group_id = get(&mut rest)?;
        let object_id = if datagram_type & DATAGRAM_NO_OBJECT_ID_BIT == 0 {
            get(&mut rest)?
        } else {
            0
        };
        let publisher_priority = read_u8(&mut rest)?;
        let extensions = if datagram_type & EXTENSIONS_BIT != 0 {
            let block = read_extensions(&mut rest)?;
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
            let status = ObjectStatus::read(&mut rest)?;
            check_extensions_allowed(status, &extensions)?;
            if !rest.is_empty() {
                return Err(DecodeError::ProtocolViolation(
                    "status datagram with a payload",
                ));
            }
            Some(status)
        } else {
            None
        };
        let header = Self {
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
}
