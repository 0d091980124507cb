//! Encode → decode returns the same value and consumes exactly the encoding; every proper
//! prefix of an encoding is reported as incomplete.

use std::collections::BTreeSet;

use moq_wire::DecodeError;
use moq_wire::draft14::VERSION;
use moq_wire::draft16::{self, FetchObject, FetchObjectReader, FetchObjectWriter, param};
use moq_wire::message::*;

use super::common::{self, assert_decodes_exactly, assert_decodes_to};
use super::samples::{self, DEFAULT_PRIORITY};
use super::{CODEC, decode, encode, ids};

fn default_priority(_track_alias: u64) -> u8 {
    DEFAULT_PRIORITY
}

#[test]
fn samples_cover_every_draft16_message() {
    let names: BTreeSet<_> = samples::control_messages()
        .iter()
        .map(draft16::message_name)
        .collect();
    // Every draft-16 control message but NAMESPACE and NAMESPACE_DONE.
    assert_eq!(names.len(), 22, "{names:?}");
    // And every draft-14 message that has a draft-16 form.
    let model: BTreeSet<_> = samples::control_messages()
        .iter()
        .map(ControlMessage::name)
        .collect();
    assert_eq!(model.len(), 29, "{model:?}");
}

common::control_message_tests!(CODEC, samples::control_messages());

#[test]
fn encoding_failures_write_nothing() {
    let mut out = vec![0xaa];
    let message = ControlMessage::UnsubscribeNamespace(UnsubscribeNamespace {
        namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
    });
    assert!(draft16::encode_control(&message, &super::request_id_of, &mut out).is_err());
    assert_eq!(out, [0xaa]);
}

#[test]
fn setup_messages_carry_no_version() {
    // Whatever the model says about versions, draft-16 sends none and decodes its own.
    let offer = ControlMessage::ClientSetup(ClientSetup {
        versions: vec![VERSION, 0xff00000d],
        params: Parameters::new(),
    });
    let (decoded, _) = decode(&encode(&offer)).unwrap();
    assert_eq!(
        decoded,
        ControlMessage::ClientSetup(ClientSetup {
            versions: vec![draft16::VERSION],
            params: Parameters::new(),
        })
    );
    let (decoded, _) = decode(&encode(&ControlMessage::ServerSetup(ServerSetup {
        version: VERSION,
        params: Parameters::new(),
    })))
    .unwrap();
    let ControlMessage::ServerSetup(setup) = decoded else {
        panic!("{decoded:?}")
    };
    assert_eq!(setup.version, draft16::VERSION);
}

#[test]
fn parameters_are_sorted_on_the_wire() {
    // Out of order in the model, ascending once decoded.
    let message = ControlMessage::Subscribe(Subscribe {
        request_id: 0,
        namespace: TrackNamespace::from_path("a"),
        track_name: b"t".to_vec(),
        subscriber_priority: 1,
        group_order: GroupOrder::Ascending,
        forward: false,
        filter: FilterType::LargestObject,
        params: Parameters::new()
            .with_int(param::NEW_GROUP_REQUEST, 0)
            .with_int(param::DELIVERY_TIMEOUT, 10),
        fill: None,
    });
    let ControlMessage::Subscribe(decoded) = decode(&encode(&message)).unwrap().0 else {
        panic!()
    };
    let keys: Vec<u64> = decoded.params.0.iter().map(|p| p.key).collect();
    assert_eq!(keys, [param::DELIVERY_TIMEOUT, param::NEW_GROUP_REQUEST]);
    assert_eq!(decoded.subscriber_priority, 1);
    assert!(!decoded.forward);
    assert_eq!(decoded.filter, FilterType::LargestObject);
}

