//! Byte-exact encodings worked out by hand from the draft's field layouts. Each vector is
//! checked in both directions: the value encodes to exactly these bytes, and the bytes decode
//! to exactly this value.

use moq_wire::draft14::VERSION;
use moq_wire::message::*;

use super::CODEC;
use super::common::{self, hex, vectors};

fn check_control(message: ControlMessage, expected: &str) {
    common::check_control(&CODEC, message, expected);
}

#[test]
fn client_setup_offering_draft_14() {
    check_control(
        ControlMessage::ClientSetup(ClientSetup {
            versions: vec![VERSION],
            params: Parameters::new()
                .with_bytes(setup_param::PATH, b"/moq".to_vec())
                .with_int(setup_param::MAX_REQUEST_ID, 100),
        }),
        "20            // type CLIENT_SETUP
         00 13         // payload length 19
         01            // 1 supported version
         c0 00 00 00 ff 00 00 0e  // 0xff00000e (needs the 8-byte form)
         02            // 2 parameters
         01 04 2f 6d 6f 71        // PATH (odd key): length 4, \"/moq\"
         02 40 64      // MAX_REQUEST_ID (even key): 100 as a 2-byte varint",
    );
}

#[test]
fn server_setup_selecting_draft_14() {
    check_control(
        ControlMessage::ServerSetup(ServerSetup {
            version: VERSION,
            params: Parameters::new().with_int(setup_param::MAX_REQUEST_ID, 100),
        }),
        "21 00 0c                 // type SERVER_SETUP, length 12
         c0 00 00 00 ff 00 00 0e  // selected version
         01 02 40 64              // 1 parameter: MAX_REQUEST_ID = 100",
    );
}

#[test]
fn subscribe_next_group_start() {
    check_control(
        vectors::subscribe_live_cam(Parameters::new()),
        "03 00 16              // type SUBSCRIBE, length 22
         00                    // request ID 0
         02                    // namespace of 2 fields
         04 6c 69 76 65        // \"live\"
         03 63 61 6d           // \"cam\"
         05 76 69 64 65 6f     // track name \"video\"
         80                    // subscriber priority 128 (8 bits)
         01                    // group order ascending
         01                    // forward
         01                    // filter NextGroupStart
         00                    // no parameters",
    );
}

#[test]
fn subscribe_absolute_range() {
    check_control(
        ControlMessage::Subscribe(Subscribe {
            request_id: 2,
            namespace: TrackNamespace::from_path("live"),
            track_name: b"audio".to_vec(),
            subscriber_priority: 0,
            group_order: GroupOrder::Descending,
            forward: false,
            filter: FilterType::AbsoluteRange {
                start: Location::new(10, 0),
                end_group: 20,
            },
            params: Parameters::new().with_int(param::DELIVERY_TIMEOUT, 500),
            fill: None,
        }),
        "03 00 18              // type SUBSCRIBE, length 24
         02                    // request ID 2
         01 04 6c 69 76 65     // namespace (\"live\")
         05 61 75 64 69 6f     // track name \"audio\"
         00 02 00              // priority 0, descending, not forwarding
         04                    // filter AbsoluteRange
         0a 00                 // start location {10, 0}
         14                    // end group 20
         01 02 41 f4           // 1 parameter: DELIVERY_TIMEOUT = 500",
    );
}

#[test]
fn subscribe_ok_without_content() {
    check_control(
        ControlMessage::SubscribeOk(vectors::subscribe_ok_without_content(
            0,
            GroupOrder::Ascending,
        )),
        "04 00 06   // type SUBSCRIBE_OK, length 6
         00 00 00   // request ID, track alias, expires
         01         // ascending
         00         // content exists = 0: no largest location follows
         00         // no parameters",
    );
}

#[test]
fn subscribe_ok_with_content() {
    check_control(
        vectors::subscribe_ok_with_content(
            Parameters::new().with_int(param::MAX_CACHE_DURATION, 10_000),
        ),
        "04 00 0c      // type SUBSCRIBE_OK, length 12
         02 01 00      // request ID 2, track alias 1, expires 0
         02            // descending
         01 41 2c 05   // content exists; largest {300, 5}
         01 04 67 10   // 1 parameter: MAX_CACHE_DURATION = 10000",
    );
}

#[test]
fn publish_done() {
    check_control(
        ControlMessage::PublishDone(PublishDone {
            request_id: 2,
            status: publish_done_code::TRACK_ENDED,
            stream_count: 7,
            reason: "bye".into(),
        }),
        "0b 00 07      // type PUBLISH_DONE, length 7
         02 02 07      // request ID 2, TRACK_ENDED, 7 streams
         03 62 79 65   // reason \"bye\"",
    );
}

#[test]
fn publish_namespace() {
    check_control(
        vectors::publish_namespace(),
        "06 00 0d                        // type PUBLISH_NAMESPACE, length 13
         00                              // request ID 0
         02 04 61 6e 6f 6e 04 64 65 6d 6f // (\"anon\", \"demo\")
         00                              // no parameters",
    );
}

