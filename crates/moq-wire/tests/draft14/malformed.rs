//! Inputs that break the draft's rules decode to the right error, and values that would produce
//! them are refused by the encoders.

use moq_wire::draft14::VERSION;
use moq_wire::message::*;
use moq_wire::{DecodeError, EncodeError};

use super::common::vectors::{self, subscribe_ok_without_content};
use super::common::{framed, hex, violation};
use super::encode;

fn subscribe() -> Subscribe {
    Subscribe {
        request_id: 0,
        namespace: TrackNamespace::from_path("a"),
        track_name: b"t".to_vec(),
        subscriber_priority: 0,
        group_order: GroupOrder::Ascending,
        forward: true,
        filter: FilterType::LargestObject,
        params: Parameters::new(),
        fill: None,
    }
}

#[test]
fn length_field_mismatch() {
    // SUBSCRIBE_OK (request 0, alias 0, expires 0, ascending, no content, no params) = 6 bytes.
    let payload = hex("00 00 00 01 00 00");

    let mut long = framed(0x04, &payload);
    long.push(0x00);
    long[2] = 7; // claims one byte more than the fields use
    assert_eq!(
        violation(ControlMessage::decode(&long)),
        "control message longer than its fields"
    );

    let short = framed(0x04, &payload[..5]); // parameter count cut off
    assert_eq!(
        violation(ControlMessage::decode(&short)),
        "control message shorter than its fields"
    );
}

#[test]
fn unknown_message_types() {
    for (bytes, message_type) in [
        (hex("01 00 00"), 0x01),    // SETUP of version 00
        (hex("40 40 00 00"), 0x40), // CLIENT_SETUP of versions <= 10
        (hex("3f"), 0x3f),          // reported before the length arrives
    ] {
        assert_eq!(
            ControlMessage::decode(&bytes),
            Err(DecodeError::UnknownMessageType(message_type))
        );
    }
}

#[test]
fn namespace_field_count() {
    // PUBLISH_NAMESPACE with an empty tuple.
    let empty = framed(0x06, &hex("00 00 00"));
    assert_eq!(
        violation(ControlMessage::decode(&empty)),
        "track namespace must have 1 to 32 fields"
    );

    // 33 one-byte fields.
    let mut payload = vec![0x00, 33];
    for _ in 0..33 {
        payload.extend_from_slice(&[0x01, b'x']);
    }
    payload.push(0x00);
    let too_many = framed(0x06, &payload);
    assert_eq!(
        violation(ControlMessage::decode(&too_many)),
        "track namespace must have 1 to 32 fields"
    );

    // 32 fields are fine.
    let ok = TrackNamespace(vec![b"x".to_vec(); 32]);
    let message = ControlMessage::PublishNamespaceDone(PublishNamespaceDone { namespace: ok });
    assert!(ControlMessage::decode(&encode(&message)).is_ok());

    // The encoder refuses both.
    for namespace in [
        TrackNamespace(Vec::new()),
        TrackNamespace(vec![b"x".to_vec(); 33]),
    ] {
        let message = ControlMessage::PublishNamespaceDone(PublishNamespaceDone { namespace });
        assert_eq!(
            message.encode(&mut Vec::new()),
            Err(EncodeError::Invalid(
                "track namespace must have 1 to 32 fields"
            ))
        );
    }
}

#[test]
fn an_empty_namespace_prefix_is_accepted() {
    // SUBSCRIBE_NAMESPACE, request 1, a prefix of zero fields, no parameters: what
    // moq-relay sends to mean "everything".
    let bytes = framed(0x11, &hex("01 00 00"));
    let (message, used) = ControlMessage::decode(&bytes).expect("accepted");
    assert_eq!(used, bytes.len());
    assert_eq!(
        message,
        ControlMessage::SubscribeNamespace(SubscribeNamespace {
            request_id: 1,
            namespace_prefix: NamespacePrefix(TrackNamespace(Vec::new())),
            params: Parameters::default(),
        })
    );
    assert_eq!(encode(&message), bytes);
    // 33 fields are still a violation.
    let mut payload = vec![0x01, 33];
    for _ in 0..33 {
        payload.extend_from_slice(&[0x01, b'x']);
    }
    payload.push(0x00);
    assert_eq!(
        violation(ControlMessage::decode(&framed(0x11, &payload))),
        "track namespace must have 1 to 32 fields"
    );
}

