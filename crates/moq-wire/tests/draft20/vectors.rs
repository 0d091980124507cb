//! Byte vectors derived by hand from the draft-20 text (message layouts, the `vi64` integers,
//! Type-Value parameters), each checked both ways: the message encodes to exactly these bytes,
//! and these bytes decode to exactly the message. None holds a LOCATION_FILTER, the one thing
//! draft-22 writes differently, so the draft-22 suite checks them too ([`super::filters`]
//! holds each draft's own).

use moq_wire::codec::{Channel, RequestKind, StreamRequest};
use moq_wire::draft20::{self, FetchObject, FetchObjectReader, FetchObjectWriter};
use moq_wire::message::*;

use super::common::hex;
use super::common::samples::subscribe;
use super::samples::ids;
use super::{channel_of, decode, encode, ours};

/// `message` encodes to `expected` (hex) and decodes from it, on its channel.
pub fn check(message: ControlMessage, expected: &str) {
    let bytes = hex(expected);
    assert_eq!(encode(&message), bytes, "{message:?}");
    assert_eq!(
        decode(&bytes, channel_of(&message)).unwrap(),
        (message, bytes.len())
    );
}

/// A SUBSCRIBE of anon/demo "video" with only `filter`, and its bytes given the filter's
/// value (`value`, after the parameter type).
pub fn check_filter(filter: FilterType, value: &str) {
    let message = Subscribe {
        request_id: 4,
        namespace: super::samples::namespace(),
        track_name: b"video".to_vec(),
        subscriber_priority: 128,
        group_order: GroupOrder::Publisher,
        forward: true,
        filter,
        params: Parameters::new(),
        fill: None,
    };
    let body = format!("04 {NAMESPACE} {VIDEO} 01 21 {value}");
    let len = super::common::hex(&body).len();
    check(
        ControlMessage::Subscribe(message),
        &format!("03 {len:04x} {body}"),
    );
}

/// A live join: a SUBSCRIBE of the next object whose fill asks for the current group.
pub fn live_join() -> ControlMessage {
    ControlMessage::Subscribe(Subscribe {
        subscriber_priority: 128,
        group_order: GroupOrder::Publisher,
        params: Parameters::new(),
        fill: Some(Fill {
            filter: Some(FilterType::GroupsBack(0)),
            ..Fill::default()
        }),
        ..subscribe(FilterType::LargestObject)
    })
}

// Pieces that recur: the namespace ("anon", "demo") and the track name "video".
pub const NAMESPACE: &str = "02 04 616e6f6e 04 64656d6f";
pub const VIDEO: &str = "05 766964656f";

#[test]
fn client_setup() {
    check(
        ControlMessage::ClientSetup(ClientSetup {
            versions: vec![super::codec().version()],
            params: Parameters::new()
                .with_bytes(setup_param::PATH, b"/anon".to_vec())
                .with_bytes(setup_param::MOQT_IMPLEMENTATION, b"moq".to_vec()),
        }),
        "af00 000c     // SETUP (0x2F00 in two vi64 bytes), 12 bytes
         01 05 2f616e6f6e   // PATH (type 1) \"/anon\"
         06 03 6d6f71", // MOQT_IMPLEMENTATION (1 + 6 = 7) \"moq\"
    );
}

#[test]
fn server_setup_is_the_same_message_from_the_server() {
    let bytes = hex("af00 0002 08 04"); // MAX_REQUEST_UPDATES (8) = 4
    let server = ControlMessage::ServerSetup(ServerSetup {
        version: super::codec().version(),
        params: Parameters::new().with_int(draft20::setup_option::MAX_REQUEST_UPDATES, 4),
    });
    assert_eq!(
        decode(&bytes, Channel::Control { from_server: true }).unwrap(),
        (server.clone(), bytes.len())
    );
    assert_eq!(encode(&server), bytes);
}

#[test]
fn goaway() {
    check(
        ControlMessage::Goaway(Goaway {
            new_session_uri: "moqt://b".into(),
        }),
        "10 000a 08 6d6f71743a2f2f62 00", // URI, then a Timeout of 0
    );
    // A Timeout is read, and not modelled.
    let with_timeout = hex("10 000b 08 6d6f71743a2f2f62 812c");
    let (decoded, _) = decode(&with_timeout, Channel::Control { from_server: true }).unwrap();
    assert_eq!(
        decoded,
        ControlMessage::Goaway(Goaway {
            new_session_uri: "moqt://b".into()
        })
    );
}