#[test]
fn answers_follow_the_request_kind() {
    // The same REQUEST_ERROR bytes decode into the error of whatever the ID belongs to.
    let error = |request_id| {
        encode(&ControlMessage::SubscribeError(SubscribeError {
            request_id,
            code: 0,
            reason: String::new(),
        }))
    };
    let name = |request_id| decode(&error(request_id)).unwrap().0.name();
    assert_eq!(name(ids::SUBSCRIBE), "SUBSCRIBE_ERROR");
    assert_eq!(name(ids::FETCH), "FETCH_ERROR");
    assert_eq!(name(ids::PUBLISH), "PUBLISH_ERROR");
    assert_eq!(name(ids::PUBLISH_NAMESPACE), "PUBLISH_NAMESPACE_ERROR");
    assert_eq!(name(ids::SUBSCRIBE_NAMESPACE), "SUBSCRIBE_NAMESPACE_ERROR");
    assert_eq!(name(ids::TRACK_STATUS), "TRACK_STATUS_ERROR");
    assert_eq!(name(ids::UPDATE), "TRACK_STATUS_ERROR");

    let ok = |request_id| {
        encode(&ControlMessage::PublishNamespaceOk(PublishNamespaceOk {
            request_id,
        }))
    };
    let name = |request_id| decode(&ok(request_id)).unwrap().0.name();
    assert_eq!(name(ids::PUBLISH_NAMESPACE), "PUBLISH_NAMESPACE_OK");
    assert_eq!(name(ids::SUBSCRIBE_NAMESPACE), "SUBSCRIBE_NAMESPACE_OK");
    assert_eq!(name(ids::TRACK_STATUS), "TRACK_STATUS_OK");
    assert_eq!(name(ids::UPDATE), "TRACK_STATUS_OK");
}

#[test]
fn error_codes_translate_both_ways() {
    use draft16::RequestKind as K;
    use draft16::request_error as d16;
    let pairs = [
        (
            K::Subscribe,
            subscribe_error::TRACK_DOES_NOT_EXIST,
            d16::DOES_NOT_EXIST,
        ),
        (
            K::Subscribe,
            subscribe_error::INVALID_RANGE,
            d16::INVALID_RANGE,
        ),
        (
            K::Subscribe,
            subscribe_error::MALFORMED_AUTH_TOKEN,
            d16::MALFORMED_AUTH_TOKEN,
        ),
        (
            K::Subscribe,
            subscribe_error::EXPIRED_AUTH_TOKEN,
            d16::EXPIRED_AUTH_TOKEN,
        ),
        (K::Fetch, fetch_error::MALFORMED_TRACK, d16::MALFORMED_TRACK),
        (
            K::Fetch,
            fetch_error::INVALID_JOINING_REQUEST_ID,
            d16::INVALID_JOINING_REQUEST_ID,
        ),
        (K::Publish, publish_error::UNINTERESTED, d16::UNINTERESTED),
        (
            K::PublishNamespace,
            publish_namespace_error::UNINTERESTED,
            d16::UNINTERESTED,
        ),
        (
            K::PublishNamespace,
            publish_namespace_error::UNAUTHORIZED,
            d16::UNAUTHORIZED,
        ),
        (
            K::SubscribeNamespace,
            subscribe_namespace_error::NAMESPACE_PREFIX_OVERLAP,
            d16::PREFIX_OVERLAP,
        ),
        (
            K::SubscribeNamespace,
            subscribe_namespace_error::NAMESPACE_PREFIX_UNKNOWN,
            d16::DOES_NOT_EXIST,
        ),
    ];
    for (kind, d14, d16) in pairs {
        assert_eq!(
            draft16::request_error_from_draft14(kind, d14),
            d16,
            "{kind:?} {d14:#x}"
        );
        assert_eq!(
            draft16::request_error_to_draft14(kind, d16),
            d14,
            "{kind:?} {d16:#x}"
        );
    }
    // No counterpart: INTERNAL_ERROR, and NO_OBJECTS goes out as INVALID_RANGE.
    assert_eq!(
        draft16::request_error_to_draft14(K::Subscribe, d16::DUPLICATE_SUBSCRIPTION),
        0
    );
    assert_eq!(
        draft16::request_error_to_draft14(K::Publish, d16::MALFORMED_AUTH_TOKEN),
        0
    );
    assert_eq!(
        draft16::request_error_from_draft14(K::Fetch, fetch_error::NO_OBJECTS),
        d16::INVALID_RANGE
    );
    assert_eq!(draft16::request_error_from_draft14(K::Fetch, 0x99), 0);
    // PUBLISH_DONE: only MALFORMED_TRACK moved.
    assert_eq!(
        draft16::publish_done_from_draft14(publish_done_code::MALFORMED_TRACK),
        draft16::publish_done_code::MALFORMED_TRACK
    );
    assert_eq!(
        draft16::publish_done_to_draft14(draft16::publish_done_code::UPDATE_FAILED),
        draft16::publish_done_code::UPDATE_FAILED
    );
    for code in 0..0x20 {
        let there = draft16::publish_done_from_draft14(code);
        assert_eq!(draft16::publish_done_to_draft14(there), code);
    }
}