#[test]
fn full_track_name_limit() {
    let at_limit = Subscribe {
        namespace: TrackNamespace(vec![vec![b'n'; 96]]),
        track_name: vec![b't'; 4000],
        ..subscribe()
    };
    let bytes = encode(&ControlMessage::Subscribe(at_limit.clone()));
    assert!(ControlMessage::decode(&bytes).is_ok());

    // One more byte in the name: patch the encoding by hand, since the encoder refuses.
    let over = Subscribe {
        track_name: vec![b't'; 4001],
        ..at_limit
    };
    assert_eq!(
        ControlMessage::Subscribe(over.clone()).encode(&mut Vec::new()),
        Err(EncodeError::Invalid(
            "full track name longer than 4096 bytes"
        ))
    );
    let mut payload = vec![0x00, 0x01, 0x40, 96];
    payload.extend_from_slice(&[b'n'; 96]);
    payload.extend_from_slice(&[0x4f, 0xa1]); // 4001
    payload.extend_from_slice(&over.track_name);
    payload.extend_from_slice(&[0x00, 0x01, 0x01, 0x02, 0x00]);
    assert_eq!(
        violation(ControlMessage::decode(&framed(0x03, &payload))),
        "full track name longer than 4096 bytes"
    );
}

#[test]
fn oversize_reason_phrase() {
    let error = |reason: String| {
        ControlMessage::SubscribeError(SubscribeError {
            request_id: 0,
            code: 0,
            reason,
        })
    };
    let at_limit = encode(&error("r".repeat(1024)));
    assert!(ControlMessage::decode(&at_limit).is_ok());

    assert_eq!(
        error("r".repeat(1025)).encode(&mut Vec::new()),
        Err(EncodeError::Invalid("reason phrase longer than 1024 bytes"))
    );
    let mut payload = hex("00 00 44 01"); // request 0, code 0, length 1025
    payload.extend_from_slice(&[b'r'; 1025]);
    assert_eq!(
        violation(ControlMessage::decode(&framed(0x05, &payload))),
        "reason phrase longer than 1024 bytes"
    );
}

#[test]
fn reason_phrase_must_be_utf8() {
    let bytes = framed(0x05, &hex("00 00 02 c3 28"));
    assert_eq!(
        violation(ControlMessage::decode(&bytes)),
        "reason phrase is not UTF-8"
    );
}

#[test]
fn goaway_uri_limit() {
    let uri = |len| {
        ControlMessage::Goaway(Goaway {
            new_session_uri: "u".repeat(len),
        })
    };
    assert!(ControlMessage::decode(&encode(&uri(8192))).is_ok());
    assert_eq!(
        uri(8193).encode(&mut Vec::new()),
        Err(EncodeError::Invalid("GOAWAY URI longer than 8192 bytes"))
    );
    let mut payload = hex("60 01"); // 8193 as a 2-byte varint
    payload.extend_from_slice(&[b'u'; 8193]);
    assert_eq!(
        violation(ControlMessage::decode(&framed(0x10, &payload))),
        "GOAWAY URI longer than 8192 bytes"
    );
}

/// The encoding of [`subscribe`] with one byte replaced.
fn patched_subscribe(offset: usize, value: u8) -> Vec<u8> {
    let mut bytes = encode(&ControlMessage::Subscribe(subscribe()));
    // type, length (2), request ID, namespace (3), track name (2), priority, order, forward,
    // filter, parameter count
    bytes[offset] = value;
    bytes
}

#[test]
fn bad_forward_value() {
    assert_eq!(
        violation(ControlMessage::decode(&patched_subscribe(11, 2))),
        "forward must be 0 or 1"
    );
}

