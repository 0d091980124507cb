//! Sample builders both drafts' sample sets are made of. Everything here is a value of the
//! draft-14 model types; what differs between the drafts is passed in.

use moq_wire::message::*;

pub fn namespace() -> TrackNamespace {
    TrackNamespace::from_path("anon/demo")
}

/// DELIVERY_TIMEOUT and AUTHORIZATION_TOKEN, in ascending order (both drafts number them 0x02
/// and 0x03).
pub fn params() -> Parameters {
    Parameters::new()
        .with_int(param::DELIVERY_TIMEOUT, 250)
        .with_bytes(param::AUTHORIZATION_TOKEN, b"token".to_vec())
}

/// The SUBSCRIBE (request 4) of `namespace()` "video" the samples answer.
pub fn subscribe(filter: FilterType) -> Subscribe {
    Subscribe {
        request_id: 4,
        namespace: namespace(),
        track_name: b"video".to_vec(),
        subscriber_priority: 7,
        group_order: GroupOrder::Descending,
        forward: true,
        filter,
        params: params(),
        fill: None,
    }
}

/// The SUBSCRIBE_OK of [`subscribe`].
pub fn subscribe_ok(
    largest: Option<Location>,
    group_order: GroupOrder,
    params: Parameters,
) -> SubscribeOk {
    SubscribeOk {
        request_id: 4,
        track_alias: 9,
        expires_ms: 30_000,
        group_order,
        largest,
        params,
    }
}

