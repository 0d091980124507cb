//! Encode → decode returns the same value and consumes exactly the encoding; every proper
//! prefix of an encoding is reported as incomplete.

use moq_wire::codec::{Channel, RequestKind, StreamRequest};
use moq_wire::draft20::{self, FetchObjectReader, FetchObjectWriter};
use moq_wire::message::*;

use super::common::{assert_decodes_exactly, assert_prefixes_incomplete, datagram_payload};
use super::samples::{self, DEFAULT_PRIORITY, ids};
use super::{codec, decode, decode_as_sent, encode};

fn default_priority(_track_alias: u64) -> u8 {
    DEFAULT_PRIORITY
}

#[test]
fn control_messages_round_trip() {
    for message in samples::control_messages() {
        let mut bytes = encode(&message);
        let len = bytes.len();
        // Bytes of a following message must be left alone.
        bytes.extend_from_slice(&[0x03, 0xff]);
        let (decoded, used) =
            decode_as_sent(&message, &bytes).unwrap_or_else(|e| panic!("{message:?}: {e}"));
        assert_eq!(decoded, message, "{}", codec().message_name(&message));
        assert_eq!(used, len, "{}", codec().message_name(&message));
    }
}

#[test]
fn control_message_type_and_length_frame_the_payload() {
    for message in samples::control_messages() {
        let bytes = encode(&message);
        let mut rest = bytes.as_slice();
        let message_type = moq_wire::varint::vi64::decode(&mut rest).unwrap();
        assert_eq!(Some(message_type), draft20::message_type(&message));
        let len = u16::from_be_bytes([rest[0], rest[1]]);
        assert_eq!(usize::from(len), rest.len() - 2, "{}", message.name());
    }
}

#[test]
fn control_message_prefixes_are_incomplete() {
    for message in samples::control_messages() {
        assert_prefixes_incomplete(&encode(&message), |b| decode_as_sent(&message, b));
    }
}

#[test]
fn what_draft_20_says_with_streams_has_no_message() {
    for message in [
        ControlMessage::Unsubscribe(Unsubscribe { request_id: 4 }),
        ControlMessage::FetchCancel(FetchCancel { request_id: 10 }),
        ControlMessage::MaxRequestId(MaxRequestId { request_id: 100 }),
        ControlMessage::RequestsBlocked(RequestsBlocked {
            max_request_id: 100,
        }),
        ControlMessage::PublishNamespaceDone(PublishNamespaceDone {
            namespace: samples::namespace(),
        }),
    ] {
        assert_eq!(draft20::message_type(&message), None, "{message:?}");
        assert!(super::try_encode(&message).is_err());
    }
    // Nor a joining FETCH: draft-20 fills a subscription instead.
    let joining = ControlMessage::Fetch(Fetch {
        request_id: 12,
        subscriber_priority: 128,
        group_order: GroupOrder::Ascending,
        fetch_type: FetchType::RelativeJoining(JoiningFetch {
            joining_request_id: 4,
            joining_start: 0,
        }),
        params: Parameters::new(),
    });
    assert!(super::try_encode(&joining).is_err());
}

#[test]
fn a_setup_decodes_as_the_setup_of_the_side_that_sent_it() {
    let bytes = encode(&ControlMessage::ClientSetup(ClientSetup {
        versions: vec![0xff00000e],
        params: Parameters::new(),
    }));
    let (from_server, _) = decode(&bytes, Channel::Control { from_server: true }).unwrap();
    assert_eq!(
        from_server,
        ControlMessage::ServerSetup(ServerSetup {
            version: codec().version(),
            params: Parameters::new(),
        })
    );
}

#[test]
fn parameters_are_sorted_on_the_wire() {
    // Out of order in the model, ascending once decoded.
    let message = ControlMessage::Subscribe(Subscribe {
        request_id: 0,
        namespace: TrackNamespace::from_path("a"),
        track_name: b"t".to_vec(),
        subscriber_priority: 1,
        group_order: GroupOrder::Ascending,
        forward: false,
        filter: FilterType::LargestObject,
        params: Parameters::new()
            .with_int(draft20::param::NEW_GROUP_REQUEST, 0)
            .with_int(draft20::param::OBJECT_DELIVERY_TIMEOUT, 10),
        fill: None,
    });
    let (ControlMessage::Subscribe(decoded), _) =
        decode(&encode(&message), Channel::NewRequest).unwrap()
    else {
        panic!()
    };
    let keys: Vec<u64> = decoded.params.0.iter().map(|p| p.key).collect();
    assert_eq!(
        keys,
        [
            draft20::param::OBJECT_DELIVERY_TIMEOUT,
            draft20::param::NEW_GROUP_REQUEST
        ]
    );
}