fn check_stream_header(header: SubgroupHeader, expected: &str) {
    let expected = hex(expected);
    let mut bytes = Vec::new();
    header.encode(&mut bytes);
    assert_eq!(bytes, expected);
    assert_eq!(
        DataStreamHeader::decode(&expected).unwrap(),
        (DataStreamHeader::Subgroup(header), expected.len())
    );
}

#[test]
fn subgroup_header_0x10() {
    check_stream_header(
        SubgroupHeader {
            track_alias: 1,
            group_id: 5,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: 0x80,
            extensions_present: false,
            contains_end_of_group: false,
        },
        "10 01 05 80   // type, alias 1, group 5, (no subgroup ID) priority 128",
    );
}

#[test]
fn subgroup_header_0x14() {
    check_stream_header(
        SubgroupHeader {
            track_alias: 2,
            group_id: 0,
            subgroup_id: SubgroupId::Explicit(0),
            publisher_priority: 0,
            extensions_present: false,
            contains_end_of_group: false,
        },
        "14 02 00 00 00   // type, alias 2, group 0, subgroup 0, priority 0",
    );
}

#[test]
fn subgroup_header_0x19() {
    check_stream_header(
        SubgroupHeader {
            track_alias: 1,
            group_id: 1000,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: 0x10,
            extensions_present: true,
            contains_end_of_group: true,
        },
        "19 01 43 e8 10   // type (extensions, end of group), alias 1, group 1000, priority 16",
    );
}

#[test]
fn fetch_header() {
    let mut bytes = Vec::new();
    FetchHeader { request_id: 10 }.encode(&mut bytes);
    assert_eq!(bytes, hex("05 0a"));
}

fn check_object(header: SubgroupObjectHeader, extensions_present: bool, expected: &str) {
    let expected = hex(expected);
    let mut bytes = Vec::new();
    header.encode(extensions_present, &mut bytes);
    assert_eq!(bytes, expected);
    assert_eq!(
        SubgroupObjectHeader::decode(&expected, extensions_present).unwrap(),
        (header, expected.len())
    );
}

#[test]
fn object_with_payload() {
    let header = SubgroupObjectHeader {
        object_id_delta: 0,
        extensions: Vec::new(),
        payload_len: 4,
        status: ObjectStatus::Normal,
    };
    check_object(
        header,
        false,
        "00 04   // delta 0, payload length 4 (no status)",
    );

    // On the wire the header is followed directly by the payload.
    let stream = hex("00 04 61 62 63 64");
    let (_, used) = SubgroupObjectHeader::decode(&stream, false).unwrap();
    assert_eq!(&stream[used..], b"abcd");
}

#[test]
fn object_with_extensions() {
    check_object(
        SubgroupObjectHeader {
            object_id_delta: 0,
            extensions: encode_extensions(&[KeyValuePair::int(0x3c, 2)]).unwrap(),
            payload_len: 4,
            status: ObjectStatus::Normal,
        },
        true,
        "00        // delta 0
         02 3c 02  // 2 bytes of extensions: type 0x3c (even) = 2
         04        // payload length 4",
    );
}

#[test]
fn end_of_group_object() {
    let header = SubgroupObjectHeader {
        object_id_delta: 0,
        extensions: Vec::new(),
        payload_len: 0,
        status: ObjectStatus::EndOfGroup,
    };
    check_object(
        header.clone(),
        false,
        "00 00 03   // delta 0, payload length 0, status End of Group",
    );
    check_object(
        header,
        true,
        "00 00 00 03   // delta 0, no extensions, payload length 0, End of Group",
    );
}

#[test]
fn fetch_object() {
    let header = FetchObjectHeader {
        group_id: 1,
        subgroup_id: 0,
        object_id: 2,
        publisher_priority: 0x80,
        extensions: Vec::new(),
        payload_len: 3,
        status: ObjectStatus::Normal,
    };
    let expected =
        hex("01 00 02 80 00 03   // group 1, subgroup 0, object 2, prio, no ext, 3 bytes");
    let mut bytes = Vec::new();
    header.encode(&mut bytes);
    assert_eq!(bytes, expected);
    assert_eq!(
        FetchObjectHeader::decode(&expected).unwrap(),
        (header, expected.len())
    );
}

#[test]
fn datagrams() {
    let payload = vectors::datagram();
    let mut bytes = Vec::new();
    payload.encode(&mut bytes);
    // Type 0x04 (object ID 0 left out), alias 1, group 7, priority 128.
    assert_eq!(bytes, hex("04 01 07 80"));
    let datagram = hex("04 01 07 80 68 69");
    let (decoded, payload_at) = DatagramHeader::decode(&datagram).unwrap();
    assert_eq!(decoded, payload);
    assert_eq!(&datagram[payload_at..], b"hi");

    let status = DatagramHeader {
        object_id: 3,
        publisher_priority: 0,
        status: Some(ObjectStatus::EndOfGroup),
        ..payload
    };
    let mut bytes = Vec::new();
    status.encode(&mut bytes);
    // Type 0x20, alias 1, group 7, object 3, priority 0, status End of Group.
    assert_eq!(bytes, hex("20 01 07 03 00 03"));
    assert_eq!(DatagramHeader::decode(&bytes).unwrap(), (status, 6));
}