#[test]
fn subscribe_ok() {
    check(
        ControlMessage::SubscribeOk(SubscribeOk {
            request_id: ids::SUBSCRIBE,
            track_alias: 300,
            expires_ms: 0,
            group_order: GroupOrder::Descending,
            largest: Some(Location::new(5, 2)),
            params: Parameters::new(),
        }),
        "04 0008
         812c          // Track Alias 300 (no Request ID: the stream names the SUBSCRIBE)
         01 09 05 02   // LARGEST_OBJECT (9): a bare Location {5, 2}
         22 02         // track property DEFAULT_PUBLISHER_GROUP_ORDER (0x22): descending",
    );
}

#[test]
fn request_update_names_the_subscription_by_its_stream() {
    check(
        ControlMessage::SubscribeUpdate(SubscribeUpdate {
            request_id: ids::UPDATE,
            subscription_request_id: ids::SUBSCRIBE,
            start: Location::new(0, 0),
            end_group: None,
            subscriber_priority: 128,
            forward: false,
            params: Parameters::new().with_int(draft20::param::FORWARD, 0),
        }),
        "02 0004 06 01 10 00", // Request ID 6, one parameter: FORWARD (0x10) = 0
    );
}

#[test]
fn publish_done_swaps_expired_and_too_far_behind() {
    check(
        ControlMessage::PublishDone(PublishDone {
            request_id: ids::SUBSCRIBE,
            status: publish_done_code::TOO_FAR_BEHIND,
            stream_count: 3,
            reason: String::new(),
        }),
        "0b 0003 05 03 00", // TOO_FAR_BEHIND is 0x5 in draft-20 (0x6 in draft-14)
    );
    check(
        ControlMessage::PublishDone(PublishDone {
            request_id: ids::SUBSCRIBE,
            status: publish_done_code::SUBSCRIPTION_ENDED,
            stream_count: moq_wire::varint::MAX_VARINT,
            reason: String::new(),
        }),
        "0b 000b 03 ffffffffffffffffff 00", // an unknown count is 2^64 - 1
    );
}

#[test]
fn fetch_ok() {
    check(
        ControlMessage::FetchOk(FetchOk {
            request_id: ids::FETCH,
            group_order: GroupOrder::Ascending,
            end_of_track: true,
            end_location: Location::new(4, 0),
            params: Parameters::new(),
        }),
        "18 0004 01 04 00 00", // End Of Track, End Location, no parameters, no properties
    );
}

#[test]
fn request_ok_and_request_error() {
    check(
        ControlMessage::PublishNamespaceOk(PublishNamespaceOk {
            request_id: ids::PUBLISH_NAMESPACE,
        }),
        "07 0001 00",
    );
    check(
        ControlMessage::TrackStatusOk(SubscribeOk {
            request_id: ids::TRACK_STATUS,
            track_alias: 0,
            expires_ms: 0,
            group_order: GroupOrder::Ascending,
            largest: Some(Location::new(2, 2)),
            params: Parameters::new(),
        }),
        "07 0004 01 09 02 02",
    );
    check(
        ControlMessage::SubscribeError(SubscribeError {
            request_id: ids::SUBSCRIBE,
            code: subscribe_error::TRACK_DOES_NOT_EXIST,
            reason: "no".into(),
        }),
        "05 0005 10 00 02 6e6f", // DOES_NOT_EXIST (0x10), retry interval 0, \"no\"
    );
}

#[test]
fn redirect() {
    check(
        ControlMessage::Redirect(Redirect {
            request_id: ids::SUBSCRIBE,
            reason: String::new(),
            connect_uri: "moqt://c".into(),
            target: Some((TrackNamespace::from_path("x"), b"v".to_vec())),
        }),
        "05 0011 34 00 00  // REDIRECT (0x34), retry interval 0, no reason
         08 6d6f71743a2f2f63 // Connect URI
         01 01 78 01 76", // namespace (\"x\"), track name \"v\"
    );
}