#[test]
fn request_updates_state_only_their_parameters() {
    let update = draft16::request_update(
        ids::UPDATE,
        ids::SUBSCRIBE,
        Parameters::new().with_int(param::NEW_GROUP_REQUEST, 7),
    )
    .unwrap();
    // Nothing else changes: the fields hold the neutral values.
    assert!(update.forward);
    assert_eq!(update.subscriber_priority, 128);
    assert_eq!(update.start, Location::new(0, 0));
    assert_eq!(update.end_group, None);
    let bytes = encode(&ControlMessage::SubscribeUpdate(update.clone()));
    // type, length, request ID, existing ID, 1 parameter, delta 0x32, 7
    assert_eq!(bytes, [0x02, 0x00, 0x05, 0x06, 0x04, 0x01, 0x32, 0x07]);
    assert_eq!(
        decode(&bytes).unwrap().0,
        ControlMessage::SubscribeUpdate(update)
    );
}

#[test]
fn stream_headers_round_trip() {
    let mut types = BTreeSet::new();
    for header in samples::stream_headers() {
        let mut bytes = Vec::new();
        draft16::encode_data_stream_header(&header, Some(DEFAULT_PRIORITY), &mut bytes).unwrap();
        assert_decodes_exactly(&header, &bytes, &[0x00], |b| {
            draft16::decode_data_stream_header(b, &default_priority)
        });
        if let DataStreamHeader::Subgroup(subgroup) = header {
            let omitted = subgroup.publisher_priority == DEFAULT_PRIORITY;
            let stream_type = draft16::subgroup_stream_type(&subgroup, omitted);
            assert_eq!(u64::from(bytes[0]), stream_type);
            types.insert(stream_type);
        }
    }
    let expected: BTreeSet<u64> = (0x10..=0x1d)
        .chain(0x30..=0x3d)
        .filter(|t| t & 0x06 != 0x06)
        .collect();
    assert_eq!(types.len(), 24);
    assert_eq!(types, expected);
}

#[test]
fn priority_is_sent_unless_it_is_the_default() {
    let header = DataStreamHeader::Subgroup(SubgroupHeader {
        track_alias: 1,
        group_id: 2,
        subgroup_id: SubgroupId::Zero,
        publisher_priority: 128,
        extensions_present: false,
        contains_end_of_group: false,
    });
    for (default, expected) in [
        (None, vec![0x10, 0x01, 0x02, 0x80]),
        (Some(7), vec![0x10, 0x01, 0x02, 0x80]),
        (Some(128), vec![0x30, 0x01, 0x02]),
    ] {
        let mut bytes = Vec::new();
        draft16::encode_data_stream_header(&header, default, &mut bytes).unwrap();
        assert_eq!(bytes, expected);
    }
    // An inherited priority is whatever the caller says the track's default is.
    let (decoded, _) = draft16::decode_data_stream_header(&[0x30, 0x01, 0x02], &|alias| {
        assert_eq!(alias, 1);
        42
    })
    .unwrap();
    let DataStreamHeader::Subgroup(decoded) = decoded else {
        panic!()
    };
    assert_eq!(decoded.publisher_priority, 42);
}

#[test]
fn subgroup_objects_round_trip() {
    for (header, extensions_present) in samples::subgroup_objects() {
        let mut bytes = Vec::new();
        draft16::encode_subgroup_object(&header, extensions_present, &mut bytes).unwrap();
        assert_decodes_exactly(&header, &bytes, b"payload", |b| {
            draft16::decode_subgroup_object(b, extensions_present)
        });
    }
}

/// Writes `entries` as one fetch stream, payloads included.
fn fetch_stream(entries: &[FetchObject]) -> Vec<u8> {
    let mut writer = FetchObjectWriter::new();
    let mut bytes = Vec::new();
    for entry in entries {
        writer.encode(entry, &mut bytes).unwrap();
        if let FetchObject::Object { header, .. } = entry {
            bytes.extend(std::iter::repeat_n(0xee, header.payload_len as usize));
        }
    }
    bytes
}

