//! Instances of every message and header that draft-16 can carry, each one round-tripping
//! exactly (parameters in ascending order, values the draft-16 form can express), used by the
//! round-trip, partial-input and fuzz tests.

use moq_wire::draft14::*;
use moq_wire::draft16::{self, FetchObject, extension, param};

use super::ids;

pub fn namespace() -> TrackNamespace {
    TrackNamespace::from_path("anon/demo")
}

/// SUBSCRIBE parameters that stay in `params`, in ascending order.
fn subscribe_params() -> Parameters {
    Parameters::new()
        .with_int(param::DELIVERY_TIMEOUT, 250)
        .with_bytes(param::AUTHORIZATION_TOKEN, b"token".to_vec())
}

fn auth() -> Parameters {
    Parameters::new().with_bytes(param::AUTHORIZATION_TOKEN, b"token".to_vec())
}

/// Track extensions as SUBSCRIBE_OK / FETCH_OK `params`, in ascending order.
fn track_extensions() -> Parameters {
    Parameters::new()
        .with_int(extension::MAX_CACHE_DURATION, 1000)
        .with_int(extension::DEFAULT_PUBLISHER_PRIORITY, 64)
        .with_int(extension::DYNAMIC_GROUPS, 1)
        .with_bytes(0x41, b"unknown".to_vec())
}

