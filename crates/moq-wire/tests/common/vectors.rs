//! Values both drafts have byte vectors for. The bytes, which differ, stay with each draft.

use moq_wire::message::*;

/// SUBSCRIBE request 0 of ("live", "cam") "video" from the next group, priority 128.
pub fn subscribe_live_cam(params: Parameters) -> ControlMessage {
    ControlMessage::Subscribe(Subscribe {
        request_id: 0,
        namespace: TrackNamespace::from_path("live/cam"),
        track_name: b"video".to_vec(),
        subscriber_priority: 0x80,
        group_order: GroupOrder::Ascending,
        forward: true,
        filter: FilterType::NextGroupStart,
        params,
        fill: None,
    })
}

/// SUBSCRIBE_OK of request 0, track alias 0, no content, no parameters.
pub fn subscribe_ok_without_content(expires_ms: u64, group_order: GroupOrder) -> SubscribeOk {
    SubscribeOk {
        request_id: 0,
        track_alias: 0,
        expires_ms,
        group_order,
        largest: None,
        params: Parameters::new(),
    }
}

/// SUBSCRIBE_OK of request 2, track alias 1, descending, largest {300, 5}.
pub fn subscribe_ok_with_content(params: Parameters) -> ControlMessage {
    ControlMessage::SubscribeOk(SubscribeOk {
        request_id: 2,
        track_alias: 1,
        expires_ms: 0,
        group_order: GroupOrder::Descending,
        largest: Some(Location::new(300, 5)),
        params,
    })
}

/// PUBLISH_NAMESPACE request 0 of ("anon", "demo"), no parameters.
pub fn publish_namespace() -> ControlMessage {
    ControlMessage::PublishNamespace(PublishNamespace {
        request_id: 0,
        namespace: TrackNamespace::from_path("anon/demo"),
        params: Parameters::new(),
    })
}

/// A payload datagram of track 1, group 7, object 0, priority 128.
pub fn datagram() -> DatagramHeader {
    DatagramHeader {
        track_alias: 1,
        group_id: 7,
        object_id: 0,
        publisher_priority: 0x80,
        extensions: Vec::new(),
        end_of_group: false,
        status: None,
    }
}

/// PUBLISH_NAMESPACE of ("a") with two 40,000-byte values under `key`: too long for a
/// control message.
pub fn oversize_publish_namespace(key: u64) -> ControlMessage {
    let big = Parameters(vec![
        KeyValuePair::bytes(key, vec![0; 40_000]),
        KeyValuePair::bytes(key, vec![0; 40_000]),
    ]);
    ControlMessage::PublishNamespace(PublishNamespace {
        request_id: 0,
        namespace: TrackNamespace::from_path("a"),
        params: big,
    })
}
