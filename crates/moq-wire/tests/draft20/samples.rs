//! Instances of every message and header draft-20 can carry, each round-tripping exactly
//! (parameters in ascending order, values draft-20 can express), used by the round-trip,
//! partial-input and fuzz tests.

use moq_wire::draft20::{FetchObject, param, property, setup_option};
use moq_wire::message::*;

use super::common::samples::{self as shared, subscribe};

pub use shared::namespace;

/// Request IDs the samples use.
pub mod ids {
    pub const SUBSCRIBE: u64 = 4;
    pub const UPDATE: u64 = 6;
    pub const FETCH: u64 = 10;
    pub const TRACK_STATUS: u64 = 16;
    pub const SUBSCRIBE_NAMESPACE: u64 = 18;
    pub const PUBLISH_NAMESPACE: u64 = 20;
    pub const PUBLISH: u64 = 3;
}

fn auth() -> Parameters {
    Parameters::new().with_bytes(param::AUTHORIZATION_TOKEN, b"token".to_vec())
}

/// Track properties as SUBSCRIBE_OK / FETCH_OK / TRACK_STATUS_OK `params`, ascending.
pub fn track_properties() -> Parameters {
    Parameters::new()
        .with_int(property::MAX_CACHE_DURATION, 1000)
        .with_int(0x08, 90_000)
        .with_int(property::DEFAULT_PUBLISHER_PRIORITY, 64)
        .with_int(property::DYNAMIC_GROUPS, 1)
        .with_bytes(0x41, b"unknown".to_vec())
}

/// A location filter of every form the model knows.
pub fn filters() -> Vec<FilterType> {
    vec![
        FilterType::NextGroupStart,
        FilterType::GroupsBack(0),
        FilterType::GroupsBack(300),
        FilterType::LargestObject,
        FilterType::AbsoluteStart(Location::new(3, 1)),
        FilterType::AbsoluteStart(Location::new(0, 5)),
        FilterType::AbsoluteRange {
            start: Location::new(3, 1),
            end_group: 900,
        },
        FilterType::AbsoluteRange {
            start: Location::new(0, 0),
            end_group: 0,
        },
        FilterType::AbsoluteObjectRange {
            start: Location::new(3, 1),
            end: Location::new(4, 0),
        },
    ]
}

/// A fetch of "video" of `fetch_type`.
fn fetch(request_id: u64, fetch_type: FetchType, params: Parameters) -> Fetch {
    Fetch {
        request_id,
        subscriber_priority: 2,
        group_order: GroupOrder::Ascending,
        fetch_type,
        params,
    }
}

fn standalone(start: Location, end: Location) -> FetchType {
    FetchType::Standalone {
        namespace: namespace(),
        track_name: b"video".to_vec(),
        start,
        end,
    }
}