#[test]
fn publish_done_codes_translate_both_ways() {
    for code in 0..0x20 {
        let there = draft20::publish_done_from_model(code);
        assert_eq!(draft20::publish_done_to_model(there), code);
    }
    assert_eq!(
        draft20::publish_done_from_model(publish_done_code::EXPIRED),
        draft20::publish_done_code::EXPIRED
    );
    assert_eq!(
        draft20::publish_done_from_model(publish_done_code::MALFORMED_TRACK),
        draft20::publish_done_code::MALFORMED_TRACK
    );
}

#[test]
fn the_end_of_a_request_stream_is_what_earlier_drafts_said_with_messages() {
    use moq_wire::codec::{NoRequests, StreamEnd};
    let ended = |request_id, kind, ours, how| {
        codec().stream_ended(
            StreamRequest {
                request_id,
                kind,
                ours,
            },
            how,
            &NoRequests,
        )
    };
    assert_eq!(
        ended(4, RequestKind::Subscribe, false, StreamEnd::Reset),
        Some(ControlMessage::Unsubscribe(Unsubscribe { request_id: 4 }))
    );
    // A FIN only says no update follows.
    assert_eq!(
        ended(4, RequestKind::Subscribe, false, StreamEnd::Finished),
        None
    );
    assert_eq!(
        ended(10, RequestKind::Fetch, false, StreamEnd::Reset),
        Some(ControlMessage::FetchCancel(FetchCancel { request_id: 10 }))
    );
    let Some(ControlMessage::PublishDone(done)) = ended(
        ids::SUBSCRIBE,
        RequestKind::Subscribe,
        true,
        StreamEnd::Reset,
    ) else {
        panic!("our subscription's stream ending ends it")
    };
    assert_eq!(done.request_id, ids::SUBSCRIBE);
}

#[test]
fn stream_headers_round_trip() {
    for header in samples::stream_headers() {
        let mut bytes = Vec::new();
        draft20::encode_data_stream_header(&header, Some(DEFAULT_PRIORITY), &mut bytes).unwrap();
        assert_decodes_exactly(&header, &bytes, &[0x00], |b| {
            draft20::decode_data_stream_header(b, &default_priority)
        });
    }
}

#[test]
fn subgroup_objects_round_trip() {
    for (header, extensions_present) in samples::subgroup_objects() {
        let mut bytes = Vec::new();
        draft20::encode_subgroup_object(&header, extensions_present, &mut bytes).unwrap();
        assert_decodes_exactly(&header, &bytes, b"payload", |b| {
            draft20::decode_subgroup_object(b, extensions_present)
        });
    }
}

#[test]
fn fetch_objects_round_trip() {
    let entries = samples::fetch_objects();
    let mut writer = FetchObjectWriter::new();
    let mut encodings = Vec::new();
    for entry in &entries {
        let mut bytes = Vec::new();
        writer.encode(entry, &mut bytes).unwrap();
        encodings.push(bytes);
    }
    let mut reader = FetchObjectReader::new();
    for (entry, bytes) in entries.iter().zip(&encodings) {
        assert_prefixes_incomplete(bytes, |b| reader.clone().decode(b));
        assert_eq!(reader.decode(bytes).unwrap(), (entry.clone(), bytes.len()));
    }
}

#[test]
fn datagrams_round_trip() {
    for header in samples::datagrams() {
        let mut bytes = Vec::new();
        draft20::encode_datagram(&header, Some(DEFAULT_PRIORITY), &mut bytes).unwrap();
        let len = bytes.len();
        bytes.extend_from_slice(datagram_payload(&header));
        assert_eq!(
            draft20::decode_datagram(&bytes, &default_priority),
            Ok((header.clone(), len)),
            "{header:?}"
        );
    }
}

#[test]
fn property_blocks_round_trip() {
    let block = samples::extension_block();
    let pairs = draft20::decode_extensions(&block).unwrap();
    assert_eq!(draft20::encode_extensions(&pairs).unwrap(), block);
}
