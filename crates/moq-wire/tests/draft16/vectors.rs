//! Byte-exact encodings worked out by hand from draft-16's field layouts. Each vector is checked
//! in both directions: the value encodes to exactly these bytes, and the bytes decode to
//! exactly this value.

use moq_wire::draft16::{
    self, FetchObject, FetchObjectReader, FetchObjectWriter, extension, param,
};
use moq_wire::message::*;

use super::common::{self, hex, vectors};
use super::{CODEC, decode, ids};

fn check_control(message: ControlMessage, expected: &str) {
    common::check_control(&CODEC, message, expected);
}

#[test]
fn client_setup() {
    check_control(
        ControlMessage::ClientSetup(ClientSetup {
            versions: vec![draft16::VERSION],
            params: Parameters::new()
                .with_bytes(setup_param::PATH, b"/moq".to_vec())
                .with_int(setup_param::MAX_REQUEST_ID, 100),
        }),
        "20 00 0a         // type CLIENT_SETUP, payload length 10
         02               // 2 parameters (no versions in draft-16)
         01 04 2f 6d 6f 71  // delta 1: PATH (odd): length 4, \"/moq\"
         01 40 64         // delta 1: MAX_REQUEST_ID (even) = 100",
    );
}

#[test]
fn server_setup() {
    check_control(
        ControlMessage::ServerSetup(ServerSetup {
            version: draft16::VERSION,
            params: Parameters::new()
                .with_int(setup_param::MAX_REQUEST_ID, 100)
                .with_bytes(setup_param::MOQT_IMPLEMENTATION, b"x".to_vec()),
        }),
        "21 00 07         // type SERVER_SETUP, length 7
         02               // 2 parameters
         02 40 64         // delta 2: MAX_REQUEST_ID = 100
         05 01 78         // delta 5: MOQT_IMPLEMENTATION (0x07) = \"x\"",
    );
}

#[test]
fn subscribe_with_parameters() {
    check_control(
        vectors::subscribe_live_cam(Parameters::new().with_int(param::DELIVERY_TIMEOUT, 500)),
        "03 00 1a              // type SUBSCRIBE, length 26
         00                    // request ID 0
         02 04 6c 69 76 65 03 63 61 6d  // (\"live\", \"cam\")
         05 76 69 64 65 6f     // track name \"video\"
         03                    // 3 parameters; priority 128 and forward 1 are the defaults
         02 41 f4              // delta 2: DELIVERY_TIMEOUT = 500
         1f 01 01              // delta 0x1f: SUBSCRIPTION_FILTER (0x21), 1 byte: NextGroupStart
         01 01                 // delta 1: GROUP_ORDER (0x22) = ascending",
    );
}

#[test]
fn subscribe_with_defaults_only() {
    check_control(
        ControlMessage::Subscribe(Subscribe {
            request_id: 2,
            namespace: TrackNamespace::from_path("live"),
            track_name: b"a".to_vec(),
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: Parameters::new(),
            fill: None,
        }),
        "03 00 0a 02 01 04 6c 69 76 65 01 61
         00          // no parameters: every term at its default",
    );
}

#[test]
fn subscribe_not_forwarding_from_a_location() {
    check_control(
        ControlMessage::Subscribe(Subscribe {
            request_id: 4,
            namespace: TrackNamespace::from_path("l"),
            track_name: Vec::new(),
            subscriber_priority: 1,
            group_order: GroupOrder::Descending,
            forward: false,
            filter: FilterType::AbsoluteRange {
                start: Location::new(10, 2),
                end_group: 20,
            },
            params: Parameters::new(),
            fill: None,
        }),
        "03 00 12
         04 01 01 6c 00        // request 4, (\"l\"), empty track name
         04                    // 4 parameters
         10 00                 // delta 0x10: FORWARD = 0
         10 01                 // delta 0x10: SUBSCRIBER_PRIORITY (0x20) = 1
         01 04 04 0a 02 14     // delta 1: SUBSCRIPTION_FILTER, 4 bytes: AbsoluteRange {10, 2} to 20
         01 02                 // delta 1: GROUP_ORDER = descending",
    );
}

