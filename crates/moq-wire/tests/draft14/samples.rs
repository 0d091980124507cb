//! One or more instances of every message and header, used by the round-trip, partial-input and
//! fuzz tests.

use moq_wire::draft14::*;

pub fn namespace() -> TrackNamespace {
    TrackNamespace::from_path("anon/demo")
}

fn params() -> Parameters {
    Parameters::new()
        .with_int(param::DELIVERY_TIMEOUT, 250)
        .with_bytes(param::AUTHORIZATION_TOKEN, b"token".to_vec())
}

pub fn control_messages() -> Vec<ControlMessage> {
    use ControlMessage as M;
    let subscribe = |filter| Subscribe {
        request_id: 4,
        namespace: namespace(),
        track_name: b"video".to_vec(),
        subscriber_priority: 7,
        group_order: GroupOrder::Descending,
        forward: true,
        filter,
        params: params(),
    };
    let subscribe_ok = |largest| SubscribeOk {
        request_id: 4,
        track_alias: 9,
        expires_ms: 30_000,
        group_order: GroupOrder::Ascending,
        largest,
        params: Parameters::new().with_int(param::MAX_CACHE_DURATION, 1000),
    };
    let error = |request_id| SubscribeError {
        request_id,
        code: subscribe_error::TRACK_DOES_NOT_EXIST,
        reason: "no such track".into(),
    };
    let joining = JoiningFetch {
        joining_request_id: 4,
        joining_start: 2,
    };
    vec![
        M::ClientSetup(ClientSetup {
            versions: vec![VERSION, 0xff00000d],
            params: Parameters::new()
                .with_bytes(setup_param::PATH, b"/anon".to_vec())
                .with_int(setup_param::MAX_REQUEST_ID, 128)
                .with_bytes(setup_param::MOQT_IMPLEMENTATION, b"moq-wire".to_vec()),
        }),
        M::ServerSetup(ServerSetup {
            version: VERSION,
            params: Parameters::new().with_int(setup_param::MAX_REQUEST_ID, 64),
        }),
        M::Goaway(Goaway {
            new_session_uri: "moqt://example.invalid/next".into(),
        }),
        M::Goaway(Goaway::default()),
        M::MaxRequestId(MaxRequestId { request_id: 100 }),
        M::RequestsBlocked(RequestsBlocked {
            max_request_id: 100,
        }),
        M::Subscribe(subscribe(FilterType::NextGroupStart)),
        M::Subscribe(subscribe(FilterType::LargestObject)),
        M::Subscribe(subscribe(FilterType::AbsoluteStart(Location::new(3, 1)))),
        M::Subscribe(subscribe(FilterType::AbsoluteRange {
            start: Location::new(3, 1),
            end_group: 900,
        })),
        M::SubscribeOk(subscribe_ok(None)),
        M::SubscribeOk(subscribe_ok(Some(Location::new(70_000, 12)))),
        M::SubscribeError(error(4)),
        M::SubscribeUpdate(SubscribeUpdate {
            request_id: 6,
            subscription_request_id: 4,
            start: Location::new(5, 0),
            end_group: Some(10),
            subscriber_priority: 1,
            forward: false,
            params: Parameters::new(),
        }),
        M::SubscribeUpdate(SubscribeUpdate {
            request_id: 8,
            subscription_request_id: 4,
            start: Location::new(5, 0),
            end_group: None,
            subscriber_priority: 1,
            forward: true,
            params: params(),
        }),
        M::Unsubscribe(Unsubscribe { request_id: 4 }),
        M::PublishDone(PublishDone {
            request_id: 4,
            status: publish_done_code::SUBSCRIPTION_ENDED,
            stream_count: moq_wire::varint::MAX_VARINT,
            reason: String::new(),
        }),
        M::Publish(Publish {
            request_id: 1,
            namespace: namespace(),
            track_name: b"catalog".to_vec(),
            track_alias: 2,
            group_order: GroupOrder::Descending,
            largest: Some(Location::new(1, 0)),
            forward: true,
            params: params(),
        }),
        M::Publish(Publish {
            request_id: 3,
            namespace: namespace(),
            track_name: Vec::new(),
            track_alias: 3,
            group_order: GroupOrder::Ascending,
            largest: None,
            forward: false,
            params: Parameters::new(),
        }),
        M::PublishOk(PublishOk {
            request_id: 1,
            forward: true,
            subscriber_priority: 0,
            group_order: GroupOrder::Ascending,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: Parameters::new(),
        }),
        M::PublishError(PublishError {
            request_id: 3,
            code: publish_error::UNINTERESTED,
            reason: "not now".into(),
        }),
        M::Fetch(Fetch {
            request_id: 10,
            subscriber_priority: 2,
            group_order: GroupOrder::Publisher,
            fetch_type: FetchType::Standalone {
                namespace: namespace(),
                track_name: b"video".to_vec(),
                start: Location::new(1, 0),
                end: Location::new(4, 0),
            },
            params: params(),
        }),
        M::Fetch(Fetch {
            request_id: 12,
            subscriber_priority: 2,
            group_order: GroupOrder::Ascending,
            fetch_type: FetchType::RelativeJoining(joining.clone()),
            params: Parameters::new(),
        }),
        M::Fetch(Fetch {
            request_id: 14,
            subscriber_priority: 2,
            group_order: GroupOrder::Descending,
            fetch_type: FetchType::AbsoluteJoining(joining),
            params: Parameters::new(),
        }),
        M::FetchOk(FetchOk {
            request_id: 10,
            group_order: GroupOrder::Ascending,
            end_of_track: true,
            end_location: Location::new(4, 0),
            params: Parameters::new(),
        }),
        M::FetchError(FetchError {
            request_id: 12,
            code: fetch_error::NO_OBJECTS,
            reason: "empty".into(),
        }),
        M::FetchCancel(FetchCancel { request_id: 10 }),
        M::TrackStatus(subscribe(FilterType::LargestObject)),
        M::TrackStatusOk(subscribe_ok(Some(Location::new(2, 2)))),
        M::TrackStatusError(error(16)),
        M::PublishNamespace(PublishNamespace {
            request_id: 0,
            namespace: namespace(),
            params: params(),
        }),
        M::PublishNamespaceOk(PublishNamespaceOk { request_id: 0 }),
        M::PublishNamespaceError(PublishNamespaceError {
            request_id: 0,
            code: publish_namespace_error::UNAUTHORIZED,
            reason: "denied".into(),
        }),
        M::PublishNamespaceDone(PublishNamespaceDone {
            namespace: namespace(),
        }),
        M::PublishNamespaceCancel(PublishNamespaceCancel {
            namespace: namespace(),
            code: publish_namespace_error::TIMEOUT,
            reason: "gone".into(),
        }),
        M::SubscribeNamespace(SubscribeNamespace {
            request_id: 18,
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
            params: Parameters::new(),
        }),
        M::SubscribeNamespaceOk(SubscribeNamespaceOk { request_id: 18 }),
        M::SubscribeNamespaceError(SubscribeNamespaceError {
            request_id: 18,
            code: subscribe_namespace_error::NAMESPACE_PREFIX_OVERLAP,
            reason: "overlap".into(),
        }),
        M::UnsubscribeNamespace(UnsubscribeNamespace {
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
        }),
    ]
}