#[test]
fn bad_filter_type() {
    assert_eq!(
        violation(ControlMessage::decode(&patched_subscribe(12, 7))),
        "unknown filter type"
    );
}

#[test]
fn bad_group_order() {
    assert_eq!(
        violation(ControlMessage::decode(&patched_subscribe(10, 3))),
        "group order above 2"
    );
    // Replies must name a real order.
    let reply = framed(0x04, &hex("00 00 00 00 00 00"));
    assert_eq!(
        violation(ControlMessage::decode(&reply)),
        "group order in a reply must be ascending or descending"
    );
    let ok = ControlMessage::SubscribeOk(subscribe_ok_without_content(0, GroupOrder::Publisher));
    assert!(matches!(
        ok.encode(&mut Vec::new()),
        Err(EncodeError::Invalid(_))
    ));
}

#[test]
fn bad_content_exists() {
    let reply = framed(0x04, &hex("00 00 00 01 02 00"));
    assert_eq!(
        violation(ControlMessage::decode(&reply)),
        "content exists must be 0 or 1"
    );
}

#[test]
fn bad_fetch_type() {
    // request 0, priority 0, order 0, fetch type 4
    let fetch = framed(0x16, &hex("00 00 00 04 00 00 00"));
    assert_eq!(
        violation(ControlMessage::decode(&fetch)),
        "unknown fetch type"
    );
}

#[test]
fn key_value_pairs() {
    // MAX_REQUEST_ID parameter: byte value announced as 65536 bytes long.
    let setup = framed(0x21, &hex("01 01 01 80 01 00 00"));
    assert_eq!(
        violation(ControlMessage::decode(&setup)),
        "key-value byte value longer than 65535"
    );

    // Parity decides the value form; the encoder refuses mismatches.
    for pair in [
        KeyValuePair::bytes(0x02, b"x".to_vec()),
        KeyValuePair::int(0x03, 1),
    ] {
        let message = ControlMessage::ServerSetup(ServerSetup {
            version: VERSION,
            params: Parameters(vec![pair]),
        });
        assert!(matches!(
            message.encode(&mut Vec::new()),
            Err(EncodeError::Invalid(_))
        ));
    }
}

#[test]
fn duplicate_parameters() {
    // SUBSCRIBE_NAMESPACE (request 0, namespace ("a")) with two DELIVERY_TIMEOUTs.
    let repeated = framed(0x11, &hex("00 01 01 61 02 02 05 02 06"));
    assert_eq!(
        violation(ControlMessage::decode(&repeated)),
        "parameter repeated"
    );

    // Unknown parameters and authorization tokens may repeat, and are kept in order.
    let allowed = framed(0x11, &hex("00 01 01 61 04 3e 01 3e 02 03 01 61 03 01 62"));
    let (message, _) = ControlMessage::decode(&allowed).unwrap();
    let ControlMessage::SubscribeNamespace(message) = message else {
        panic!("{message:?}")
    };
    assert_eq!(message.params.0.len(), 4);
    assert_eq!(message.params.get_int(0x3e), Some(1));
    assert_eq!(
        message.params.get_bytes(param::AUTHORIZATION_TOKEN),
        Some(&b"a"[..])
    );

    // Setup parameters are checked against their own number space: PATH twice.
    let setup = framed(0x20, &hex("00 02 01 01 61 01 01 62"));
    assert_eq!(
        violation(ControlMessage::decode(&setup)),
        "parameter repeated"
    );

    let twice = Parameters(vec![
        KeyValuePair::int(param::MAX_CACHE_DURATION, 1),
        KeyValuePair::int(param::MAX_CACHE_DURATION, 2),
    ]);
    let message = ControlMessage::PublishNamespace(PublishNamespace {
        request_id: 0,
        namespace: TrackNamespace::from_path("a"),
        params: twice,
    });
    assert_eq!(
        message.encode(&mut Vec::new()),
        Err(EncodeError::Invalid("parameter repeated"))
    );
}

