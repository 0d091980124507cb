//! Data streams and datagrams: every header decoder of `moq_wire::draft14::data` on arbitrary
//! bytes never panics, what decodes encodes again to the same value, and a whole stream
//! (stream header, then object headers with their payloads skipped, as a receiver reads it)
//! walks without panicking and with object IDs that only increase.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_wire::draft14::{
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

fuzz_target!(|data: &[u8]| {
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
