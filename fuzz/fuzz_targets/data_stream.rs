//! Data streams and datagrams: every header decoder of every draft (draft-14's form in
//! `moq_wire::message`, `moq_wire::draft16`, and `moq_wire::draft20`, whose data plane
//! draft-22 shares) on arbitrary bytes never panics, what decodes encodes again to the same
//! value, and a whole stream (stream header, then object headers with their payloads skipped,
//! as a receiver reads it) walks without panicking and with object IDs that only increase.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_wire::draft16::{self, FetchObject};
use moq_wire::draft20;
use moq_wire::message::{
    DataStreamHeader, DatagramHeader, FetchObjectHeader, KeyValuePair, ObjectStatus,
    SubgroupObjectHeader, decode_extensions, encode_extensions,
};
use moq_wire::{DecodeError, EncodeError};

/// Most object headers walked per input, to keep every run short.
const MAX_OBJECTS: usize = 256;

fn check_stream_header(data: &[u8]) {
    let Ok((header, used)) = DataStreamHeader::decode(data) else {
        return;
    };
    assert!(used <= data.len());
    let mut again = Vec::new();
    header.encode(&mut again);
    assert!(again.len() <= used);
    assert_eq!(
        DataStreamHeader::decode(&again),
        Ok((header, again.len())),
        "stream header round trip"
    );
}

fn check_subgroup_object(data: &[u8], extensions_present: bool) {
    let Ok((header, used)) = SubgroupObjectHeader::decode(data, extensions_present) else {
        return;
    };
    assert!(used <= data.len());
    assert!(header.payload_len == 0 || header.status == ObjectStatus::Normal);
    check_extension_block(&header.extensions);
    let mut again = Vec::new();
    header.encode(extensions_present, &mut again);
    assert!(again.len() <= used);
    assert_eq!(
        SubgroupObjectHeader::decode(&again, extensions_present),
        Ok((header, again.len())),
        "subgroup object round trip"
    );
}

fn check_fetch_object(data: &[u8]) {
    let Ok((header, used)) = FetchObjectHeader::decode(data) else {
        return;
    };
    assert!(used <= data.len());
    assert!(header.payload_len == 0 || header.status == ObjectStatus::Normal);
    check_extension_block(&header.extensions);
    let mut again = Vec::new();
    header.encode(&mut again);
    assert!(again.len() <= used);
    assert_eq!(
        FetchObjectHeader::decode(&again),
        Ok((header, again.len())),
        "fetch object round trip"
    );
}

fn check_datagram(data: &[u8]) {
    let Ok((header, payload_at)) = DatagramHeader::decode(data) else {
        return;
    };
    assert!(payload_at <= data.len());
    if header.status.is_some() {
        assert_eq!(payload_at, data.len(), "status datagrams carry no payload");
    }
    check_extension_block(&header.extensions);
    let mut again = Vec::new();
    header.encode(&mut again);
    assert!(again.len() <= payload_at);
    let header_len = again.len();
    // A datagram arrives whole: put the payload back behind the re-encoded header.
    again.extend_from_slice(&data[payload_at..]);
    assert_eq!(
        DatagramHeader::decode(&again),
        Ok((header, header_len)),
        "datagram round trip"
    );
}

/// An extension block that decoding accepted parses, and its pairs encode back to the
/// same block when it was written in the shortest form.
fn check_extension_block(block: &[u8]) {
    let pairs = decode_extensions(block).expect("accepted extension block parses");
    let again = encode_extensions(&pairs).expect("decoded extension headers encode");
    assert!(again.len() <= block.len());
    assert_eq!(decode_extensions(&again), Ok(pairs));
}