#[test]
fn subscribe_ok_with_content() {
    check_control(
        vectors::subscribe_ok_with_content(
            Parameters::new().with_int(extension::MAX_CACHE_DURATION, 10_000),
        ),
        "04 00 0d         // type SUBSCRIBE_OK, length 13
         02 01            // request ID 2, track alias 1
         01               // 1 parameter (expires 0 is left out)
         09 03 41 2c 05   // delta 9: LARGEST_OBJECT, 3 bytes: {300, 5}
         04 67 10         // track extension MAX_CACHE_DURATION (4) = 10000
         1e 02            // delta 0x1e: DEFAULT_PUBLISHER_GROUP_ORDER (0x22) = descending",
    );
}

#[test]
fn subscribe_ok_without_content() {
    check_control(
        ControlMessage::SubscribeOk(vectors::subscribe_ok_without_content(
            30_000,
            GroupOrder::Ascending,
        )),
        "04 00 08
         00 00            // request ID, track alias
         01 08 80 00 75 30  // 1 parameter: delta 8, EXPIRES = 30000 (4-byte varint)
                          // no track extensions: ascending is the default",
    );
}

#[test]
fn request_ok() {
    check_control(
        ControlMessage::PublishNamespaceOk(PublishNamespaceOk {
            request_id: ids::PUBLISH_NAMESPACE,
        }),
        "07 00 02 00 00   // type REQUEST_OK, length 2, request ID 0, no parameters",
    );
    check_control(
        ControlMessage::TrackStatusOk(SubscribeOk {
            request_id: ids::TRACK_STATUS,
            track_alias: 0,
            expires_ms: 0,
            group_order: GroupOrder::Ascending,
            largest: Some(Location::new(2, 2)),
            params: Parameters::new(),
        }),
        "07 00 06
         10               // request ID 16 (a TRACK_STATUS)
         01 09 02 02 02   // 1 parameter: LARGEST_OBJECT {2, 2}",
    );
}

#[test]
fn request_error() {
    check_control(
        ControlMessage::SubscribeError(SubscribeError {
            request_id: ids::SUBSCRIBE,
            code: subscribe_error::TRACK_DOES_NOT_EXIST,
            reason: "no".into(),
        }),
        "05 00 06         // type REQUEST_ERROR, length 6
         04               // request ID 4 (a SUBSCRIBE)
         10               // DOES_NOT_EXIST (draft-14 TRACK_DOES_NOT_EXIST, 4)
         00               // retry interval 0: do not retry
         02 6e 6f         // reason \"no\"",
    );
    check_control(
        ControlMessage::FetchError(FetchError {
            request_id: ids::FETCH,
            code: fetch_error::INVALID_JOINING_REQUEST_ID,
            reason: String::new(),
        }),
        "05 00 04 0c 32 00 00   // request 12 (a FETCH), INVALID_JOINING_REQUEST_ID (0x32 / 7)",
    );
    // A retry interval from the peer is read and dropped.
    let (message, _) = decode(&hex("05 00 05 0c 11 43 e9 00")).unwrap();
    assert_eq!(
        message,
        ControlMessage::FetchError(FetchError {
            request_id: ids::FETCH,
            code: fetch_error::INVALID_RANGE,
            reason: String::new(),
        })
    );
}

#[test]
fn joining_fetches() {
    check_control(
        ControlMessage::Fetch(Fetch {
            request_id: 12,
            subscriber_priority: 2,
            group_order: GroupOrder::Ascending,
            fetch_type: FetchType::RelativeJoining(JoiningFetch {
                joining_request_id: 4,
                joining_start: 2,
            }),
            params: Parameters::new(),
        }),
        "16 00 07         // type FETCH, length 7
         0c               // request ID 12
         02 04 02         // relative joining: subscription 4, 2 groups back
         01 20 02         // 1 parameter: delta 0x20, SUBSCRIBER_PRIORITY = 2 (ascending: absent)",
    );
    check_control(
        ControlMessage::Fetch(Fetch {
            request_id: 14,
            subscriber_priority: 128,
            group_order: GroupOrder::Descending,
            fetch_type: FetchType::AbsoluteJoining(JoiningFetch {
                joining_request_id: 4,
                joining_start: 5,
            }),
            params: Parameters::new(),
        }),
        "16 00 07 0e
         03 04 05         // absolute joining: subscription 4, from group 5
         01 22 02         // 1 parameter: delta 0x22, GROUP_ORDER = descending",
    );
}