#[test]
fn namespaces() {
    check(
        ControlMessage::PublishNamespace(PublishNamespace {
            request_id: ids::PUBLISH_NAMESPACE,
            namespace: super::samples::namespace(),
            params: Parameters::new()
                .with_bytes(draft20::param::AUTHORIZATION_TOKEN, b"token".to_vec()),
        }),
        &format!("06 0014 14 {NAMESPACE} 01 03 05 746f6b656e"),
    );
    let prefix = NamespacePrefix(TrackNamespace::from_path("anon"));
    check(
        ControlMessage::SubscribeNamespace(SubscribeNamespace {
            request_id: ids::SUBSCRIBE_NAMESPACE,
            namespace_prefix: prefix.clone(),
            params: Parameters::new(),
        }),
        "50 0008 12 01 04 616e6f6e 00",
    );
    check(
        ControlMessage::SubscribeTracks(SubscribeNamespace {
            request_id: ids::SUBSCRIBE_NAMESPACE,
            namespace_prefix: prefix,
            params: Parameters::new(),
        }),
        "51 0008 12 01 04 616e6f6e 00",
    );
}

#[test]
fn track_status_and_publish() {
    check(
        ControlMessage::TrackStatus(Subscribe {
            request_id: ids::TRACK_STATUS,
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            params: Parameters::new().with_int(draft20::param::INCLUDE_PROPERTIES, 1),
            ..subscribe(FilterType::AbsoluteStart(Location::new(0, 0)))
        }),
        &format!("0d 0015 10 {NAMESPACE} {VIDEO} 01 35 01"), // INCLUDE_PROPERTIES (0x35) = 1
    );
    check(
        ControlMessage::Publish(Publish {
            request_id: ids::PUBLISH,
            namespace: super::samples::namespace(),
            track_name: b"catalog".to_vec(),
            track_alias: 2,
            group_order: GroupOrder::Descending,
            largest: Some(Location::new(1, 0)),
            forward: true,
            params: Parameters::new(),
        }),
        &format!(
            "1d 001b 03 {NAMESPACE} 07 636174616c6f67
             02          // Track Alias
             01 09 01 00 // LARGEST_OBJECT {{1, 0}}
             22 02       // DEFAULT_PUBLISHER_GROUP_ORDER: descending"
        ),
    );
}

