//! Encode → decode returns the same value and consumes exactly the encoding; every proper
//! prefix of an encoding is reported as incomplete.

use std::collections::BTreeSet;

use moq_wire::message::*;

use super::common::{self, assert_decodes_exactly, assert_decodes_to};
use super::{CODEC, samples};

#[test]
fn samples_cover_every_control_message() {
    let names: BTreeSet<_> = samples::control_messages()
        .iter()
        .map(ControlMessage::name)
        .collect();
    assert_eq!(names.len(), 30, "{names:?}");
}

common::control_message_tests!(CODEC, samples::control_messages());

#[test]
fn stream_headers_round_trip() {
    let mut types = BTreeSet::new();
    for header in samples::stream_headers() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        assert_decodes_exactly(&header, &bytes, &[0x00], DataStreamHeader::decode);
        if let DataStreamHeader::Subgroup(subgroup) = header {
            assert_eq!(u64::from(bytes[0]), subgroup.stream_type());
            types.insert(subgroup.stream_type());
        }
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
        assert_decodes_exactly(&header, &bytes, b"payload", |b| {
            SubgroupObjectHeader::decode(b, extensions_present)
        });
    }
}

#[test]
fn fetch_objects_round_trip() {
    for header in samples::fetch_objects() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        assert_decodes_exactly(&header, &bytes, b"payload", FetchObjectHeader::decode);
    }
}

#[test]
fn datagrams_round_trip_with_all_ten_types() {
    let mut types = Vec::new();
    for header in samples::datagrams() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        types.push(header.datagram_type());
        assert_eq!(u64::from(bytes[0]), header.datagram_type());
        let payload = common::datagram_payload(&header);
        assert_decodes_to(&header, &bytes, payload, DatagramHeader::decode);
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
        common::samples::extension_pairs()
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
