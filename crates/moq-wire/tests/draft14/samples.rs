//! One or more instances of every message and header, used by the round-trip, partial-input and
//! fuzz tests.

use moq_wire::draft14::VERSION;
use moq_wire::message::*;

use crate::common::samples::{self as shared, namespace, params, subscribe};

pub fn control_messages() -> Vec<ControlMessage> {
    use ControlMessage as M;
    let subscribe_ok = |largest| {
        shared::subscribe_ok(
            largest,
            GroupOrder::Ascending,
            Parameters::new().with_int(param::MAX_CACHE_DURATION, 1000),
        )
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
    let (standalone, fetch_ok) = shared::standalone_fetch(GroupOrder::Publisher, params());
    let mut messages = shared::session_and_subscribes(vec![VERSION, 0xff00000d], VERSION);
    messages.extend([
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
        M::PublishDone(shared::publish_done()),
    ]);
    messages.extend(shared::publishes(1, params(), 3));
    messages.extend([
        M::Fetch(standalone),
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
        M::FetchOk(fetch_ok),
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
    ]);
    messages.extend(shared::namespace_ends(publish_namespace_error::TIMEOUT));
    messages.extend([
        M::SubscribeNamespace(SubscribeNamespace {
            request_id: 18,
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
            params: Parameters::new(),
        }),
        M::SubscribeNamespaceOk(SubscribeNamespaceOk { request_id: 18 }),
        shared::subscribe_namespace_error(),
        M::UnsubscribeNamespace(UnsubscribeNamespace {
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
        }),
    ]);
    messages
}

/// All twelve subgroup header types plus a fetch header.
pub fn stream_headers() -> Vec<DataStreamHeader> {
    shared::stream_headers(&[200])
}

/// An extension block holding one integer and one byte-string header.
pub fn extension_block() -> Vec<u8> {
    encode_extensions(&shared::extension_pairs()).unwrap()
}

/// Object headers, each with the `extensions_present` flag of the stream it belongs on.
pub fn subgroup_objects() -> Vec<(SubgroupObjectHeader, bool)> {
    shared::subgroup_objects(extension_block(), true, ObjectStatus::EndOfGroup)
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
        headers.extend(shared::payload_datagrams(
            object_id,
            128,
            &extension_block(),
        ));
    }
    for extensions in [Vec::new(), extension_block()] {
        let status = Some(ObjectStatus::EndOfGroup);
        headers.push(shared::datagram(0, 128, extensions, false, status));
    }
    headers
}