pub fn control_messages() -> Vec<ControlMessage> {
    use ControlMessage as M;
    let status_ok = |request_id, largest, params| SubscribeOk {
        request_id,
        track_alias: 0,
        expires_ms: 0,
        group_order: GroupOrder::Ascending,
        largest,
        params,
    };
    let update = |request_id, fields: (Location, Option<u64>, u8, bool), params| {
        M::SubscribeUpdate(SubscribeUpdate {
            request_id,
            subscription_request_id: ids::SUBSCRIBE,
            start: fields.0,
            end_group: fields.1,
            subscriber_priority: fields.2,
            forward: fields.3,
            params,
        })
    };
    let neutral = (Location::new(0, 0), None, 128, true);
    let mut messages = vec![
        M::ClientSetup(ClientSetup {
            versions: vec![super::codec().version()],
            params: Parameters::new()
                .with_bytes(setup_option::PATH, b"/anon".to_vec())
                .with_int(setup_option::MAX_FILTER_RANGES, 0)
                .with_bytes(setup_option::MOQT_IMPLEMENTATION, b"moq-wire".to_vec())
                .with_bytes(0x9d, b"grease".to_vec()),
        }),
        M::ServerSetup(ServerSetup {
            version: super::codec().version(),
            params: Parameters::new().with_int(setup_option::MAX_REQUEST_UPDATES, 4),
        }),
        M::Goaway(Goaway {
            new_session_uri: "moqt://example.invalid/next".into(),
        }),
        M::Goaway(Goaway::default()),
    ];
    for filter in filters() {
        messages.push(M::Subscribe(subscribe(filter)));
    }
    messages.extend([
        // Every term at the value assumed when it is absent.
        M::Subscribe(Subscribe {
            request_id: ids::SUBSCRIBE + 2,
            namespace: namespace(),
            track_name: b"audio".to_vec(),
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: Parameters::new(),
            fill: None,
        }),
        // A live join: the next object, and the current group's head in a fill.
        M::Subscribe(Subscribe {
            forward: false,
            group_order: GroupOrder::Ascending,
            subscriber_priority: 255,
            params: Parameters::new()
                .with_int(param::RENDEZVOUS_TIMEOUT, 500)
                .with_int(param::SUBGROUP_DELIVERY_TIMEOUT, 40)
                .with_bytes(param::SUBGROUP_FILTER, vec![0, 0, 3])
                .with_int(param::NEW_GROUP_REQUEST, 0)
                .with_int(param::INCLUDE_PROPERTIES, 0),
            fill: Some(Fill {
                filter: Some(FilterType::GroupsBack(0)),
                ..Fill::default()
            }),
            ..subscribe(FilterType::LargestObject)
        }),
        M::Subscribe(Subscribe {
            fill: Some(Fill {
                filter: Some(FilterType::AbsoluteStart(Location::new(0, 0))),
                subscriber_priority: Some(3),
                group_order: Some(GroupOrder::Descending),
                timeout_ms: Some(2000),
            }),
            ..subscribe(FilterType::NextGroupStart)
        }),
        M::Subscribe(Subscribe {
            fill: Some(Fill::default()),
            ..subscribe(FilterType::AbsoluteStart(Location::new(8, 0)))
        }),
        M::SubscribeOk(shared::subscribe_ok(
            None,
            GroupOrder::Ascending,
            Parameters::new(),
        )),
        M::SubscribeOk(shared::subscribe_ok(
            Some(Location::new(70_000, 12)),
            GroupOrder::Descending,
            track_properties(),
        )),
        M::SubscribeError(SubscribeError {
            request_id: ids::SUBSCRIBE,
            code: subscribe_error::TRACK_DOES_NOT_EXIST,
            reason: "no such track".into(),
        }),
        M::Redirect(Redirect {
            request_id: ids::SUBSCRIBE,
            reason: "moved".into(),
            connect_uri: "moqt://other.example/anon".into(),
            target: Some((
                TrackNamespace::from_path("anon/elsewhere"),
                b"video".to_vec(),
            )),
        }),
        M::Redirect(Redirect {
            request_id: ids::SUBSCRIBE,
            reason: String::new(),
            connect_uri: String::new(),
            target: None,
        }),
        update(
            ids::UPDATE,
            (Location::new(0, 0), None, 128, false),
            Parameters::new().with_int(param::FORWARD, 0),
        ),
        update(
            ids::UPDATE + 2,
            (Location::new(5, 0), Some(10), 1, true),
            Parameters(vec![
                KeyValuePair::int(param::OBJECT_DELIVERY_TIMEOUT, 100),
                KeyValuePair::bytes(param::AUTHORIZATION_TOKEN, b"a".to_vec()),
                KeyValuePair::bytes(param::AUTHORIZATION_TOKEN, b"b".to_vec()),
                KeyValuePair::int(param::FORWARD, 1),
                KeyValuePair::int(param::SUBSCRIBER_PRIORITY, 1),
                KeyValuePair::bytes(
                    param::LOCATION_FILTER,
                    super::filters::RANGE_5_0_TO_GROUP_10.to_vec(),
                ),
                KeyValuePair::int(param::NEW_GROUP_REQUEST, 41),
            ]),
        ),
        update(ids::UPDATE + 4, neutral, Parameters::new()),
        M::PublishDone(shared::publish_done()),
        M::PublishDone(PublishDone {
            request_id: ids::SUBSCRIBE,
            status: publish_done_code::MALFORMED_TRACK,
            stream_count: 3,
            reason: "bad".into(),
        }),
        M::PublishDone(PublishDone {
            request_id: ids::SUBSCRIBE,
            status: publish_done_code::EXPIRED,
            stream_count: 0,
            reason: String::new(),
        }),
        M::Publish(Publish {
            request_id: ids::PUBLISH,
            namespace: namespace(),
            track_name: b"catalog".to_vec(),
            track_alias: 2,
            group_order: GroupOrder::Descending,
            largest: Some(Location::new(1, 0)),
            forward: true,
            params: auth().with_int(property::DEFAULT_PUBLISHER_PRIORITY, 10),
        }),
        M::Publish(Publish {
            request_id: ids::PUBLISH + 2,
            namespace: namespace(),
            track_name: Vec::new(),
            track_alias: 300,
            group_order: GroupOrder::Ascending,
            largest: None,
            forward: false,
            params: Parameters::new(),
        }),
        M::PublishOk(PublishOk {
            request_id: ids::PUBLISH,
            forward: true,
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: Parameters::new().with_int(param::EXPIRES, 60_000),
        }),
        M::PublishError(PublishError {
            request_id: ids::PUBLISH,
            code: publish_error::UNINTERESTED,
            reason: "not now".into(),
        }),
        M::Fetch(fetch(
            ids::FETCH,
            standalone(Location::new(1, 0), Location::new(4, 0)),
            auth().with_int(param::FILL_TIMEOUT, 100),
        )),
        M::Fetch(Fetch {
            group_order: GroupOrder::Descending,
            subscriber_priority: 128,
            ..fetch(
                ids::FETCH + 2,
                standalone(Location::new(1, 3), Location::new(1, 9)),
                Parameters::new().with_int(param::INCLUDE_PROPERTIES, 1),
            )
        }),
        M::Fetch(fetch(
            ids::FETCH + 4,
            standalone(Location::new(0, 0), Location::new(u64::MAX, 0)),
            Parameters::new(),
        )),
        M::Fetch(fetch(
            ids::FETCH + 6,
            standalone(Location::new(7, 2), Location::new(u64::MAX, 0)),
            Parameters::new(),
        )),
        M::Fetch(fetch(
            ids::FETCH + 8,
            FetchType::Filtered {
                namespace: namespace(),
                track_name: b"video".to_vec(),
                filter: FilterType::GroupsBack(2),
            },
            Parameters::new(),
        )),
        M::FetchOk(FetchOk {
            request_id: ids::FETCH,
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
            params: track_properties(),
        }),
        M::FetchError(FetchError {
            request_id: ids::FETCH,
            code: fetch_error::INVALID_RANGE,
            reason: "nothing there".into(),
        }),
        M::TrackStatus(Subscribe {
            request_id: ids::TRACK_STATUS,
            namespace: namespace(),
            track_name: b"video".to_vec(),
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: auth().with_int(param::INCLUDE_PROPERTIES, 1),
            fill: None,
        }),
        M::TrackStatusOk(status_ok(
            ids::TRACK_STATUS,
            Some(Location::new(2, 2)),
            track_properties(),
        )),
        M::TrackStatusOk(SubscribeOk {
            expires_ms: 1000,
            ..status_ok(ids::TRACK_STATUS, None, Parameters::new())
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
        M::SubscribeNamespace(SubscribeNamespace {
            request_id: ids::SUBSCRIBE_NAMESPACE,
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
            params: auth(),
        }),
        M::SubscribeNamespace(SubscribeNamespace {
            request_id: ids::SUBSCRIBE_NAMESPACE + 2,
            namespace_prefix: NamespacePrefix(TrackNamespace(Vec::new())),
            params: Parameters::new(),
        }),
        M::SubscribeTracks(SubscribeNamespace {
            request_id: ids::SUBSCRIBE_NAMESPACE + 4,
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
            params: Parameters::new()
                .with_int(param::FORWARD, 0)
                .with_bytes(param::TRACK_PROPERTY_FILTER, vec![0, 8, 1])
                .with_int(param::INCLUDE_PROPERTIES, 1),
        }),
        M::SubscribeNamespaceOk(SubscribeNamespaceOk {
            request_id: ids::SUBSCRIBE_NAMESPACE,
        }),
        M::SubscribeNamespaceError(SubscribeNamespaceError {
            request_id: ids::SUBSCRIBE_NAMESPACE,
            code: subscribe_namespace_error::NAMESPACE_PREFIX_OVERLAP,
            reason: "overlap".into(),
        }),
    ]);
    messages
}

/// The default publisher priority the data samples use for their track.
pub const DEFAULT_PRIORITY: u8 = 200;

/// All twelve subgroup layouts, each with and without its priority byte, plus a fetch
/// header.
pub fn stream_headers() -> Vec<DataStreamHeader> {
    let mut headers = shared::stream_headers(&[3, DEFAULT_PRIORITY]);
    // Integers beyond draft-14's 62 bits.
    headers.push(DataStreamHeader::Subgroup(SubgroupHeader {
        track_alias: u64::MAX,
        group_id: 1 << 63,
        subgroup_id: SubgroupId::Explicit(u64::MAX),
        publisher_priority: 3,
        extensions_present: false,
        contains_end_of_group: false,
    }));
    headers
}

/// A draft-20 property block holding one integer and one byte-string property.
pub fn extension_block() -> Vec<u8> {
    moq_wire::draft20::encode_extensions(&shared::extension_pairs()).unwrap()
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
    vec![
        object(4, 0, 9, 3, Vec::new(), 100),
        object(4, 0, 10, 3, Vec::new(), 100),
        object(4, 5, 11, 3, extension_block(), 100),
        object(4, 6, 13, 3, Vec::new(), 0),
        FetchObject::NonExistentRange {
            end: Location::new(5, 9),
        },
        object(5, 0, 10, 7, Vec::new(), 100),
        FetchObject::UnknownRange {
            end: Location::new(7, 3),
        },
        object(7, 1, 4, 9, Vec::new(), 100),
        FetchObject::TimedOutRange {
            end: Location::new(9, 0),
        },
        object(1 << 63, 0, u64::MAX, 9, Vec::new(), 100),
    ]
}

/// Datagram headers of every type, with and without their priority byte.
pub fn datagrams() -> Vec<DatagramHeader> {
    let mut headers = Vec::new();
    for publisher_priority in [128, DEFAULT_PRIORITY] {
        for object_id in [9, 0] {
            headers.extend(shared::payload_datagrams(
                object_id,
                publisher_priority,
                &extension_block(),
            ));
            headers.push(shared::datagram(
                object_id,
                publisher_priority,
                Vec::new(),
                false,
                Some(ObjectStatus::EndOfGroup),
            ));
            headers.push(shared::datagram(
                object_id,
                publisher_priority,
                extension_block(),
                false,
                Some(ObjectStatus::Normal),
            ));
        }
    }
    headers
}