/// Reads `data` as one unidirectional stream: header, then objects until the bytes run out or
/// something is refused.
fn walk_stream(data: &[u8]) {
    let Ok((header, mut at)) = DataStreamHeader::decode(data) else {
        return;
    };
    let mut previous_id: Option<u64> = None;
    for _ in 0..MAX_OBJECTS {
        let rest = &data[at..];
        let (payload_len, used) = match header {
            DataStreamHeader::Subgroup(subgroup) => {
                let Ok((object, used)) =
                    SubgroupObjectHeader::decode(rest, subgroup.extensions_present)
                else {
                    return;
                };
                let Ok(id) = object.object_id(previous_id) else {
                    return;
                };
                if let Some(previous) = previous_id {
                    assert!(id > previous, "object IDs on a subgroup stream increase");
                }
                assert_eq!(
                    SubgroupObjectHeader::object_id_delta(previous_id, id),
                    Some(object.object_id_delta)
                );
                let _ = subgroup.subgroup_id.resolve(id);
                previous_id = Some(id);
                (object.payload_len, used)
            }
            DataStreamHeader::Fetch(_) => {
                let Ok((object, used)) = FetchObjectHeader::decode(rest) else {
                    return;
                };
                (object.payload_len, used)
            }
        };
        assert!(used > 0 && used <= rest.len());
        let left = (rest.len() - used) as u64;
        if payload_len > left {
            return;
        }
        at += used + payload_len as usize;
    }
}

/// The default publisher priority a header without a priority byte gets (drafts from 16 on).
fn inherited(track_alias: u64) -> u8 {
    track_alias as u8
}