#[test]
fn integers_may_be_longer_than_needed() {
    // Request ID 4 in two bytes where one would do.
    let long = hex(&format!("03 000f 8004 {NAMESPACE} 00 00"));
    let (decoded, _) = decode(&long, Channel::NewRequest).unwrap();
    let ControlMessage::Subscribe(subscribe) = decoded else {
        panic!("{decoded:?}")
    };
    assert_eq!(subscribe.request_id, 4);
    assert!(subscribe.track_name.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Data streams

#[test]
fn subgroup_headers() {
    let header = SubgroupHeader {
        track_alias: 300,
        group_id: 5,
        subgroup_id: SubgroupId::Zero,
        publisher_priority: 7,
        extensions_present: false,
        contains_end_of_group: true,
    };
    let stream = DataStreamHeader::Subgroup(header);
    let mut out = Vec::new();
    draft20::encode_data_stream_header(&stream, None, &mut out).unwrap();
    assert_eq!(out, hex("18 812c 05 07")); // END_OF_GROUP, alias 300, group 5, priority 7
    // The priority left out when it is the track's default (0x20).
    out.clear();
    draft20::encode_data_stream_header(&stream, Some(7), &mut out).unwrap();
    assert_eq!(out, hex("38 812c 05"));
    // FIRST_OBJECT (0x40): the stream begins at its subgroup's first object; read, not kept.
    assert_eq!(
        draft20::decode_data_stream_header(&hex("58 812c 05 07"), &|_| 128),
        Ok((stream, 5))
    );
    assert_eq!(
        draft20::decode_data_stream_header(&hex("05 812c"), &|_| 128),
        Ok((DataStreamHeader::Fetch(FetchHeader { request_id: 300 }), 3))
    );
}

#[test]
fn subgroup_object() {
    let object = SubgroupObjectHeader {
        object_id_delta: 0,
        extensions: Vec::new(),
        payload_len: 200,
        status: ObjectStatus::Normal,
    };
    let mut out = Vec::new();
    draft20::encode_subgroup_object(&object, false, &mut out).unwrap();
    assert_eq!(out, hex("00 80c8")); // delta 0, 200 bytes of payload
    assert_eq!(
        draft20::decode_subgroup_object(&out, false),
        Ok((object, 3))
    );
}

#[test]
fn fetch_objects() {
    let entries = [
        FetchObject::Object {
            header: FetchObjectHeader {
                group_id: 4,
                subgroup_id: 0,
                object_id: 9,
                publisher_priority: 3,
                extensions: Vec::new(),
                payload_len: 100,
                status: ObjectStatus::Normal,
            },
            datagram: false,
        },
        FetchObject::TimedOutRange {
            end: Location::new(9, 0),
        },
    ];
    // Group, object and priority present, subgroup 0 (0x1c); then End of Timed-Out Range
    // (0x20c, a two-byte vi64) at {9, 0}.
    let expected = hex("1c 04 09 03 64  820c 09 00");
    let mut writer = FetchObjectWriter::new();
    let mut out = Vec::new();
    for entry in &entries {
        writer.encode(entry, &mut out).unwrap();
    }
    assert_eq!(out, expected);
    let mut reader = FetchObjectReader::new();
    let (first, used) = reader.decode(&expected).unwrap();
    assert_eq!((first, used), (entries[0].clone(), 5));
    assert_eq!(
        reader.decode(&expected[5..]).unwrap(),
        (entries[1].clone(), 4)
    );
}

#[test]
fn datagram() {
    let header = DatagramHeader {
        track_alias: 5,
        group_id: 40,
        object_id: 0,
        publisher_priority: 128,
        extensions: Vec::new(),
        end_of_group: false,
        status: None,
    };
    let mut out = Vec::new();
    draft20::encode_datagram(&header, None, &mut out).unwrap();
    assert_eq!(out, hex("04 05 28 80")); // no Object ID (0x04), alias 5, group 40, priority
    assert_eq!(
        draft20::decode_datagram(&hex("04 05 28 80 aa"), &|_| 0),
        Ok((header, 4))
    );
}

#[test]
fn the_stream_a_message_arrives_on_decides_what_it_answers() {
    let ok = hex("07 0001 00");
    let on = |kind| decode(&ok, ours(40, kind)).unwrap().0.name();
    assert_eq!(on(RequestKind::PublishNamespace), "PUBLISH_NAMESPACE_OK");
    assert_eq!(
        on(RequestKind::SubscribeNamespace),
        "SUBSCRIBE_NAMESPACE_OK"
    );
    assert_eq!(on(RequestKind::SubscribeTracks), "SUBSCRIBE_NAMESPACE_OK");
    assert_eq!(on(RequestKind::TrackStatus), "TRACK_STATUS_OK");
    assert_eq!(on(RequestKind::Publish), "PUBLISH_OK");
    // On a subscription's stream a REQUEST_OK answers an update.
    assert_eq!(on(RequestKind::Subscribe), "TRACK_STATUS_OK");
    let error = hex("05 0003 03 00 00");
    let on = |kind, ours| {
        decode(
            &error,
            Channel::Request(StreamRequest {
                request_id: 40,
                kind,
                ours,
            }),
        )
        .unwrap()
        .0
        .name()
    };
    assert_eq!(on(RequestKind::Subscribe, true), "SUBSCRIBE_ERROR");
    assert_eq!(on(RequestKind::Fetch, true), "FETCH_ERROR");
    assert_eq!(
        on(RequestKind::PublishNamespace, true),
        "PUBLISH_NAMESPACE_ERROR"
    );
    assert_eq!(on(RequestKind::Subscribe, false), "TRACK_STATUS_ERROR");
    // A GOAWAY on a request stream moves that request.
    let goaway = hex("10 000a 08 6d6f71743a2f2f62 00");
    assert_eq!(
        decode(&goaway, ours(40, RequestKind::Subscribe)).unwrap().0,
        ControlMessage::Redirect(Redirect {
            request_id: 40,
            reason: "GOAWAY".into(),
            connect_uri: "moqt://b".into(),
            target: None,
        })
    );
}

#[test]
fn an_update_answer_is_a_plain_request_ok() {
    let ok = ControlMessage::SubscribeUpdateOk(SubscribeUpdateOk {
        request_id: ids::UPDATE,
        subscription_request_id: ids::SUBSCRIBE,
    });
    assert_eq!(encode(&ok), hex("07 0001 00"));
}