pub fn control_messages() -> Vec<ControlMessage> {
    use ControlMessage as M;
    let subscribe = |filter| Subscribe {
        request_id: ids::SUBSCRIBE,
        namespace: namespace(),
        track_name: b"video".to_vec(),
        subscriber_priority: 7,
        group_order: GroupOrder::Descending,
        forward: true,
        filter,
        params: subscribe_params(),
    };
    let subscribe_ok = |largest, group_order, params| SubscribeOk {
        request_id: ids::SUBSCRIBE,
        track_alias: 9,
        expires_ms: 30_000,
        group_order,
        largest,
        params,
    };
    let status_ok = |request_id, largest| SubscribeOk {
        request_id,
        track_alias: 0,
        expires_ms: 0,
        group_order: GroupOrder::Ascending,
        largest,
        params: Parameters::new(),
    };
    let joining = JoiningFetch {
        joining_request_id: ids::SUBSCRIBE,
        joining_start: 2,
    };
    let update = |request_id, params| {
        M::SubscribeUpdate(
            draft16::request_update(request_id, ids::SUBSCRIBE, params).expect("valid update"),
        )
    };
    vec![
        M::ClientSetup(ClientSetup {
            versions: vec![draft16::VERSION],
            params: Parameters::new()
                .with_bytes(setup_param::PATH, b"/anon".to_vec())
                .with_int(setup_param::MAX_REQUEST_ID, 128)
                .with_bytes(setup_param::MOQT_IMPLEMENTATION, b"moq-wire".to_vec()),
        }),
        M::ServerSetup(ServerSetup {
            version: draft16::VERSION,
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
        // Every term at the value draft-16 assumes when it is absent.
        M::Subscribe(Subscribe {
            request_id: ids::SUBSCRIBE + 2,
            namespace: namespace(),
            track_name: b"audio".to_vec(),
            subscriber_priority: draft16::DEFAULT_SUBSCRIBER_PRIORITY,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: Parameters::new().with_int(param::NEW_GROUP_REQUEST, 0),
        }),
        M::Subscribe(Subscribe {
            forward: false,
            group_order: GroupOrder::Ascending,
            subscriber_priority: 255,
            ..subscribe(FilterType::LargestObject)
        }),
        M::SubscribeOk(subscribe_ok(None, GroupOrder::Ascending, Parameters::new())),
        M::SubscribeOk(subscribe_ok(
            Some(Location::new(70_000, 12)),
            GroupOrder::Descending,
            track_extensions(),
        )),
        M::SubscribeError(SubscribeError {
            request_id: ids::SUBSCRIBE,
            code: subscribe_error::TRACK_DOES_NOT_EXIST,
            reason: "no such track".into(),
        }),
        update(ids::UPDATE, Parameters::new().with_int(param::FORWARD, 0)),
        update(
            ids::UPDATE + 2,
            Parameters(vec![
                KeyValuePair::int(param::DELIVERY_TIMEOUT, 100),
                KeyValuePair::bytes(param::AUTHORIZATION_TOKEN, b"a".to_vec()),
                KeyValuePair::bytes(param::AUTHORIZATION_TOKEN, b"b".to_vec()),
                KeyValuePair::int(param::FORWARD, 1),
                KeyValuePair::int(param::SUBSCRIBER_PRIORITY, 1),
                // AbsoluteRange (4) from {5, 0} to group 10.
                KeyValuePair::bytes(param::SUBSCRIPTION_FILTER, vec![0x04, 0x05, 0x00, 0x0a]),
                KeyValuePair::int(param::NEW_GROUP_REQUEST, 41),
            ]),
        ),
        update(ids::UPDATE + 4, Parameters::new()),
        M::Unsubscribe(Unsubscribe {
            request_id: ids::SUBSCRIBE,
        }),
        M::PublishDone(PublishDone {
            request_id: ids::SUBSCRIBE,
            status: publish_done_code::SUBSCRIPTION_ENDED,
            stream_count: moq_wire::varint::MAX_VARINT,
            reason: String::new(),
        }),
        M::PublishDone(PublishDone {
            request_id: ids::SUBSCRIBE,
            status: publish_done_code::MALFORMED_TRACK,
            stream_count: 3,
            reason: "bad".into(),
        }),
        M::Publish(Publish {
            request_id: ids::PUBLISH,
            namespace: namespace(),
            track_name: b"catalog".to_vec(),
            track_alias: 2,
            group_order: GroupOrder::Descending,
            largest: Some(Location::new(1, 0)),
            forward: true,
            params: Parameters(vec![
                KeyValuePair::bytes(param::AUTHORIZATION_TOKEN, b"token".to_vec()),
                KeyValuePair::int(param::EXPIRES, 5000),
                KeyValuePair::int(extension::DELIVERY_TIMEOUT, 300),
                KeyValuePair::int(extension::MAX_CACHE_DURATION, 1000),
            ]),
        }),
        M::Publish(Publish {
            request_id: ids::PUBLISH + 2,
            namespace: namespace(),
            track_name: Vec::new(),
            track_alias: 3,
            group_order: GroupOrder::Ascending,
            largest: None,
            forward: false,
            params: Parameters::new(),
        }),
        M::PublishOk(PublishOk {
            request_id: ids::PUBLISH,
            forward: true,
            subscriber_priority: 0,
            group_order: GroupOrder::Ascending,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: Parameters::new(),
        }),
        M::PublishOk(PublishOk {
            request_id: ids::PUBLISH + 2,
            forward: false,
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            filter: FilterType::LargestObject,
            params: Parameters::new()
                .with_int(param::DELIVERY_TIMEOUT, 40)
                .with_int(param::EXPIRES, 60_000)
                .with_int(param::NEW_GROUP_REQUEST, 3),
        }),
        M::PublishError(PublishError {
            request_id: ids::PUBLISH,
            code: publish_error::UNINTERESTED,
            reason: "not now".into(),
        }),
        M::Fetch(Fetch {
            request_id: ids::FETCH - 2,
            subscriber_priority: 2,
            group_order: GroupOrder::Ascending,
            fetch_type: FetchType::Standalone {
                namespace: namespace(),
                track_name: b"video".to_vec(),
                start: Location::new(1, 0),
                end: Location::new(4, 0),
            },
            params: auth(),
        }),
        M::Fetch(Fetch {
            request_id: ids::FETCH,
            subscriber_priority: 128,
            group_order: GroupOrder::Descending,
            fetch_type: FetchType::RelativeJoining(joining.clone()),
            params: Parameters::new(),
        }),
        M::Fetch(Fetch {
            request_id: ids::FETCH + 2,
            subscriber_priority: 2,
            group_order: GroupOrder::Ascending,
            fetch_type: FetchType::AbsoluteJoining(joining),
            params: Parameters::new(),
        }),
        M::FetchOk(FetchOk {
            request_id: ids::FETCH - 2,
            group_order: GroupOrder::Ascending,
            end_of_track: true,
            end_location: Location::new(4, 0),
            params: Parameters::new(),
        }),
        M::FetchOk(FetchOk {
            request_id: ids::FETCH,
            group_order: GroupOrder::Descending,
            end_of_track: false,
            end_location: Location::new(9, 3),
            params: track_extensions(),
        }),
        M::FetchError(FetchError {
            request_id: ids::FETCH,
            code: fetch_error::INVALID_JOINING_REQUEST_ID,
            reason: "no such subscription".into(),
        }),
        M::FetchCancel(FetchCancel {
            request_id: ids::FETCH,
        }),
        M::TrackStatus(Subscribe {
            request_id: ids::TRACK_STATUS,
            namespace: namespace(),
            track_name: b"video".to_vec(),
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: auth(),
        }),
        M::TrackStatusOk(status_ok(ids::TRACK_STATUS, Some(Location::new(2, 2)))),
        M::TrackStatusOk(SubscribeOk {
            expires_ms: 1000,
            ..status_ok(ids::UPDATE, None)
        }),
        M::TrackStatusError(SubscribeError {
            request_id: ids::TRACK_STATUS,
            code: subscribe_error::UNAUTHORIZED,
            reason: "denied".into(),
        }),
        M::PublishNamespace(PublishNamespace {
            request_id: ids::PUBLISH_NAMESPACE,
            namespace: namespace(),
            params: auth(),
        }),
        M::PublishNamespaceOk(PublishNamespaceOk {
            request_id: ids::PUBLISH_NAMESPACE,
        }),
        M::PublishNamespaceError(PublishNamespaceError {
            request_id: ids::PUBLISH_NAMESPACE,
            code: publish_namespace_error::UNINTERESTED,
            reason: "denied".into(),
        }),
        M::PublishNamespaceDone(PublishNamespaceDone {
            namespace: namespace(),
        }),
        M::PublishNamespaceCancel(PublishNamespaceCancel {
            namespace: namespace(),
            code: publish_namespace_error::EXPIRED_AUTH_TOKEN,
            reason: "gone".into(),
        }),
        M::SubscribeNamespace(SubscribeNamespace {
            request_id: ids::SUBSCRIBE_NAMESPACE,
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
            params: Parameters::new()
                .with_bytes(param::AUTHORIZATION_TOKEN, b"t".to_vec())
                .with_int(param::FORWARD, 0),
        }),
        M::SubscribeNamespace(SubscribeNamespace {
            request_id: ids::SUBSCRIBE_NAMESPACE + 2,
            namespace_prefix: NamespacePrefix(TrackNamespace(Vec::new())),
            params: Parameters::new(),
        }),
        M::SubscribeNamespaceOk(SubscribeNamespaceOk {
            request_id: ids::SUBSCRIBE_NAMESPACE,
        }),
        M::SubscribeNamespaceError(SubscribeNamespaceError {
            request_id: ids::SUBSCRIBE_NAMESPACE,
            code: subscribe_namespace_error::NAMESPACE_PREFIX_OVERLAP,
            reason: "overlap".into(),
        }),
    ]
}

/// The default publisher priority the data samples use for their track.
pub const DEFAULT_PRIORITY: u8 = 200;

/// All twelve subgroup layouts, each with and without its priority byte (the second by
/// carrying [`DEFAULT_PRIORITY`]), plus a fetch header.
pub fn stream_headers() -> Vec<DataStreamHeader> {
    let mut headers = Vec::new();
    for subgroup_id in [
        SubgroupId::Zero,
        SubgroupId::FirstObjectId,
        SubgroupId::Explicit(77),
    ] {
        for extensions_present in [false, true] {
            for contains_end_of_group in [false, true] {
                for publisher_priority in [3, DEFAULT_PRIORITY] {
                    headers.push(DataStreamHeader::Subgroup(SubgroupHeader {
                        track_alias: 5,
                        group_id: 1_000_000,
                        subgroup_id,
                        publisher_priority,
                        extensions_present,
                        contains_end_of_group,
                    }));
                }
            }
        }
    }
    headers.push(DataStreamHeader::Fetch(FetchHeader { request_id: 10 }));
    headers
}

/// A draft-16 extension block holding one integer and one byte-string header.
pub fn extension_block() -> Vec<u8> {
    draft16::encode_extensions(&[
        KeyValuePair::int(extension::PRIOR_GROUP_ID_GAP, 2),
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
        (object(Vec::new(), 5, ObjectStatus::Normal), true),
        (object(extension_block(), 5, ObjectStatus::Normal), true),
        (object(extension_block(), 0, ObjectStatus::Normal), true),
    ]
}

/// A fetch stream's entries that use every serialization flag between them.
pub fn fetch_objects() -> Vec<FetchObject> {
    let object = |group_id, subgroup_id, object_id, publisher_priority, extensions, len| {
        FetchObject::Object {
            header: FetchObjectHeader {
                group_id,
                subgroup_id,
                object_id,
                publisher_priority,
                extensions,
                payload_len: len,
                status: ObjectStatus::Normal,
            },
            datagram: false,
        }
    };
    let datagram = |group_id, object_id, publisher_priority| FetchObject::Object {
        header: FetchObjectHeader {
            group_id,
            subgroup_id: object_id,
            object_id,
            publisher_priority,
            extensions: Vec::new(),
            payload_len: 30,
            status: ObjectStatus::Normal,
        },
        datagram: true,
    };
    vec![
        object(4, 0, 9, 3, Vec::new(), 100),
        object(4, 0, 10, 3, Vec::new(), 100),
        object(4, 5, 11, 3, extension_block(), 100),
        object(4, 5, 12, 3, Vec::new(), 100),
        object(4, 6, 13, 3, Vec::new(), 100),
        object(4, 6, 20, 3, Vec::new(), 0),
        object(5, 0, 0, 7, Vec::new(), 100),
        datagram(5, 1, 7),
        FetchObject::NonExistentRange {
            end: Location::new(5, 9),
        },
        object(5, 0, 10, 7, Vec::new(), 100),
        FetchObject::UnknownRange {
            end: Location::new(7, 3),
        },
        object(7, 1, 4, 9, Vec::new(), 100),
        datagram(7, 5, 9),
    ]
}

/// One datagram header per draft-16 datagram type, each with whether its priority is left
/// out (by carrying [`DEFAULT_PRIORITY`]).
pub fn datagrams() -> Vec<DatagramHeader> {
    let mut headers = Vec::new();
    for publisher_priority in [128, DEFAULT_PRIORITY] {
        for object_id in [9, 0] {
            for end_of_group in [false, true] {
                for extensions in [Vec::new(), extension_block()] {
                    headers.push(DatagramHeader {
                        track_alias: 5,
                        group_id: 40,
                        object_id,
                        publisher_priority,
                        extensions,
                        end_of_group,
                        status: None,
                    });
                }
            }
            for extensions in [Vec::new(), extension_block()] {
                let status = if extensions.is_empty() {
                    ObjectStatus::EndOfGroup
                } else {
                    ObjectStatus::Normal
                };
                headers.push(DatagramHeader {
                    track_alias: 5,
                    group_id: 40,
                    object_id,
                    publisher_priority,
                    extensions,
                    end_of_group: false,
                    status: Some(status),
                });
            }
        }
    }
    headers
}