/// The data plane of one draft from 16 on: draft-16's design, in QUIC varints (16) or
/// `vi64` (20; draft-22 changed nothing here).
trait Draft {
    const NAME: &'static str;
    type Reader: Default;
    type Writer: Default;
    fn decode_stream_header(
        data: &[u8],
        priority: &dyn Fn(u64) -> u8,
    ) -> Result<(DataStreamHeader, usize), DecodeError>;
    fn encode_stream_header(
        header: &DataStreamHeader,
        default: Option<u8>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError>;
    fn decode_subgroup_object(
        data: &[u8],
        extensions_present: bool,
    ) -> Result<(SubgroupObjectHeader, usize), DecodeError>;
    fn encode_subgroup_object(
        header: &SubgroupObjectHeader,
        extensions_present: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError>;
    fn decode_datagram(data: &[u8]) -> Result<(DatagramHeader, usize), DecodeError>;
    fn encode_datagram(header: &DatagramHeader, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    fn decode_extensions(block: &[u8]) -> Result<Vec<KeyValuePair>, DecodeError>;
    fn encode_extensions(pairs: &[KeyValuePair]) -> Result<Vec<u8>, EncodeError>;
    fn read_fetch_object(
        reader: &mut Self::Reader,
        data: &[u8],
    ) -> Result<(FetchObject, usize), DecodeError>;
    fn write_fetch_object(
        writer: &mut Self::Writer,
        entry: &FetchObject,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError>;
}

/// Implements [`Draft`] for `$name` with the functions of module `$module`.
macro_rules! draft {
    ($name:ident, $label:literal, $module:ident) => {
        struct $name;

        impl Draft for $name {
            const NAME: &'static str = $label;
            type Reader = $module::FetchObjectReader;
            type Writer = $module::FetchObjectWriter;
            fn decode_stream_header(
                data: &[u8],
                priority: &dyn Fn(u64) -> u8,
            ) -> Result<(DataStreamHeader, usize), DecodeError> {
                $module::decode_data_stream_header(data, priority)
            }
            fn encode_stream_header(
                header: &DataStreamHeader,
                default: Option<u8>,
                out: &mut Vec<u8>,
            ) -> Result<(), EncodeError> {
                $module::encode_data_stream_header(header, default, out)
            }
            fn decode_subgroup_object(
                data: &[u8],
                extensions_present: bool,
            ) -> Result<(SubgroupObjectHeader, usize), DecodeError> {
                $module::decode_subgroup_object(data, extensions_present)
            }
            fn encode_subgroup_object(
                header: &SubgroupObjectHeader,
                extensions_present: bool,
                out: &mut Vec<u8>,
            ) -> Result<(), EncodeError> {
                $module::encode_subgroup_object(header, extensions_present, out)
            }
            fn decode_datagram(data: &[u8]) -> Result<(DatagramHeader, usize), DecodeError> {
                $module::decode_datagram(data, &inherited)
            }
            fn encode_datagram(
                header: &DatagramHeader,
                out: &mut Vec<u8>,
            ) -> Result<(), EncodeError> {
                $module::encode_datagram(header, None, out)
            }
            fn decode_extensions(block: &[u8]) -> Result<Vec<KeyValuePair>, DecodeError> {
                $module::decode_extensions(block)
            }
            fn encode_extensions(pairs: &[KeyValuePair]) -> Result<Vec<u8>, EncodeError> {
                $module::encode_extensions(pairs)
            }
            fn read_fetch_object(
                reader: &mut Self::Reader,
                data: &[u8],
            ) -> Result<(FetchObject, usize), DecodeError> {
                reader.decode(data)
            }
            fn write_fetch_object(
                writer: &mut Self::Writer,
                entry: &FetchObject,
                out: &mut Vec<u8>,
            ) -> Result<(), EncodeError> {
                writer.encode(entry, out)
            }
        }
    };
}

draft!(Draft16, "draft-16", draft16);
draft!(Draft20, "draft-20", draft20);

fn check_stream_header_in<D: Draft>(data: &[u8]) {
    let Ok((header, used)) = D::decode_stream_header(data, &inherited) else {
        return;
    };
    assert!(used <= data.len());
    for default in [None, Some(0x80)] {
        let mut again = Vec::new();
        D::encode_stream_header(&header, default, &mut again)
            .unwrap_or_else(|err| panic!("decoded {} stream header encodes: {err}", D::NAME));
        let priority = |alias| default.unwrap_or_else(|| inherited(alias));
        assert_eq!(
            D::decode_stream_header(&again, &priority),
            Ok((header, again.len())),
            "{} stream header round trip",
            D::NAME
        );
    }
}

fn check_extension_block_in<D: Draft>(block: &[u8]) {
    let pairs = D::decode_extensions(block).expect("accepted extension block parses");
    let again = D::encode_extensions(&pairs).expect("decoded extension headers encode");
    // Decoded types ascend, so sorting keeps them in place and only shortens integers.
    assert!(again.len() <= block.len());
    assert_eq!(D::decode_extensions(&again), Ok(pairs));
}

fn check_subgroup_object_in<D: Draft>(data: &[u8], extensions_present: bool) {
    let Ok((header, used)) = D::decode_subgroup_object(data, extensions_present) else {
        return;
    };
    assert!(used <= data.len());
    assert!(header.payload_len == 0 || header.status == ObjectStatus::Normal);
    assert_ne!(header.status, ObjectStatus::DoesNotExist);
    check_extension_block_in::<D>(&header.extensions);
    let mut again = Vec::new();
    D::encode_subgroup_object(&header, extensions_present, &mut again)
        .unwrap_or_else(|err| panic!("decoded {} object header encodes: {err}", D::NAME));
    assert!(again.len() <= used);
    assert_eq!(
        D::decode_subgroup_object(&again, extensions_present),
        Ok((header, again.len())),
        "{} subgroup object round trip",
        D::NAME
    );
}

fn check_datagram_in<D: Draft>(data: &[u8]) {
    let Ok((header, payload_at)) = D::decode_datagram(data) else {
        return;
    };
    assert!(payload_at <= data.len());
    if header.status.is_some() {
        assert_eq!(payload_at, data.len(), "status datagrams carry no payload");
    }
    check_extension_block_in::<D>(&header.extensions);
    let mut again = Vec::new();
    D::encode_datagram(&header, &mut again).expect("decoded datagram encodes");
    let header_len = again.len();
    again.extend_from_slice(&data[payload_at..]);
    assert_eq!(
        D::decode_datagram(&again),
        Ok((header, header_len)),
        "{} datagram round trip",
        D::NAME
    );
}

/// Reads `data` as the objects of a fetch stream (payloads skipped), then writes what was
/// read: the writer must never need more bytes than the input had, and the reader must read
/// back the same entries.
fn walk_fetch_objects_in<D: Draft>(data: &[u8]) {
    let mut reader = D::Reader::default();
    let mut rest = data;
    let mut entries = Vec::new();
    let mut read = 0;
    for _ in 0..MAX_OBJECTS {
        let Ok((entry, used)) = D::read_fetch_object(&mut reader, rest) else {
            break;
        };
        assert!(used > 0 && used <= rest.len());
        rest = &rest[used..];
        read += used;
        if let FetchObject::Object { header, .. } = &entry {
            assert_eq!(header.status, ObjectStatus::Normal);
            check_extension_block_in::<D>(&header.extensions);
            let left = rest.len() as u64;
            if header.payload_len > left {
                entries.push(entry);
                break;
            }
            rest = &rest[header.payload_len as usize..];
        }
        entries.push(entry);
    }
    let mut writer = D::Writer::default();
    let mut again = Vec::new();
    for entry in &entries {
        D::write_fetch_object(&mut writer, entry, &mut again)
            .expect("decoded fetch object encodes");
    }
    assert!(again.len() <= read);
    let mut reader = D::Reader::default();
    let mut rest = again.as_slice();
    for entry in &entries {
        let (back, used) =
            D::read_fetch_object(&mut reader, rest).expect("re-encoded fetch object decodes");
        assert_eq!(&back, entry, "{} fetch object round trip", D::NAME);
        rest = &rest[used..];
    }
    assert!(rest.is_empty());
}

/// Reads `data` as one subgroup stream: header, then objects.
fn walk_subgroup_stream_in<D: Draft>(data: &[u8]) {
    let Ok((DataStreamHeader::Subgroup(header), mut at)) =
        D::decode_stream_header(data, &inherited)
    else {
        return;
    };
    let mut previous_id: Option<u64> = None;
    for _ in 0..MAX_OBJECTS {
        let rest = &data[at..];
        let Ok((object, used)) = D::decode_subgroup_object(rest, header.extensions_present) else {
            return;
        };
        let Ok(id) = object.object_id(previous_id) else {
            return;
        };
        if let Some(previous) = previous_id {
            assert!(id > previous, "object IDs on a subgroup stream increase");
        }
        previous_id = Some(id);
        assert!(used > 0 && used <= rest.len());
        let left = (rest.len() - used) as u64;
        if object.payload_len > left {
            return;
        }
        at += used + object.payload_len as usize;
    }
}

fn check_draft<D: Draft>(data: &[u8]) {
    check_stream_header_in::<D>(data);
    check_subgroup_object_in::<D>(data, false);
    check_subgroup_object_in::<D>(data, true);
    check_datagram_in::<D>(data);
    if D::decode_extensions(data).is_ok() {
        check_extension_block_in::<D>(data);
    }
    walk_subgroup_stream_in::<D>(data);
    walk_fetch_objects_in::<D>(data);
    // A fetch stream: its header, then the objects.
    if let Ok((DataStreamHeader::Fetch(_), used)) = D::decode_stream_header(data, &inherited) {
        walk_fetch_objects_in::<D>(&data[used..]);
    }
}

fuzz_target!(|data: &[u8]| {
    check_draft::<Draft16>(data);
    check_draft::<Draft20>(data);
    check_stream_header(data);
    check_subgroup_object(data, false);
    check_subgroup_object(data, true);
    check_fetch_object(data);
    check_datagram(data);
    if let Ok(pairs) = decode_extensions(data) {
        let again = encode_extensions(&pairs).expect("decoded extension headers encode");
        assert_eq!(decode_extensions(&again), Ok(pairs));
    }
    walk_stream(data);
});