#[test]
fn standalone_fetch() {
    check_control(
        ControlMessage::Fetch(Fetch {
            request_id: 10,
            subscriber_priority: 128,
            group_order: GroupOrder::Ascending,
            fetch_type: FetchType::Standalone {
                namespace: TrackNamespace::from_path("a"),
                track_name: b"v".to_vec(),
                start: Location::new(1, 0),
                end: Location::new(4, 0),
            },
            params: Parameters::new().with_bytes(param::AUTHORIZATION_TOKEN, vec![0x03, 0x00]),
        }),
        "16 00 10 0a
         01 01 01 61 01 76    // standalone: (\"a\"), \"v\"
         01 00 04 00          // from {1, 0} to {4, 0}
         01 03 02 03 00       // 1 parameter: AUTHORIZATION_TOKEN (USE_VALUE, type 0, empty)",
    );
}

#[test]
fn fetch_ok() {
    check_control(
        ControlMessage::FetchOk(FetchOk {
            request_id: 10,
            group_order: GroupOrder::Ascending,
            end_of_track: true,
            end_location: Location::new(4, 0),
            params: Parameters::new(),
        }),
        "18 00 05         // type FETCH_OK, length 5
         0a 01            // request ID 10, end of track
         04 00            // end location {4, 0}
         00               // no parameters, no track extensions",
    );
    check_control(
        ControlMessage::FetchOk(FetchOk {
            request_id: 10,
            group_order: GroupOrder::Descending,
            end_of_track: false,
            end_location: Location::new(4, 1),
            params: Parameters::new().with_int(extension::MAX_CACHE_DURATION, 1000),
        }),
        "18 00 0a 0a 00 04 01 00
         04 43 e8         // track extension MAX_CACHE_DURATION = 1000
         1e 02            // DEFAULT_PUBLISHER_GROUP_ORDER = descending",
    );
}

#[test]
fn request_update() {
    let update = draft16::request_update(
        6,
        4,
        Parameters::new()
            .with_int(param::FORWARD, 1)
            .with_int(param::SUBSCRIBER_PRIORITY, 3),
    )
    .unwrap();
    check_control(
        ControlMessage::SubscribeUpdate(update),
        "02 00 07         // type REQUEST_UPDATE, length 7
         06 04            // request ID 6, updating request 4
         02 10 01 10 03   // 2 parameters: FORWARD = 1, SUBSCRIBER_PRIORITY (delta 0x10) = 3",
    );
}

#[test]
fn publish() {
    check_control(
        ControlMessage::Publish(Publish {
            request_id: 1,
            namespace: TrackNamespace::from_path("a"),
            track_name: b"t".to_vec(),
            track_alias: 2,
            group_order: GroupOrder::Ascending,
            largest: Some(Location::new(1, 0)),
            forward: false,
            params: Parameters::new().with_int(extension::DEFAULT_PUBLISHER_PRIORITY, 64),
        }),
        "1d 00 11
         01 01 01 61 01 74 02  // request 1, (\"a\"), \"t\", alias 2
         02 09 02 01 00 07 00  // 2 parameters: LARGEST_OBJECT {1, 0}, FORWARD (delta 7) = 0
         0e 40 40              // track extension DEFAULT_PUBLISHER_PRIORITY = 64",
    );
}

#[test]
fn publish_ok() {
    check_control(
        ControlMessage::PublishOk(PublishOk {
            request_id: 1,
            forward: true,
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            filter: FilterType::LargestObject,
            params: Parameters::new().with_int(param::NEW_GROUP_REQUEST, 0),
        }),
        "1e 00 07 01
         02 21 01 02 11 00  // SUBSCRIPTION_FILTER (0x21) = LargestObject, NEW_GROUP_REQUEST (0x32) = 0",
    );
}

