//! Data streams and datagrams: every header decoder of `moq_wire::message` (draft-14's form) and
//! `moq_wire::draft16` on arbitrary bytes never panics, what decodes encodes again to the same
//! value, and a whole stream (stream header, then object headers with their payloads skipped,
//! as a receiver reads it) walks without panicking and with object IDs that only increase.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_wire::draft16::{self, FetchObject, FetchObjectReader, FetchObjectWriter};
use moq_wire::message::{
    DataStreamHeader, DatagramHeader, FetchObjectHeader, ObjectStatus, SubgroupObjectHeader,
    decode_extensions, encode_extensions,
};

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

/// The default publisher priority a draft-16 header without a priority byte gets.
fn inherited(track_alias: u64) -> u8 {
    track_alias as u8
}

fn check_stream_header_16(data: &[u8]) {
    let Ok((header, used)) = draft16::decode_data_stream_header(data, &inherited) else {
        return;
    };
    assert!(used <= data.len());
    for default in [None, Some(0x80)] {
        let mut again = Vec::new();
        draft16::encode_data_stream_header(&header, default, &mut again)
            .expect("decoded draft-16 stream header encodes");
        let priority = |alias| default.unwrap_or_else(|| inherited(alias));
        assert_eq!(
            draft16::decode_data_stream_header(&again, &priority),
            Ok((header, again.len())),
            "draft-16 stream header round trip"
        );
    }
}

fn check_extension_block_16(block: &[u8]) {
    let pairs = draft16::decode_extensions(block).expect("accepted extension block parses");
    let again = draft16::encode_extensions(&pairs).expect("decoded extension headers encode");
    // Decoded types ascend, so sorting keeps them in place and only shortens varints.
    assert!(again.len() <= block.len());
    assert_eq!(draft16::decode_extensions(&again), Ok(pairs));
}

fn check_subgroup_object_16(data: &[u8], extensions_present: bool) {
    let Ok((header, used)) = draft16::decode_subgroup_object(data, extensions_present) else {
        return;
    };
    assert!(used <= data.len());
    assert!(header.payload_len == 0 || header.status == ObjectStatus::Normal);
    assert_ne!(header.status, ObjectStatus::DoesNotExist);
    check_extension_block_16(&header.extensions);
    let mut again = Vec::new();
    draft16::encode_subgroup_object(&header, extensions_present, &mut again)
        .expect("decoded draft-16 object header encodes");
    assert!(again.len() <= used);
    assert_eq!(
        draft16::decode_subgroup_object(&again, extensions_present),
        Ok((header, again.len())),
        "draft-16 subgroup object round trip"
    );
}

fn check_datagram_16(data: &[u8]) {
    let Ok((header, payload_at)) = draft16::decode_datagram(data, &inherited) else {
        return;
    };
    assert!(payload_at <= data.len());
    if header.status.is_some() {
        assert_eq!(payload_at, data.len(), "status datagrams carry no payload");
    }
    check_extension_block_16(&header.extensions);
    let mut again = Vec::new();
    draft16::encode_datagram(&header, None, &mut again).expect("decoded datagram encodes");
    let header_len = again.len();
    again.extend_from_slice(&data[payload_at..]);
    assert_eq!(
        draft16::decode_datagram(&again, &inherited),
        Ok((header, header_len)),
        "draft-16 datagram round trip"
    );
}

/// Reads `data` as the objects of a draft-16 fetch stream (payloads skipped), then writes what
/// was read: the writer must never need more bytes than the input had, and the reader must
/// read back the same entries.
fn walk_fetch_objects_16(data: &[u8]) {
    let mut reader = FetchObjectReader::new();
    let mut rest = data;
    let mut entries = Vec::new();
    let mut read = 0;
    for _ in 0..MAX_OBJECTS {
        let Ok((entry, used)) = reader.decode(rest) else {
            break;
        };
        assert!(used > 0 && used <= rest.len());
        rest = &rest[used..];
        read += used;
        if let FetchObject::Object { header, .. } = &entry {
            assert_eq!(header.status, ObjectStatus::Normal);
            check_extension_block_16(&header.extensions);
            let left = rest.len() as u64;
            if header.payload_len > left {
                entries.push(entry);
                break;
            }
            rest = &rest[header.payload_len as usize..];
        }
        entries.push(entry);
    }
    let mut writer = FetchObjectWriter::new();
    let mut again = Vec::new();
    for entry in &entries {
        writer
            .encode(entry, &mut again)
            .expect("decoded fetch object encodes");
    }
    assert!(again.len() <= read);
    let mut reader = FetchObjectReader::new();
    let mut rest = again.as_slice();
    for entry in &entries {
        let (back, used) = reader
            .decode(rest)
            .expect("re-encoded fetch object decodes");
        assert_eq!(&back, entry, "draft-16 fetch object round trip");
        rest = &rest[used..];
    }
    assert!(rest.is_empty());
}

/// Reads `data` as one draft-16 subgroup stream: header, then objects.
fn walk_subgroup_stream_16(data: &[u8]) {
    let Ok((DataStreamHeader::Subgroup(header), mut at)) =
        draft16::decode_data_stream_header(data, &inherited)
    else {
        return;
    };
    let mut previous_id: Option<u64> = None;
    for _ in 0..MAX_OBJECTS {
        let rest = &data[at..];
        let Ok((object, used)) = draft16::decode_subgroup_object(rest, header.extensions_present)
        else {
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

fn check_draft16(data: &[u8]) {
    check_stream_header_16(data);
    check_subgroup_object_16(data, false);
    check_subgroup_object_16(data, true);
    check_datagram_16(data);
    if draft16::decode_extensions(data).is_ok() {
        check_extension_block_16(data);
    }
    walk_subgroup_stream_16(data);
    walk_fetch_objects_16(data);
    // A fetch stream: its header, then the objects.
    if let Ok((DataStreamHeader::Fetch(_), used)) =
        draft16::decode_data_stream_header(data, &inherited)
    {
        walk_fetch_objects_16(&data[used..]);
    }
}

fuzz_target!(|data: &[u8]| {
    check_draft16(data);
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