/// All twelve subgroup header types plus a fetch header.
pub fn stream_headers() -> Vec<DataStreamHeader> {
    let mut headers = Vec::new();
    for subgroup_id in [
        SubgroupId::Zero,
        SubgroupId::FirstObjectId,
        SubgroupId::Explicit(77),
    ] {
        for extensions_present in [false, true] {
            for contains_end_of_group in [false, true] {
                headers.push(DataStreamHeader::Subgroup(SubgroupHeader {
                    track_alias: 5,
                    group_id: 1_000_000,
                    subgroup_id,
                    publisher_priority: 200,
                    extensions_present,
                    contains_end_of_group,
                }));
            }
        }
    }
    headers.push(DataStreamHeader::Fetch(FetchHeader { request_id: 10 }));
    headers
}

/// An extension block holding one integer and one byte-string header.
pub fn extension_block() -> Vec<u8> {
    encode_extensions(&[
        KeyValuePair::int(0x3c, 2),
        KeyValuePair::bytes(0x4d, b"trace".to_vec()),
    ])
    .unwrap()
}

/// Object headers, each with the `extensions_present` flag of the stream it belongs on.
pub fn subgroup_objects() -> Vec<(SubgroupObjectHeader, bool)> {
    let object = |extensions: Vec<u8>, payload_len, status| SubgroupObjectHeader {
        object_id_delta: 3,
        extensions,
        payload_len,
        status,
    };
    vec![
        (object(Vec::new(), 1200, ObjectStatus::Normal), false),
        (object(Vec::new(), 0, ObjectStatus::Normal), false),
        (object(Vec::new(), 0, ObjectStatus::EndOfGroup), false),
        (object(Vec::new(), 0, ObjectStatus::EndOfTrack), true),
        (object(Vec::new(), 0, ObjectStatus::DoesNotExist), true),
        (object(Vec::new(), 5, ObjectStatus::Normal), true),
        (object(extension_block(), 5, ObjectStatus::Normal), true),
        (object(extension_block(), 0, ObjectStatus::EndOfGroup), true),
    ]
}

pub fn fetch_objects() -> Vec<FetchObjectHeader> {
    let object = |extensions, payload_len, status| FetchObjectHeader {
        group_id: 4,
        subgroup_id: 0,
        object_id: 9,
        publisher_priority: 3,
        extensions,
        payload_len,
        status,
    };
    vec![
        object(Vec::new(), 100, ObjectStatus::Normal),
        object(extension_block(), 100, ObjectStatus::Normal),
        object(Vec::new(), 0, ObjectStatus::DoesNotExist),
        object(extension_block(), 0, ObjectStatus::EndOfTrack),
    ]
}

/// One datagram header per datagram type, in type order 0x00..=0x07, 0x20, 0x21.
pub fn datagrams() -> Vec<DatagramHeader> {
    let mut headers = Vec::new();
    for object_id in [9, 0] {
        for end_of_group in [false, true] {
            for extensions in [Vec::new(), extension_block()] {
                headers.push(DatagramHeader {
                    track_alias: 5,
                    group_id: 40,
                    object_id,
                    publisher_priority: 128,
                    extensions,
                    end_of_group,
                    status: None,
                });
            }
        }
    }
    for extensions in [Vec::new(), extension_block()] {
        headers.push(DatagramHeader {
            track_alias: 5,
            group_id: 40,
            object_id: 0,
            publisher_priority: 128,
            extensions,
            end_of_group: false,
            status: Some(ObjectStatus::EndOfGroup),
        });
    }
    headers
}