#[test]
fn namespace_messages_by_request_id() {
    check_control(
        vectors::publish_namespace(),
        "06 00 0d 00 02 04 61 6e 6f 6e 04 64 65 6d 6f 00",
    );
    check_control(
        ControlMessage::PublishNamespaceDone(PublishNamespaceDone {
            namespace: TrackNamespace::from_path("anon/demo"),
        }),
        "09 00 01 14      // PUBLISH_NAMESPACE_DONE for our request 20",
    );
    check_control(
        ControlMessage::PublishNamespaceCancel(PublishNamespaceCancel {
            namespace: TrackNamespace::from_path("anon/demo"),
            code: publish_namespace_error::UNINTERESTED,
            reason: String::new(),
        }),
        "0c 00 03 15 20 00   // the peer's request 21, UNINTERESTED (0x20 / 4), no reason",
    );
    check_control(
        ControlMessage::SubscribeNamespace(SubscribeNamespace {
            request_id: 18,
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
            params: Parameters::new().with_int(param::FORWARD, 0),
        }),
        "11 00 0b 12 01 04 61 6e 6f 6e
         02               // subscribe options: PUBLISH and NAMESPACE
         01 10 00         // FORWARD = 0",
    );
}

#[test]
fn publish_done_malformed_track() {
    check_control(
        ControlMessage::PublishDone(PublishDone {
            request_id: 2,
            status: publish_done_code::MALFORMED_TRACK,
            stream_count: 7,
            reason: String::new(),
        }),
        "0b 00 04 02 12 07 00   // request 2, MALFORMED_TRACK (0x12 / 7), 7 streams",
    );
}

fn check_stream_header(header: SubgroupHeader, default: Option<u8>, expected: &str) {
    let expected = hex(expected);
    let mut bytes = Vec::new();
    let data = DataStreamHeader::Subgroup(header);
    draft16::encode_data_stream_header(&data, default, &mut bytes).unwrap();
    assert_eq!(bytes, expected);
    let inherit = |_| default.unwrap_or(0);
    assert_eq!(
        draft16::decode_data_stream_header(&expected, &inherit).unwrap(),
        (data, expected.len())
    );
}

#[test]
fn subgroup_header_with_default_priority() {
    check_stream_header(
        SubgroupHeader {
            track_alias: 1,
            group_id: 5,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: 128,
            extensions_present: false,
            contains_end_of_group: false,
        },
        Some(128),
        "30 01 05   // type 0x30 (default priority), alias 1, group 5: no priority byte",
    );
    // The draft's second example stream: extensions, explicit subgroup 0, default priority.
    check_stream_header(
        SubgroupHeader {
            track_alias: 2,
            group_id: 0,
            subgroup_id: SubgroupId::Explicit(0),
            publisher_priority: 128,
            extensions_present: true,
            contains_end_of_group: false,
        },
        Some(128),
        "35 02 00 00",
    );
    check_stream_header(
        SubgroupHeader {
            track_alias: 1,
            group_id: 1000,
            subgroup_id: SubgroupId::FirstObjectId,
            publisher_priority: 0x10,
            extensions_present: true,
            contains_end_of_group: true,
        },
        None,
        "1b 01 43 e8 10   // type 0x1b, alias 1, group 1000, priority 16",
    );
}