#[test]
fn oversize_message_is_refused_without_output() {
    let message = vectors::oversize_publish_namespace(0x21);
    let mut out = vec![0xaa];
    assert!(matches!(
        message.encode(&mut out),
        Err(EncodeError::MessageTooLong(_))
    ));
    assert_eq!(out, [0xaa]);
}

#[test]
fn unknown_stream_types() {
    for stream_type in [0x00, 0x04, 0x06, 0x0f, 0x16, 0x17, 0x1e, 0x1f, 0x20] {
        assert_eq!(
            DataStreamHeader::decode(&[stream_type, 0, 0, 0, 0]),
            Err(DecodeError::UnknownStreamType(u64::from(stream_type)))
        );
    }
}

#[test]
fn bad_object_status() {
    // delta 0, payload length 0, status 2 (no longer defined)
    assert_eq!(
        SubgroupObjectHeader::decode(&hex("00 00 02"), false),
        Err(DecodeError::ProtocolViolation("unknown object status"))
    );
}

#[test]
fn missing_object_with_extensions() {
    // delta 0, 2 bytes of extensions, payload length 0, status Does Not Exist
    let err = SubgroupObjectHeader::decode(&hex("00 02 3c 02 00 01"), true).unwrap_err();
    assert_eq!(
        err,
        DecodeError::ProtocolViolation("non-existent object with extension headers")
    );
    let fetch = FetchObjectHeader::decode(&hex("00 00 00 00 02 3c 02 00 01"));
    assert_eq!(fetch.unwrap_err(), err);
    let datagram = DatagramHeader::decode(&hex("21 01 00 00 00 02 3c 02 01"));
    assert_eq!(datagram.unwrap_err(), err);
}

#[test]
fn malformed_extension_block() {
    // The block is 2 bytes but its byte-string pair announces 5 bytes of value.
    let err = SubgroupObjectHeader::decode(&hex("00 02 01 05 04"), true).unwrap_err();
    assert_eq!(
        err,
        DecodeError::KeyValueFormatting("extension headers overrun their length")
    );
    assert_eq!(
        err.session_error_code(),
        session_error::KEY_VALUE_FORMATTING_ERROR
    );
}

#[test]
fn datagram_rules() {
    // Type 0x01 (extensions present) with an empty extension block.
    assert_eq!(
        DatagramHeader::decode(&hex("01 01 00 00 80 00 61")),
        Err(DecodeError::ProtocolViolation(
            "datagram announces extensions but has none"
        ))
    );
    // Status datagram followed by payload bytes.
    assert_eq!(
        DatagramHeader::decode(&hex("20 01 00 00 80 03 61")),
        Err(DecodeError::ProtocolViolation(
            "status datagram with a payload"
        ))
    );
    // Ends before the priority.
    assert_eq!(
        DatagramHeader::decode(&hex("00 01 00 00")),
        Err(DecodeError::ProtocolViolation("truncated datagram"))
    );
    for datagram_type in [0x08, 0x10, 0x1f, 0x22] {
        assert_eq!(
            DatagramHeader::decode(&[datagram_type, 0, 0, 0, 0]),
            Err(DecodeError::UnknownDatagramType(u64::from(datagram_type)))
        );
    }
}

#[test]
fn object_id_out_of_range() {
    let header = SubgroupObjectHeader {
        object_id_delta: moq_wire::varint::MAX_VARINT,
        ..Default::default()
    };
    assert_eq!(
        header.object_id(Some(5)),
        Err(DecodeError::ProtocolViolation("object ID out of range"))
    );
}

#[test]
fn error_codes() {
    assert!(DecodeError::Incomplete.is_incomplete());
    assert!(!DecodeError::ProtocolViolation("x").is_incomplete());
    assert_eq!(
        DecodeError::UnknownMessageType(1).session_error_code(),
        session_error::PROTOCOL_VIOLATION
    );
    assert_eq!(
        DecodeError::Incomplete.session_error_code(),
        session_error::PROTOCOL_VIOLATION
    );
}