/// The setup exchange offering `versions` and selecting `version`, both GOAWAYs, the request
/// ID limits, and [`subscribe`] with each filter type.
pub fn session_and_subscribes(versions: Vec<u64>, version: u64) -> Vec<ControlMessage> {
    use ControlMessage as M;
    vec![
        M::ClientSetup(ClientSetup {
            versions,
            params: Parameters::new()
                .with_bytes(setup_param::PATH, b"/anon".to_vec())
                .with_int(setup_param::MAX_REQUEST_ID, 128)
                .with_bytes(setup_param::MOQT_IMPLEMENTATION, b"moq-wire".to_vec()),
        }),
        M::ServerSetup(ServerSetup {
            version,
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
    ]
}

/// PUBLISH_DONE of [`subscribe`] after the most streams there can be.
pub fn publish_done() -> PublishDone {
    PublishDone {
        request_id: 4,
        status: publish_done_code::SUBSCRIPTION_ENDED,
        stream_count: moq_wire::varint::MAX_VARINT,
        reason: String::new(),
    }
}

/// A PUBLISH of "catalog" (request `id`, with `params`) and one of the empty track name
/// (request `id + 2`, no largest location), then PUBLISH_OK of the first and PUBLISH_ERROR of
/// `error_id`.
pub fn publishes(id: u64, params: Parameters, error_id: u64) -> Vec<ControlMessage> {
    use ControlMessage as M;
    vec![
        M::Publish(Publish {
            request_id: id,
            namespace: namespace(),
            track_name: b"catalog".to_vec(),
            track_alias: 2,
            group_order: GroupOrder::Descending,
            largest: Some(Location::new(1, 0)),
            forward: true,
            params,
        }),
        M::Publish(Publish {
            request_id: id + 2,
            namespace: namespace(),
            track_name: Vec::new(),
            track_alias: 3,
            group_order: GroupOrder::Ascending,
            largest: None,
            forward: false,
            params: Parameters::new(),
        }),
        M::PublishOk(PublishOk {
            request_id: id,
            forward: true,
            subscriber_priority: 0,
            group_order: GroupOrder::Ascending,
            filter: FilterType::AbsoluteStart(Location::new(0, 0)),
            params: Parameters::new(),
        }),
        M::PublishError(PublishError {
            request_id: error_id,
            code: publish_error::UNINTERESTED,
            reason: "not now".into(),
        }),
    ]
}

/// A standalone FETCH (request 10) of "video" groups 1 to 4, and the FETCH_OK that ends it.
pub fn standalone_fetch(group_order: GroupOrder, params: Parameters) -> (Fetch, FetchOk) {
    let fetch = Fetch {
        request_id: 10,
        subscriber_priority: 2,
        group_order,
        fetch_type: FetchType::Standalone {
            namespace: namespace(),
            track_name: b"video".to_vec(),
            start: Location::new(1, 0),
            end: Location::new(4, 0),
        },
        params,
    };
    let ok = FetchOk {
        request_id: 10,
        group_order: GroupOrder::Ascending,
        end_of_track: true,
        end_location: Location::new(4, 0),
        params: Parameters::new(),
    };
    (fetch, ok)
}

/// PUBLISH_NAMESPACE_DONE and _CANCEL (with `code`) of `namespace()`.
pub fn namespace_ends(code: u64) -> Vec<ControlMessage> {
    vec![
        ControlMessage::PublishNamespaceDone(PublishNamespaceDone {
            namespace: namespace(),
        }),
        ControlMessage::PublishNamespaceCancel(PublishNamespaceCancel {
            namespace: namespace(),
            code,
            reason: "gone".into(),
        }),
    ]
}

/// SUBSCRIBE_NAMESPACE_ERROR of request 18.
pub fn subscribe_namespace_error() -> ControlMessage {
    ControlMessage::SubscribeNamespaceError(SubscribeNamespaceError {
        request_id: 18,
        code: subscribe_namespace_error::NAMESPACE_PREFIX_OVERLAP,
        reason: "overlap".into(),
    })
}

/// The pairs of the samples' extension block: one integer and one byte-string header.
pub fn extension_pairs() -> [KeyValuePair; 2] {
    [
        KeyValuePair::int(0x3c, 2),
        KeyValuePair::bytes(0x4d, b"trace".to_vec()),
    ]
}

/// Every subgroup layout (subgroup ID form × extensions × end of group) with each of
/// `priorities`, plus a fetch header.
pub fn stream_headers(priorities: &[u8]) -> Vec<DataStreamHeader> {
    let mut headers = Vec::new();
    for subgroup_id in [
        SubgroupId::Zero,
        SubgroupId::FirstObjectId,
        SubgroupId::Explicit(77),
    ] {
        for extensions_present in [false, true] {
            for contains_end_of_group in [false, true] {
                for &publisher_priority in priorities {
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

/// Object headers, each with the `extensions_present` flag of the stream it belongs on: with
/// and without payload and extensions, ending groups and tracks, a Does Not Exist one if
/// `does_not_exist`, and last an extended empty object of `last_status`.
pub fn subgroup_objects(
    extension_block: Vec<u8>,
    does_not_exist: bool,
    last_status: ObjectStatus,
) -> Vec<(SubgroupObjectHeader, bool)> {
    let object = |extensions: Vec<u8>, payload_len, status| SubgroupObjectHeader {
        object_id_delta: 3,
        extensions,
        payload_len,
        status,
    };
    let mut objects = vec![
        (object(Vec::new(), 1200, ObjectStatus::Normal), false),
        (object(Vec::new(), 0, ObjectStatus::Normal), false),
        (object(Vec::new(), 0, ObjectStatus::EndOfGroup), false),
        (object(Vec::new(), 0, ObjectStatus::EndOfTrack), true),
    ];
    if does_not_exist {
        objects.push((object(Vec::new(), 0, ObjectStatus::DoesNotExist), true));
    }
    objects.extend([
        (object(Vec::new(), 5, ObjectStatus::Normal), true),
        (
            object(extension_block.clone(), 5, ObjectStatus::Normal),
            true,
        ),
        (object(extension_block, 0, last_status), true),
    ]);
    objects
}

/// A datagram of track 5, group 40.
pub fn datagram(
    object_id: u64,
    publisher_priority: u8,
    extensions: Vec<u8>,
    end_of_group: bool,
    status: Option<ObjectStatus>,
) -> DatagramHeader {
    DatagramHeader {
        track_alias: 5,
        group_id: 40,
        object_id,
        publisher_priority,
        extensions,
        end_of_group,
        status,
    }
}

/// Payload datagrams of `object_id`: without and with end of group, each without and with
/// `extension_block`.
pub fn payload_datagrams(
    object_id: u64,
    publisher_priority: u8,
    extension_block: &[u8],
) -> Vec<DatagramHeader> {
    let mut headers = Vec::new();
    for end_of_group in [false, true] {
        for extensions in [Vec::new(), extension_block.to_vec()] {
            headers.push(datagram(
                object_id,
                publisher_priority,
                extensions,
                end_of_group,
                None,
            ));
        }
    }
    headers
}
