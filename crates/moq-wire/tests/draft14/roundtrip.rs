//! Encode → decode returns the same value and consumes exactly the encoding; every proper
//! prefix of an encoding is reported as incomplete.

use std::collections::BTreeSet;

use moq_wire::DecodeError;
use moq_wire::draft14::*;

use super::{encode, samples};

/// Every proper prefix of `bytes` must decode to `Incomplete`.
fn assert_prefixes_incomplete<T: std::fmt::Debug>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, DecodeError>,
) {
    for len in 0..bytes.len() {
        let result = decode(&bytes[..len]);
        assert!(
            matches!(result, Err(DecodeError::Incomplete)),
            "prefix {len}/{} of {bytes:02x?}: {result:?}",
            bytes.len()
        );
    }
}

#[test]
fn samples_cover_every_control_message() {
    let names: BTreeSet<_> = samples::control_messages()
        .iter()
        .map(ControlMessage::name)
        .collect();
    assert_eq!(names.len(), 30, "{names:?}");
}

#[test]
fn control_messages_round_trip() {
    for message in samples::control_messages() {
        let mut bytes = encode(&message);
        let len = bytes.len();
        // Bytes of a following message must be left alone.
        bytes.extend_from_slice(&[0x03, 0xff]);
        let (decoded, used) = ControlMessage::decode(&bytes).unwrap();
        assert_eq!(decoded, message);
        assert_eq!(used, len, "{}", message.name());
    }
}

#[test]
fn control_message_type_and_length_frame_the_payload() {
    for message in samples::control_messages() {
        let bytes = encode(&message);
        let mut rest = bytes.as_slice();
        assert_eq!(
            moq_wire::varint::decode(&mut rest).unwrap(),
            message.message_type()
        );
        let len = u16::from_be_bytes([rest[0], rest[1]]);
        assert_eq!(usize::from(len), rest.len() - 2, "{}", message.name());
    }
}

#[test]
fn control_message_prefixes_are_incomplete() {
    for message in samples::control_messages() {
        assert_prefixes_incomplete(&encode(&message), ControlMessage::decode);
    }
}

#[test]
fn stream_headers_round_trip() {
    let mut types = BTreeSet::new();
    for header in samples::stream_headers() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        let len = bytes.len();
        bytes.push(0x00);
        let (decoded, used) = DataStreamHeader::decode(&bytes).unwrap();
        assert_eq!(decoded, header);
        assert_eq!(used, len);
        if let DataStreamHeader::Subgroup(subgroup) = header {
            assert_eq!(u64::from(bytes[0]), subgroup.stream_type());
            types.insert(subgroup.stream_type());
        }
        assert_prefixes_incomplete(&bytes[..len], DataStreamHeader::decode);
    }
    let expected: BTreeSet<u64> = [
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
    ]
    .into();
    assert_eq!(types, expected);
}

#[test]
fn subgroup_objects_round_trip() {
    for (header, extensions_present) in samples::subgroup_objects() {
        let mut bytes = Vec::new();
        header.encode(extensions_present, &mut bytes);
        let len = bytes.len();
        bytes.extend_from_slice(b"payload");
        let (decoded, used) = SubgroupObjectHeader::decode(&bytes, extensions_present).unwrap();
        assert_eq!(decoded, header);
        assert_eq!(used, len);
        assert_prefixes_incomplete(&bytes[..len], |b| {
            SubgroupObjectHeader::decode(b, extensions_present)
        });
    }
}

#[test]
fn fetch_objects_round_trip() {
    for header in samples::fetch_objects() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        let len = bytes.len();
        bytes.extend_from_slice(b"payload");
        let (decoded, used) = FetchObjectHeader::decode(&bytes).unwrap();
        assert_eq!(decoded, header);
        assert_eq!(used, len);
        assert_prefixes_incomplete(&bytes[..len], FetchObjectHeader::decode);
    }
}

#[test]
fn datagrams_round_trip_with_all_ten_types() {
    let mut types = Vec::new();
    for header in samples::datagrams() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        let len = bytes.len();
        types.push(header.datagram_type());
        assert_eq!(u64::from(bytes[0]), header.datagram_type());
        if header.status.is_none() {
            bytes.extend_from_slice(b"payload");
        }
        let (decoded, payload_at) = DatagramHeader::decode(&bytes).unwrap();
        assert_eq!(decoded, header);
        assert_eq!(payload_at, len);
    }
    assert_eq!(
        types,
        [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x20, 0x21]
    );
}

#[test]
fn object_ids_follow_deltas() {
    let ids = [0, 1, 2, 5, 6, 100];
    let mut previous = None;
    for id in ids {
        let delta = SubgroupObjectHeader::object_id_delta(previous, id).unwrap();
        let header = SubgroupObjectHeader {
            object_id_delta: delta,
            ..Default::default()
        };
        assert_eq!(header.object_id(previous).unwrap(), id);
        previous = Some(id);
    }
    // Contiguous IDs give a delta of 0 after the first object.
    assert_eq!(SubgroupObjectHeader::object_id_delta(Some(6), 7), Some(0));
    assert_eq!(SubgroupObjectHeader::object_id_delta(Some(6), 6), None);
    assert_eq!(SubgroupId::FirstObjectId.resolve(12), 12);
    assert_eq!(SubgroupId::Zero.resolve(12), 0);
}

#[test]
fn extension_blocks_round_trip() {
    let block = samples::extension_block();
    assert_eq!(
        decode_extensions(&block).unwrap(),
        [
            KeyValuePair::int(0x3c, 2),
            KeyValuePair::bytes(0x4d, b"trace".to_vec())
        ]
    );
}

#[test]
fn parameters_builders_and_lookups() {
    let params = Parameters::new()
        .with_int(param::DELIVERY_TIMEOUT, 100)
        .with_int(param::DELIVERY_TIMEOUT, 200)
        .with_bytes(param::AUTHORIZATION_TOKEN, b"t".to_vec());
    assert_eq!(params.0.len(), 2, "with_* replaces an earlier value");
    assert_eq!(params.get_int(param::DELIVERY_TIMEOUT), Some(200));
    assert_eq!(
        params.get_bytes(param::AUTHORIZATION_TOKEN),
        Some(&b"t"[..])
    );
    assert_eq!(params.get_int(param::MAX_CACHE_DURATION), None);
    assert_eq!(params.get_bytes(param::DELIVERY_TIMEOUT), None);
}

#[test]
fn namespace_paths_and_prefixes() {
    let ns = TrackNamespace::from_path("anon/demo/video");
    assert_eq!(
        ns.0,
        [b"anon".to_vec(), b"demo".to_vec(), b"video".to_vec()]
    );
    assert_eq!(ns.to_path(), "anon/demo/video");
    assert_eq!(ns.byte_len(), 13);
    assert!(ns.starts_with(&TrackNamespace::from_path("anon/demo")));
    assert!(!ns.starts_with(&TrackNamespace::from_path("anon/dem")));
}

#[test]
fn locations_order_by_group_then_object() {
    assert!(Location::new(1, 9) < Location::new(2, 0));
    assert!(Location::new(2, 0) < Location::new(2, 1));
    assert_eq!(
        Location::new(3, 3).max(Location::new(3, 2)),
        Location::new(3, 3)
    );
}
