//! Building blocks shared by control messages and data streams: the field encodings of the
//! draft's notational conventions and the small value types built from them.

use crate::cursor::{read_u8, take};
use crate::varint::{Form, Quic};
use crate::{DecodeError, EncodeError, varint};

use super::{
    MAX_FULL_TRACK_NAME_LEN, MAX_GOAWAY_URI_LEN, MAX_NAMESPACE_FIELDS, MAX_REASON_PHRASE_LEN,
};

/// A value with a fixed wire form that needs no outside context to read or write.
pub(crate) trait Wire: Sized {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError>;
}

/// Reads a varint.
pub(crate) fn get(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    varint::decode(buf)
}

/// Writes a varint.
pub(crate) fn put(v: u64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    varint::encode(v, out)
}

/// Writes a varint for encoders that cannot fail. Identifiers near 2^62 do not occur in
/// practice, so overflowing one is treated as a bug in the caller.
pub(super) fn put_infallible(v: u64, out: &mut Vec<u8>) {
    if let Err(err) = varint::encode(v, out) {
        panic!("{err}");
    }
}

/// Writes a length-prefixed byte string.
pub(crate) fn write_bytes(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    write_bytes_in::<Quic>(bytes, out)
}

/// Writes a length-prefixed byte string, the length in the integer form `F`.
pub(crate) fn write_bytes_in<F: Form>(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    F::put(bytes.len() as u64, out)?;
    out.extend_from_slice(bytes);
    Ok(())
}

/// Reads a length-prefixed byte string of at most `max` bytes. The limit is checked before
/// waiting for the bytes, so an oversize length fails at once instead of looking incomplete.
pub(crate) fn read_bytes<'a>(
    buf: &mut &'a [u8],
    max: usize,
    too_long: &'static str,
) -> Result<&'a [u8], DecodeError> {
    read_bytes_in::<Quic>(buf, max, too_long)
}

/// [`read_bytes`], the length in the integer form `F`.
pub(crate) fn read_bytes_in<'a, F: Form>(
    buf: &mut &'a [u8],
    max: usize,
    too_long: &'static str,
) -> Result<&'a [u8], DecodeError> {
    let len = F::get(buf)?;
    if len > max as u64 {
        return Err(DecodeError::ProtocolViolation(too_long));
    }
    take(buf, len)
}

/// Writes an 8-bit 0/1 field.
pub(crate) fn write_flag(flag: bool, out: &mut Vec<u8>) {
    out.push(u8::from(flag));
}

/// Reads an 8-bit field that may only be 0 or 1.
pub(crate) fn read_flag(buf: &mut &[u8], invalid: &'static str) -> Result<bool, DecodeError> {
    match read_u8(buf)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::ProtocolViolation(invalid)),
    }
}

/// A length-prefixed UTF-8 text field with a size limit, and the complaints to make about it.
/// Invalid UTF-8 is rejected rather than repaired, so whatever decodes can be sent on unchanged.
pub(crate) struct Text {
    max: usize,
    too_long: &'static str,
    not_utf8: &'static str,
}

impl Text {
    pub(crate) fn write(&self, text: &str, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.write_in::<Quic>(text, out)
    }

    pub(crate) fn read(&self, buf: &mut &[u8]) -> Result<String, DecodeError> {
        self.read_in::<Quic>(buf)
    }

    pub(crate) fn write_in<F: Form>(
        &self,
        text: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        if text.len() > self.max {
            return Err(EncodeError::Invalid(self.too_long));
        }
        write_bytes_in::<F>(text.as_bytes(), out)
    }

    pub(crate) fn read_in<F: Form>(&self, buf: &mut &[u8]) -> Result<String, DecodeError> {
        let bytes = read_bytes_in::<F>(buf, self.max, self.too_long)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::ProtocolViolation(self.not_utf8))
    }
}

/// The Reason Phrase of error messages.
pub(crate) const REASON_PHRASE: Text = Text {
    max: MAX_REASON_PHRASE_LEN,
    too_long: "reason phrase longer than 1024 bytes",
    not_utf8: "reason phrase is not UTF-8",
};

/// The New Session URI of GOAWAY.
pub(crate) const GOAWAY_URI: Text = Text {
    max: MAX_GOAWAY_URI_LEN,
    too_long: "GOAWAY URI longer than 8192 bytes",
    not_utf8: "GOAWAY URI is not UTF-8",
};

/// A bare `u64` field is a varint.
impl Wire for u64 {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(*self, out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        get(buf)
    }
}

/// A position in a track: the ordering (group first, then object) is the draft's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Location {
    pub group: u64,
    pub object: u64,
}

impl Location {
    pub fn new(group: u64, object: u64) -> Self {
        Self { group, object }
    }

    pub(crate) fn write_in<F: Form>(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        F::put(self.group, out)?;
        F::put(self.object, out)
    }