#[test]
fn object_with_delta_coded_extensions() {
    // Extension type 4 = 2186796243 (an 8-byte varint), then type 77 (delta 73) = 14 bytes.
    let extensions = draft16::encode_extensions(&[
        KeyValuePair::int(4, 2_186_796_243),
        KeyValuePair::bytes(77, b"traceID:123456".to_vec()),
    ])
    .unwrap();
    let header = SubgroupObjectHeader {
        object_id_delta: 0,
        extensions,
        payload_len: 4,
        status: ObjectStatus::Normal,
    };
    let expected = hex("00                           // object ID delta 0
         1a                           // 26 bytes of extensions
         04 c0 00 00 00 82 57 dc d3   // delta 4: type 4 = 2186796243
         40 49 0e                     // delta 73: type 77, 14 bytes
         74 72 61 63 65 49 44 3a 31 32 33 34 35 36
         04                           // payload length 4");
    let mut bytes = Vec::new();
    draft16::encode_subgroup_object(&header, true, &mut bytes).unwrap();
    assert_eq!(bytes, expected);
    assert_eq!(
        draft16::decode_subgroup_object(&expected, true).unwrap(),
        (header, expected.len())
    );
}

#[test]
fn end_of_group_object() {
    let header = SubgroupObjectHeader {
        object_id_delta: 2,
        extensions: Vec::new(),
        payload_len: 0,
        status: ObjectStatus::EndOfGroup,
    };
    let mut bytes = Vec::new();
    draft16::encode_subgroup_object(&header, true, &mut bytes).unwrap();
    assert_eq!(
        bytes,
        hex("02 00 00 03   // delta 2, no extensions, length 0, End of Group")
    );
    assert_eq!(
        draft16::decode_subgroup_object(&bytes, true).unwrap(),
        (header, 4)
    );
}

#[test]
fn fetch_objects_with_each_flag() {
    let object = |group_id, subgroup_id, object_id, publisher_priority, extensions, datagram| {
        FetchObject::Object {
            header: FetchObjectHeader {
                group_id,
                subgroup_id,
                object_id,
                publisher_priority,
                extensions,
                payload_len: 2,
                status: ObjectStatus::Normal,
            },
            datagram,
        }
    };
    let entries = [
        object(4, 0, 9, 3, Vec::new(), false),
        object(4, 0, 10, 3, Vec::new(), false),
        object(4, 5, 11, 3, vec![0x3c, 0x01], false),
        object(4, 5, 12, 3, Vec::new(), false),
        object(4, 6, 13, 3, Vec::new(), false),
        object(4, 6, 20, 3, Vec::new(), false),
        object(5, 0, 0, 7, Vec::new(), false),
        object(5, 1, 1, 7, Vec::new(), true),
        FetchObject::NonExistentRange {
            end: Location::new(5, 9),
        },
        object(5, 0, 10, 7, Vec::new(), false),
        FetchObject::UnknownRange {
            end: Location::new(7, 3),
        },
        object(7, 1, 4, 9, Vec::new(), false),
    ];
    let expected = [
        "1c 04 09 03 02    // group, object and priority present; subgroup 0",
        "00 02             // all from the object before: group 4, object 10, priority 3",
        "23 05 02 3c 01 02 // subgroup field (5), extensions: PRIOR_GROUP_ID_GAP = 1",
        "01 02             // subgroup as before (5), object 12",
        "02 02             // subgroup before plus one (6), object 13",
        "05 14 02          // object 20 present, subgroup as before",
        "1c 05 00 07 02    // group 5, object 0, priority 7",
        "40 40 02          // datagram (flags 0x40, a 2-byte varint): no subgroup; object 1",
        "40 8c 05 09       // End of Non-Existent Range at {5, 9}: no payload length",
        "00 02             // object 10, right after the range; subgroup 0",
        "41 0c 07 03       // End of Unknown Range at {7, 3}",
        "12 09 02          // group 7, object 4 from the range; priority 9; subgroup 0 + 1",
    ];
    let mut writer = FetchObjectWriter::new();
    let mut reader = FetchObjectReader::new();
    for (entry, expected) in entries.iter().zip(expected) {
        let expected = hex(expected);
        let mut bytes = Vec::new();
        writer.encode(entry, &mut bytes).unwrap();
        assert_eq!(bytes, expected, "{entry:?}");
        assert_eq!(
            reader.decode(&expected).unwrap(),
            (entry.clone(), expected.len())
        );
    }
}

#[test]
fn datagrams() {
    let payload = vectors::datagram();
    let mut bytes = Vec::new();
    draft16::encode_datagram(&payload, Some(128), &mut bytes).unwrap();
    // Type 0x0c (object ID 0 and priority left out), alias 1, group 7.
    assert_eq!(bytes, hex("0c 01 07"));
    let datagram = hex("0c 01 07 68 69");
    let (decoded, payload_at) = draft16::decode_datagram(&datagram, &|_| 128).unwrap();
    assert_eq!(decoded, payload);
    assert_eq!(&datagram[payload_at..], b"hi");

    let status = DatagramHeader {
        object_id: 0,
        publisher_priority: 0,
        status: Some(ObjectStatus::EndOfTrack),
        ..payload
    };
    let mut bytes = Vec::new();
    draft16::encode_datagram(&status, Some(128), &mut bytes).unwrap();
    // Type 0x24 (status, object ID 0), alias 1, group 7, priority 0, End of Track.
    assert_eq!(bytes, hex("24 01 07 00 04"));
    assert_eq!(
        draft16::decode_datagram(&bytes, &|_| 128).unwrap(),
        (status, 5)
    );
}