#[test]
fn fetch_streams_round_trip() {
    let entries = samples::fetch_objects();
    let bytes = fetch_stream(&entries);
    let mut reader = FetchObjectReader::new();
    let mut rest = bytes.as_slice();
    let mut decoded = Vec::new();
    let mut flags = BTreeSet::new();
    while !rest.is_empty() {
        let before = reader.clone();
        let (entry, used) = reader.decode(rest).unwrap();
        flags.insert(moq_wire::varint::decode(&mut &rest[..]).unwrap());
        // Every prefix of the entry is incomplete, and leaves the reader where it was.
        for len in 0..used {
            let mut again = before.clone();
            assert_eq!(again.decode(&rest[..len]), Err(DecodeError::Incomplete));
            assert_eq!(again.decode(rest), Ok((entry.clone(), used)));
        }
        rest = &rest[used..];
        if let FetchObject::Object { header, .. } = &entry {
            rest = &rest[header.payload_len as usize..];
        }
        decoded.push(entry);
    }
    assert_eq!(decoded, entries);
    // Every subgroup mode, every presence bit, the datagram bit and both range markers.
    let seen = flags
        .iter()
        .fold(0, |acc, f| if *f < 0x80 { acc | f } else { acc });
    assert_eq!(seen, 0x7f, "{flags:x?}");
    for mode in 0..4 {
        assert!(
            flags.iter().any(|f| *f < 0x40 && f & 0x03 == mode),
            "subgroup mode {mode}: {flags:x?}"
        );
    }
    assert!(flags.contains(&0x8c) && flags.contains(&0x10c));
}

#[test]
fn draft14_fetch_objects_convert() {
    let header = FetchObjectHeader {
        group_id: 1,
        subgroup_id: 0,
        object_id: 2,
        publisher_priority: 5,
        extensions: Vec::new(),
        payload_len: 0,
        status: ObjectStatus::DoesNotExist,
    };
    assert_eq!(
        FetchObject::from_draft14(header.clone()),
        Ok(FetchObject::NonExistentRange {
            end: Location::new(1, 2)
        })
    );
    let normal = FetchObjectHeader {
        status: ObjectStatus::Normal,
        ..header.clone()
    };
    assert_eq!(
        FetchObject::from_draft14(normal.clone()),
        Ok(FetchObject::Object {
            header: normal,
            datagram: false
        })
    );
    let end = FetchObjectHeader {
        status: ObjectStatus::EndOfTrack,
        ..header
    };
    let mut out = Vec::new();
    assert!(
        FetchObjectWriter::new()
            .encode_draft14(&end, &mut out)
            .is_err()
    );
    assert!(out.is_empty());
}

#[test]
fn datagrams_round_trip_with_all_types() {
    let mut types = BTreeSet::new();
    for header in samples::datagrams() {
        let mut bytes = Vec::new();
        draft16::encode_datagram(&header, Some(DEFAULT_PRIORITY), &mut bytes).unwrap();
        let omitted = header.publisher_priority == DEFAULT_PRIORITY;
        let datagram_type = draft16::datagram_type(&header, omitted);
        assert_eq!(u64::from(bytes[0]), datagram_type);
        types.insert(datagram_type);
        let payload = common::datagram_payload(&header);
        assert_decodes_to(&header, &bytes, payload, |b| {
            draft16::decode_datagram(b, &default_priority)
        });
    }
    let expected: BTreeSet<u64> = (0x00..=0x0f)
        .chain([0x20, 0x21, 0x24, 0x25, 0x28, 0x29, 0x2c, 0x2d])
        .collect();
    assert_eq!(types, expected);
}

#[test]
fn extension_blocks_round_trip() {
    let block = samples::extension_block();
    // PRIOR_GROUP_ID_GAP (0x3c) = 2, then 0x4d (delta 0x11) = "trace"
    assert_eq!(
        block,
        [0x3c, 0x02, 0x11, 0x05, b't', b'r', b'a', b'c', b'e']
    );
    assert_eq!(
        draft16::decode_extensions(&block).unwrap(),
        common::samples::extension_pairs()
    );
    // Sorted on the way out, repeats kept in order.
    let unsorted = [
        KeyValuePair::int(0x3e, 1),
        KeyValuePair::int(0x3c, 2),
        KeyValuePair::int(0x3e, 3),
    ];
    let block = draft16::encode_extensions(&unsorted).unwrap();
    assert_eq!(block, [0x3c, 0x02, 0x02, 0x01, 0x00, 0x03]);
    assert_eq!(
        draft16::decode_extensions(&block).unwrap(),
        [
            unsorted[1].clone(),
            unsorted[0].clone(),
            unsorted[2].clone()
        ]
    );
}