    pub(crate) fn read_in<F: Form>(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            group: F::get(buf)?,
            object: F::get(buf)?,
        })
    }
}

impl Wire for Location {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.write_in::<Quic>(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Self::read_in::<Quic>(buf)
    }
}

const NAMESPACE_FIELDS: &str = "track namespace must have 1 to 32 fields";
const NAME_TOO_LONG: &str = "full track name longer than 4096 bytes";

/// The namespace half of a Full Track Name: an ordered tuple of 1 to 32 byte strings.
///
/// The field count is checked when encoding and decoding, as is the 4096-byte budget that the
/// fields share with the track name (a namespace on its own gets the whole budget, since no
/// track inside a longer one could be named).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrackNamespace(pub Vec<Vec<u8>>);

impl TrackNamespace {
    /// Splits a `/`-separated path into fields: `"anon/demo"` becomes `("anon", "demo")`.
    pub fn from_path(path: &str) -> Self {
        Self(path.split('/').map(|f| f.as_bytes().to_vec()).collect())
    }

    /// Joins the fields with `/`, replacing bytes that are not UTF-8. For display and for
    /// mapping to URL-like names; not an exact inverse when a field contains `/`.
    pub fn to_path(&self) -> String {
        let fields: Vec<_> = self.0.iter().map(|f| String::from_utf8_lossy(f)).collect();
        fields.join("/")
    }

    /// True when `prefix`'s fields are the first fields of `self` (whole fields compared as
    /// bytes), the matching rule of SUBSCRIBE_NAMESPACE.
    pub fn starts_with(&self, prefix: &TrackNamespace) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// Sum of the field lengths, the namespace's share of the Full Track Name limit.
    pub fn byte_len(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }

    /// Reads a namespace whose fields may use at most `budget` bytes in total.
    fn read_within(buf: &mut &[u8], budget: usize) -> Result<Self, DecodeError> {
        let namespace = Self::read_fields(buf, budget)?;
        if namespace.0.is_empty() {
            return Err(DecodeError::ProtocolViolation(NAMESPACE_FIELDS));
        }
        Ok(namespace)
    }

    /// Reads 0 to 32 fields using at most `budget` bytes.
    fn read_fields(buf: &mut &[u8], budget: usize) -> Result<Self, DecodeError> {
        Self::read_fields_in::<Quic>(buf, budget)
    }

    /// [`Self::read_fields`] in the integer form `F`.
    pub(crate) fn read_fields_in<F: Form>(
        buf: &mut &[u8],
        budget: usize,
    ) -> Result<Self, DecodeError> {
        let count = F::get(buf)?;
        if count > MAX_NAMESPACE_FIELDS as u64 {
            return Err(DecodeError::ProtocolViolation(NAMESPACE_FIELDS));
        }
        let mut left = budget;
        let mut fields = Vec::new();
        for _ in 0..count {
            let field = read_bytes_in::<F>(buf, left, NAME_TOO_LONG)?;
            left -= field.len();
            fields.push(field.to_vec());
        }
        Ok(Self(fields))
    }

    /// Writes 0 to 32 fields of at most 4096 bytes in all, in the integer form `F`.
    pub(crate) fn write_fields_in<F: Form>(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.0.len() > MAX_NAMESPACE_FIELDS {
            return Err(EncodeError::Invalid(NAMESPACE_FIELDS));
        }
        if self.byte_len() > MAX_FULL_TRACK_NAME_LEN {
            return Err(EncodeError::Invalid(NAME_TOO_LONG));
        }
        F::put(self.0.len() as u64, out)?;
        self.0
            .iter()
            .try_for_each(|field| write_bytes_in::<F>(field, out))
    }
}

/// The namespace prefix of SUBSCRIBE_NAMESPACE and UNSUBSCRIBE_NAMESPACE.
///
/// Draft-14 forbids an empty prefix, but deployed relays (moq-relay) send one to mean
/// "every namespace"; it is accepted so such a request can be answered rather than the
/// whole session torn down (and encodes back, so decoding stays invertible).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespacePrefix(pub TrackNamespace);

impl Wire for NamespacePrefix {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.0.0.is_empty() {
            return put(0, out);
        }
        self.0.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        TrackNamespace::read_fields(buf, MAX_FULL_TRACK_NAME_LEN).map(NamespacePrefix)
    }
}

impl Wire for TrackNamespace {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.0.is_empty() || self.0.len() > MAX_NAMESPACE_FIELDS {
            return Err(EncodeError::Invalid(NAMESPACE_FIELDS));
        }
        if self.byte_len() > MAX_FULL_TRACK_NAME_LEN {
            return Err(EncodeError::Invalid(NAME_TOO_LONG));
        }
        put(self.0.len() as u64, out)?;
        self.0.iter().try_for_each(|field| write_bytes(field, out))
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Self::read_within(buf, MAX_FULL_TRACK_NAME_LEN)
    }
}

