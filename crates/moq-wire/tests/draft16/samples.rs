//! Instances of every message and header that draft-16 can carry, each one round-tripping
//! exactly (parameters in ascending order, values the draft-16 form can express), used by the
//! round-trip, partial-input and fuzz tests.

use moq_wire::draft16::{self, FetchObject, extension, param};
use moq_wire::message::*;

use super::common::samples::{self as shared, subscribe};
use super::ids;

pub use shared::namespace;

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
    let subscribe_ok = shared::subscribe_ok;
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
    let publish_params = Parameters(vec![
        KeyValuePair::bytes(param::AUTHORIZATION_TOKEN, b"token".to_vec()),
        KeyValuePair::int(param::EXPIRES, 5000),
        KeyValuePair::int(extension::DELIVERY_TIMEOUT, 300),
        KeyValuePair::int(extension::MAX_CACHE_DURATION, 1000),
    ]);
    let extra_ok = M::PublishOk(PublishOk {
        request_id: ids::PUBLISH + 2,
        forward: false,
        subscriber_priority: 128,
        group_order: GroupOrder::Publisher,
        filter: FilterType::LargestObject,
        params: Parameters::new()
            .with_int(param::DELIVERY_TIMEOUT, 40)
            .with_int(param::EXPIRES, 60_000)
            .with_int(param::NEW_GROUP_REQUEST, 3),
    });
    let (standalone, fetch_ok) = shared::standalone_fetch(GroupOrder::Ascending, auth());
    let mut messages = shared::session_and_subscribes(vec![draft16::VERSION], draft16::VERSION);
    messages.extend([
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
            fill: None,
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
        M::PublishDone(shared::publish_done()),
        M::PublishDone(PublishDone {
            request_id: ids::SUBSCRIBE,
            status: publish_done_code::MALFORMED_TRACK,
            stream_count: 3,
            reason: "bad".into(),
        }),
    ]);
    let mut publishes = shared::publishes(ids::PUBLISH, publish_params, ids::PUBLISH);
    publishes.insert(3, extra_ok);
    messages.extend(publishes);
    messages.extend([
        M::Fetch(standalone),
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
        M::FetchOk(fetch_ok),
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
            fill: None,
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
    ]);
    messages.extend(shared::namespace_ends(
        publish_namespace_error::EXPIRED_AUTH_TOKEN,
    ));
    messages.extend([
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
        shared::subscribe_namespace_error(),
    ]);
    messages
}

/// The default publisher priority the data samples use for their track.
pub const DEFAULT_PRIORITY: u8 = 200;

/// All twelve subgroup layouts, each with and without its priority byte (the second by
/// carrying [`DEFAULT_PRIORITY`]), plus a fetch header.
pub fn stream_headers() -> Vec<DataStreamHeader> {
    shared::stream_headers(&[3, DEFAULT_PRIORITY])
}

/// A draft-16 extension block holding one integer and one byte-string header.
pub fn extension_block() -> Vec<u8> {
    // PRIOR_GROUP_ID_GAP (0x3c) = 2, then 0x4d = "trace".
    draft16::encode_extensions(&shared::extension_pairs()).unwrap()
}

/// Object headers, each with the `extensions_present` flag of the stream it belongs on.
pub fn subgroup_objects() -> Vec<(SubgroupObjectHeader, bool)> {
    shared::subgroup_objects(extension_block(), false, ObjectStatus::Normal)
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
            headers.extend(shared::payload_datagrams(
                object_id,
                publisher_priority,
                &extension_block(),
            ));
            for extensions in [Vec::new(), extension_block()] {
                let status = if extensions.is_empty() {
                    ObjectStatus::EndOfGroup
                } else {
                    ObjectStatus::Normal
                };
                let header = shared::datagram(
                    object_id,
                    publisher_priority,
                    extensions,
                    false,
                    Some(status),
                );
                headers.push(header);
            }
        }
    }
    headers
}