/// Writes a Full Track Name (namespace tuple, then the length-prefixed track name).
pub(crate) fn write_full_name(
    namespace: &TrackNamespace,
    name: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if namespace.byte_len() + name.len() > MAX_FULL_TRACK_NAME_LEN {
        return Err(EncodeError::Invalid(NAME_TOO_LONG));
    }
    namespace.write(out)?;
    write_bytes(name, out)
}

/// Reads a Full Track Name, enforcing the shared 4096-byte budget.
pub(crate) fn read_full_name(buf: &mut &[u8]) -> Result<(TrackNamespace, Vec<u8>), DecodeError> {
    let namespace = TrackNamespace::read_within(buf, MAX_FULL_TRACK_NAME_LEN)?;
    read_track_name_in::<Quic>(buf, namespace)
}

/// Reads the track name that follows `namespace` in a Full Track Name, within what is left
/// of the 4096-byte budget.
pub(crate) fn read_track_name_in<F: Form>(
    buf: &mut &[u8],
    namespace: TrackNamespace,
) -> Result<(TrackNamespace, Vec<u8>), DecodeError> {
    let left = MAX_FULL_TRACK_NAME_LEN.saturating_sub(namespace.byte_len());
    let name = read_bytes_in::<F>(buf, left, NAME_TOO_LONG)?;
    Ok((namespace, name.to_vec()))
}

/// Writes the track name that follows `namespace` in a Full Track Name, checking the
/// 4096-byte budget they share.
pub(crate) fn write_track_name_in<F: Form>(
    namespace: &TrackNamespace,
    name: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if namespace.byte_len() + name.len() > MAX_FULL_TRACK_NAME_LEN {
        return Err(EncodeError::Invalid(NAME_TOO_LONG));
    }
    write_bytes_in::<F>(name, out)
}

/// Order in which groups are delivered. Requests may leave the choice to the publisher
/// ([`GroupOrder::Publisher`]); replies must state the order actually used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum GroupOrder {
    /// Use the original publisher's order (requests only).
    #[default]
    Publisher = 0,
    Ascending = 1,
    Descending = 2,
}

impl GroupOrder {
    /// Writes the order as requested by a subscriber.
    pub(super) fn write_requested(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }

    /// Reads the order requested by a subscriber (0, 1 or 2).
    pub(super) fn read_requested(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        match read_u8(buf)? {
            0 => Ok(Self::Publisher),
            1 => Ok(Self::Ascending),
            2 => Ok(Self::Descending),
            _ => Err(DecodeError::ProtocolViolation("group order above 2")),
        }
    }

    /// Writes the order a publisher decided on; "publisher's choice" is not an answer.
    pub(super) fn write_decided(self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self == Self::Publisher {
            return Err(EncodeError::Invalid(
                "group order in a reply must be ascending or descending",
            ));
        }
        self.write_requested(out);
        Ok(())
    }

    /// Reads the order a publisher decided on (1 or 2).
    pub(super) fn read_decided(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        match Self::read_requested(buf)? {
            Self::Publisher => Err(DecodeError::ProtocolViolation(
                "group order in a reply must be ascending or descending",
            )),
            order => Ok(order),
        }
    }
}

/// Which objects a subscription delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterType {
    /// From the first object of the group after the current largest one.
    NextGroupStart,
    /// From the object after the current largest one.
    LargestObject,
    /// From the given location on, open ended.
    AbsoluteStart(Location),
    /// From `start` up to and including group `end_group`.
    AbsoluteRange { start: Location, end_group: u64 },
    /// From the first object of the largest object's group, or of the group `back` groups
    /// before it (draft-20 on).
    GroupsBack(u64),
    /// From `start` up to and including the object `end` (draft-20 on).
    AbsoluteObjectRange { start: Location, end: Location },
}

impl Wire for FilterType {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Self::NextGroupStart => put(0x1, out),
            Self::LargestObject => put(0x2, out),
            Self::AbsoluteStart(start) => {
                put(0x3, out)?;
                start.write(out)
            }
            Self::AbsoluteRange { start, end_group } => {
                put(0x4, out)?;
                start.write(out)?;
                put(*end_group, out)
            }
            Self::GroupsBack(_) | Self::AbsoluteObjectRange { .. } => Err(EncodeError::Invalid(
                "the filter has no draft-14 or draft-16 form",
            )),
        }
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        match get(buf)? {
            0x1 => Ok(Self::NextGroupStart),
            0x2 => Ok(Self::LargestObject),
            0x3 => Ok(Self::AbsoluteStart(Location::read(buf)?)),
            0x4 => Ok(Self::AbsoluteRange {
                start: Location::read(buf)?,
                end_group: get(buf)?,
            }),
            _ => Err(DecodeError::ProtocolViolation("unknown filter type")),
        }
    }
}
