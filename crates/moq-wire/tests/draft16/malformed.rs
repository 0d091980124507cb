//! Inputs that break draft-16's rules decode to the right error, and values that would produce
//! them are refused by the encoders.

use moq_wire::draft16::{
    self, FetchObject, FetchObjectReader, FetchObjectWriter, extension, param,
};
use moq_wire::message::*;
use moq_wire::{DecodeError, EncodeError};

use super::common::vectors::{self, subscribe_ok_without_content};
use super::common::{framed, hex, violation};
use super::{decode, encode, ids, try_encode};

/// A SUBSCRIBE of ("a") "t" with the given parameter block (count included).
fn subscribe_with(params: &str) -> Vec<u8> {
    let mut payload = hex("00 01 01 61 01 74");
    payload.extend(hex(params));
    framed(0x03, &payload)
}

fn invalid(result: Result<Vec<u8>, EncodeError>) -> &'static str {
    match result {
        Err(EncodeError::Invalid(why)) => why,
        other => panic!("expected an invalid-field error, got {other:?}"),
    }
}

#[test]
fn length_field_mismatch() {
    // FETCH_CANCEL of request 5: one byte of payload.
    let mut long = framed(0x17, &[0x05, 0x00]);
    assert_eq!(
        violation(decode(&long)),
        "control message longer than its fields"
    );
    long[2] = 0;
    assert_eq!(
        violation(decode(&long[..3])),
        "control message shorter than its fields"
    );
}

#[test]
fn unknown_message_types() {
    // Draft-14 types that draft-16 dropped, and types neither draft has.
    for message_type in [0x0f, 0x12, 0x13, 0x14, 0x19, 0x1f, 0x01, 0x3f] {
        assert_eq!(
            decode(&[message_type, 0, 0]),
            Err(DecodeError::UnknownMessageType(u64::from(message_type)))
        );
    }
    // Reported before the length arrives.
    assert_eq!(
        decode(&hex("40 40")),
        Err(DecodeError::UnknownMessageType(0x40))
    );
    // NAMESPACE and NAMESPACE_DONE exist, but not on the control stream.
    for message_type in [0x08, 0x0e] {
        assert_eq!(
            violation(decode(&[message_type])),
            "NAMESPACE / NAMESPACE_DONE outside a SUBSCRIBE_NAMESPACE stream"
        );
    }
}

#[test]
fn delta_type_overflow() {
    // Setup parameters (unknown ones are allowed and may repeat): five deltas of 2^62 - 1
    // reach 5 * (2^62 - 1), past 2^64 - 1. Odd types take an empty byte value, even ones 0.
    let max = "ff ff ff ff ff ff ff ff";
    let payload = hex(&format!("05 {max} 00 {max} 00 {max} 00 {max} 00 {max} 00"));
    assert_eq!(
        violation(decode(&framed(0x21, &payload))),
        "key-value type beyond 2^64 - 1"
    );
    // Four stay within 64 bits, and are kept with their absolute types.
    let payload = hex(&format!("04 {max} 00 {max} 00 {max} 00 {max} 00"));
    let (message, _) = decode(&framed(0x21, &payload)).unwrap();
    let ControlMessage::ServerSetup(setup) = message else {
        panic!("{message:?}")
    };
    let max = moq_wire::varint::MAX_VARINT;
    let keys: Vec<u64> = setup.params.0.iter().map(|p| p.key).collect();
    assert_eq!(keys, [max, 2 * max, 3 * max, 4 * max]);
    // The same in an object extension block.
    let block = hex(
        "ff ff ff ff ff ff ff ff 00 ff ff ff ff ff ff ff ff 00 ff ff ff ff ff ff ff ff 00 ff ff ff ff ff ff ff ff 00 ff ff ff ff ff ff ff ff 00",
    );
    assert_eq!(
        draft16::decode_extensions(&block),
        Err(DecodeError::ProtocolViolation(
            "key-value type beyond 2^64 - 1"
        ))
    );
}

#[test]
fn repeated_types() {
    // Types can only ascend; a delta of 0 repeats the type before. PATH twice:
    assert_eq!(
        violation(decode(&framed(0x20, &hex("02 01 01 61 00 01 62")))),
        "parameter repeated"
    );
    // Unknown setup parameters may repeat.
    let (message, _) = decode(&framed(0x20, &hex("02 3f 00 00 00"))).unwrap();
    let ControlMessage::ClientSetup(setup) = message else {
        panic!()
    };
    assert_eq!(setup.params.0.len(), 2);
    // DELIVERY_TIMEOUT twice in SUBSCRIBE; two AUTHORIZATION_TOKENs are fine.
    assert_eq!(
        violation(decode(&subscribe_with("02 02 05 00 06"))),
        "parameter repeated"
    );
    assert!(decode(&subscribe_with("02 03 01 61 00 01 62")).is_ok());
    // Track extensions: DYNAMIC_GROUPS twice in FETCH_OK.
    assert_eq!(
        violation(decode(&framed(0x18, &hex("00 00 00 00 00 30 01 00 01")))),
        "track extension repeated"
    );
    // The encoder refuses repeats, whatever their order in the model.
    let twice = Parameters(vec![
        KeyValuePair::int(param::DELIVERY_TIMEOUT, 1),
        KeyValuePair::bytes(param::AUTHORIZATION_TOKEN, b"x".to_vec()),
        KeyValuePair::int(param::DELIVERY_TIMEOUT, 2),
    ]);
    let message = ControlMessage::Subscribe(Subscribe {
        request_id: 0,
        namespace: TrackNamespace::from_path("a"),
        track_name: Vec::new(),
        subscriber_priority: 128,
        group_order: GroupOrder::Publisher,
        forward: true,
        filter: FilterType::LargestObject,
        params: twice,
        fill: None,
    });
    assert_eq!(invalid(try_encode(&message)), "parameter repeated");
}

#[test]
fn unknown_and_misplaced_parameters() {
    // MAX_CACHE_DURATION (0x04) was a draft-14 parameter; draft-16 has no such parameter.
    assert_eq!(
        violation(decode(&subscribe_with("01 04 01"))),
        "unknown message parameter"
    );
    // LARGEST_OBJECT in a SUBSCRIBE is defined but does not apply: ignored.
    let (message, _) = decode(&subscribe_with("01 09 02 01 01")).unwrap();
    let ControlMessage::Subscribe(subscribe) = message else {
        panic!()
    };
    assert!(subscribe.params.is_empty());
    // The encoder refuses both.
    let with = |params| {
        ControlMessage::Subscribe(Subscribe {
            request_id: 0,
            namespace: TrackNamespace::from_path("a"),
            track_name: Vec::new(),
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::LargestObject,
            params,
            fill: None,
        })
    };
    for params in [
        Parameters::new().with_int(MAX_CACHE_DURATION_D14, 1),
        Parameters::new().with_int(param::EXPIRES, 1),
        // Carried by a field of the message.
        Parameters::new().with_int(param::FORWARD, 0),
    ] {
        assert_eq!(
            invalid(try_encode(&with(params))),
            "parameter not defined for this draft-16 message"
        );
    }
}

const MAX_CACHE_DURATION_D14: u64 = 0x04;

#[test]
fn parameter_values() {
    for (params, why) in [
        ("01 02 00", "DELIVERY_TIMEOUT of 0"),
        ("01 10 02", "forward must be 0 or 1"),
        ("01 20 41 00", "subscriber priority above 255"),
        (
            "01 22 03",
            "group order must be ascending (1) or descending (2)",
        ),
        (
            "01 22 00",
            "group order must be ascending (1) or descending (2)",
        ),
        // Filter type 7; a filter with a byte over; a filter cut short.
        ("01 21 01 07", "unknown filter type"),
        (
            "01 21 02 02 00",
            "subscription filter does not match its parameter length",
        ),
        (
            "01 21 02 03 01",
            "subscription filter does not match its parameter length",
        ),
    ] {
        assert_eq!(violation(decode(&subscribe_with(params))), why, "{params}");
    }
    // LARGEST_OBJECT that is not one Location: a KEY_VALUE_FORMATTING_ERROR.
    for payload in ["00 00 01 09 01 01", "00 00 01 09 03 01 01 01"] {
        assert_eq!(
            decode(&framed(0x04, &hex(payload))),
            Err(DecodeError::KeyValueFormatting(
                "LARGEST_OBJECT is not one Location"
            ))
        );
    }
    // A byte value longer than 65535.
    assert_eq!(
        violation(decode(&subscribe_with("01 03 80 01 00 00"))),
        "key-value byte value longer than 65535"
    );
    // Parity decides the value form; the encoder refuses mismatches.
    let setup = |pair| {
        ControlMessage::ServerSetup(ServerSetup {
            version: draft16::VERSION,
            params: Parameters(vec![pair]),
        })
    };
    assert_eq!(
        invalid(try_encode(&setup(KeyValuePair::bytes(0x02, b"x".to_vec())))),
        "byte value under an even key"
    );
    assert_eq!(
        invalid(try_encode(&setup(KeyValuePair::int(0x03, 1)))),
        "integer value under an odd key"
    );
}

#[test]
fn track_extension_values() {
    // FETCH_OK: request 0, not end of track, {0, 0}, no parameters, then one extension.
    for (extension, why) in [
        ("02 00", "DELIVERY_TIMEOUT extension of 0"),
        ("0e 41 00", "default publisher priority above 255"),
        (
            "22 00",
            "default group order must be ascending (1) or descending (2)",
        ),
        ("30 02", "DYNAMIC_GROUPS must be 0 or 1"),
    ] {
        let payload = hex(&format!("00 00 00 00 00 {extension}"));
        assert_eq!(violation(decode(&framed(0x18, &payload))), why);
    }
    // An extension cut off by the end of the message.
    assert_eq!(
        decode(&framed(0x18, &hex("00 00 00 00 00 0b 05 61"))),
        Err(DecodeError::KeyValueFormatting(
            "extension headers overrun their length"
        ))
    );
    // The group order has a field of its own.
    let ok = ControlMessage::FetchOk(FetchOk {
        request_id: 0,
        group_order: GroupOrder::Ascending,
        end_of_track: false,
        end_location: Location::new(0, 0),
        params: Parameters::new().with_int(extension::DEFAULT_PUBLISHER_GROUP_ORDER, 2),
    });
    assert_eq!(
        invalid(try_encode(&ok)),
        "the default group order travels in the group_order field"
    );
    // Replies must state a real order.
    let ok = ControlMessage::SubscribeOk(subscribe_ok_without_content(0, GroupOrder::Publisher));
    assert_eq!(
        invalid(try_encode(&ok)),
        "group order in a reply must be ascending or descending"
    );
}

#[test]
fn track_extensions_beyond_62_bits_are_dropped() {
    // SUBSCRIBE_OK whose track extensions are the group order (ascending) and a type that is
    // only reachable as a delta from it, 0x22 + 2^62 - 1. The group order becomes a field; the
    // other type could not be written again without it, and no such extension is defined.
    let bytes = framed(0x04, &hex("00 00 00  22 01  ff ff ff ff ff ff ff ff 00"));
    let (message, _) = decode(&bytes).unwrap();
    let ControlMessage::SubscribeOk(ok) = &message else {
        panic!("{message:?}")
    };
    assert_eq!(ok.group_order, GroupOrder::Ascending);
    assert!(ok.params.is_empty());
    assert_eq!(decode(&encode(&message)).unwrap().0, message);
    // Types up to 2^62 - 1 are kept.
    let bytes = framed(0x04, &hex("00 00 00  22 02  ff ff ff ff ff ff ff dd 00"));
    let (message, _) = decode(&bytes).unwrap();
    let ControlMessage::SubscribeOk(ok) = &message else {
        panic!("{message:?}")
    };
    assert_eq!(ok.group_order, GroupOrder::Descending);
    assert_eq!(
        ok.params.0,
        [KeyValuePair::bytes(
            moq_wire::varint::MAX_VARINT,
            Vec::new()
        )]
    );
    assert_eq!(decode(&encode(&message)).unwrap().0, message);
}

#[test]
fn namespace_rules() {
    // An empty namespace field, new in draft-16.
    assert_eq!(
        violation(decode(&framed(0x06, &hex("00 02 01 61 00 00")))),
        "track namespace field of 0 bytes"
    );
    assert_eq!(
        violation(decode(&framed(0x03, &hex("00 01 00 00 00")))),
        "track namespace field of 0 bytes"
    );
    let empty_field = TrackNamespace(vec![b"a".to_vec(), Vec::new()]);
    let message = ControlMessage::PublishNamespace(PublishNamespace {
        request_id: 0,
        namespace: empty_field,
        params: Parameters::new(),
    });
    assert_eq!(
        invalid(try_encode(&message)),
        "track namespace field of 0 bytes"
    );
    // No fields, or 33.
    assert_eq!(
        violation(decode(&framed(0x06, &hex("00 00 00")))),
        "track namespace must have 1 to 32 fields"
    );
    let mut payload = vec![0x00, 33];
    for _ in 0..33 {
        payload.extend_from_slice(&[0x01, b'x']);
    }
    payload.push(0x00);
    assert_eq!(
        violation(decode(&framed(0x06, &payload))),
        "track namespace must have 1 to 32 fields"
    );
    // Full track name over 4096 bytes.
    let mut payload = vec![0x00, 0x01, 0x40, 96];
    payload.extend_from_slice(&[b'n'; 96]);
    payload.extend_from_slice(&[0x4f, 0xa1]); // 4001
    payload.extend_from_slice(&[b't'; 4001]);
    payload.push(0x00);
    assert_eq!(
        violation(decode(&framed(0x03, &payload))),
        "full track name longer than 4096 bytes"
    );
    // SUBSCRIBE_NAMESPACE: subscribe options above 2.
    assert_eq!(
        violation(decode(&framed(0x11, &hex("00 00 03 00")))),
        "unknown subscribe options"
    );
}

#[test]
fn reason_phrases() {
    let mut payload = hex("04 00 00 44 01"); // request 4, code 0, retry 0, length 1025
    payload.extend_from_slice(&[b'r'; 1025]);
    assert_eq!(
        violation(decode(&framed(0x05, &payload))),
        "reason phrase longer than 1024 bytes"
    );
    assert_eq!(
        violation(decode(&framed(0x05, &hex("04 00 00 02 c3 28")))),
        "reason phrase is not UTF-8"
    );
}

#[test]
fn unknown_request_ids() {
    // REQUEST_OK / REQUEST_ERROR for an ID the session does not know.
    assert_eq!(
        violation(decode(&framed(0x07, &hex("3e 00")))),
        "REQUEST_OK for an unknown request ID"
    );
    assert_eq!(
        violation(decode(&framed(0x05, &hex("3e 00 00 00")))),
        "REQUEST_ERROR for an unknown request ID"
    );
    // REQUEST_OK cannot answer a SUBSCRIBE (SUBSCRIBE_OK does).
    assert_eq!(
        violation(decode(&framed(0x07, &[ids::SUBSCRIBE as u8, 0]))),
        "REQUEST_OK does not answer SUBSCRIBE, FETCH or PUBLISH"
    );
    // PUBLISH_NAMESPACE_DONE / _CANCEL for an unknown request.
    for message_type in [0x09, 0x0c] {
        assert_eq!(
            violation(decode(&framed(message_type, &hex("3e 00 00")))),
            "PUBLISH_NAMESPACE_DONE / _CANCEL for an unknown request ID"
        );
    }
    // And the encoder needs the request ID of the namespace.
    let done = ControlMessage::PublishNamespaceDone(PublishNamespaceDone {
        namespace: TrackNamespace::from_path("elsewhere"),
    });
    assert_eq!(
        invalid(try_encode(&done)),
        "no request ID known for the namespace of PUBLISH_NAMESPACE_DONE / _CANCEL"
    );
}

#[test]
fn messages_without_a_draft16_form() {
    let unsubscribe = ControlMessage::UnsubscribeNamespace(UnsubscribeNamespace {
        namespace_prefix: NamespacePrefix(TrackNamespace::from_path("a")),
    });
    assert!(invalid(try_encode(&unsubscribe)).contains("UNSUBSCRIBE_NAMESPACE"));
    assert_eq!(draft16::message_type(&unsubscribe), None);

    // A REQUEST_OK carries no track extensions.
    let status = ControlMessage::TrackStatusOk(SubscribeOk {
        request_id: ids::TRACK_STATUS,
        track_alias: 0,
        expires_ms: 0,
        group_order: GroupOrder::Ascending,
        largest: None,
        params: Parameters::new().with_int(extension::MAX_CACHE_DURATION, 1),
    });
    assert!(invalid(try_encode(&status)).contains("no track extensions"));

    // A REQUEST_UPDATE whose fields say something its parameters do not.
    let mut update = draft16::request_update(6, 4, Parameters::new()).unwrap();
    assert!(try_encode(&ControlMessage::SubscribeUpdate(update.clone())).is_ok());
    update.forward = false;
    assert!(
        invalid(try_encode(&ControlMessage::SubscribeUpdate(update))).contains("REQUEST_UPDATE")
    );
    // request_update checks what it is given.
    assert_eq!(
        draft16::request_update(6, 4, Parameters::new().with_int(param::GROUP_ORDER, 1)),
        Err(EncodeError::Invalid(
            "parameter not defined for this draft-16 message"
        ))
    );
    assert_eq!(
        draft16::request_update(
            6,
            4,
            Parameters::new().with_bytes(param::SUBSCRIPTION_FILTER, vec![9])
        ),
        Err(EncodeError::Invalid("unknown filter type"))
    );
}

#[test]
fn oversize_message_is_refused_without_output() {
    let message = vectors::oversize_publish_namespace(param::AUTHORIZATION_TOKEN);
    let mut out = vec![0xaa];
    assert!(matches!(
        draft16::encode_control(&message, &super::request_id_of, &mut out),
        Err(EncodeError::MessageTooLong(_))
    ));
    assert_eq!(out, [0xaa]);
}

#[test]
fn unknown_stream_types() {
    for stream_type in [
        0x00, 0x04, 0x06, 0x0f, 0x16, 0x17, 0x1e, 0x1f, 0x20, 0x2f, 0x36, 0x37, 0x3e, 0x3f,
    ] {
        assert_eq!(
            draft16::decode_data_stream_header(&[stream_type, 0, 0, 0, 0], &|_| 0),
            Err(DecodeError::UnknownStreamType(u64::from(stream_type)))
        );
    }
    assert_eq!(
        draft16::decode_data_stream_header(&hex("40 40 00 00 00"), &|_| 0),
        Err(DecodeError::UnknownStreamType(0x40))
    );
}

#[test]
fn object_status_rules() {
    // Status 1 (does not exist) is gone in draft-16; 2 never existed.
    for status in [1, 2, 5] {
        assert_eq!(
            draft16::decode_subgroup_object(&[0x00, 0x00, status], false),
            Err(DecodeError::ProtocolViolation("unknown object status"))
        );
    }
    // Extensions on an object that is not Normal.
    assert_eq!(
        draft16::decode_subgroup_object(&hex("00 02 3c 02 00 03"), true),
        Err(DecodeError::ProtocolViolation(
            "extension headers on an object that is not Normal"
        ))
    );
    // A block that does not parse.
    assert_eq!(
        draft16::decode_subgroup_object(&hex("00 02 01 05 04"), true),
        Err(DecodeError::KeyValueFormatting(
            "extension headers overrun their length"
        ))
    );
    // The encoder refuses what the decoder would.
    let encode = |header: &SubgroupObjectHeader, extensions_present| {
        let mut out = Vec::new();
        draft16::encode_subgroup_object(header, extensions_present, &mut out).map(|()| out)
    };
    let missing = SubgroupObjectHeader {
        status: ObjectStatus::DoesNotExist,
        ..Default::default()
    };
    assert_eq!(
        invalid(encode(&missing, false)),
        "draft-16 has no 'does not exist' object status"
    );
    let end_with_extensions = SubgroupObjectHeader {
        status: ObjectStatus::EndOfGroup,
        extensions: vec![0x3c, 0x01],
        ..Default::default()
    };
    assert_eq!(
        invalid(encode(&end_with_extensions, true)),
        "extension headers on an object that is not Normal"
    );
    let not_draft16 = SubgroupObjectHeader {
        extensions: vec![0x01, 0x05, 0x00],
        payload_len: 1,
        ..Default::default()
    };
    assert_eq!(
        invalid(encode(&not_draft16, true)),
        "extension block is not draft-16 Key-Value-Pairs"
    );
    let no_room = SubgroupObjectHeader {
        extensions: vec![0x3c, 0x01],
        payload_len: 1,
        ..Default::default()
    };
    assert_eq!(
        invalid(encode(&no_room, false)),
        "extensions on a subgroup stream without extensions"
    );
}

#[test]
fn fetch_object_rules() {
    let decode_first = |bytes: &str| FetchObjectReader::new().decode(&hex(bytes));
    // Values that are neither flags nor End of Range markers.
    for flags in ["40 80", "40 8d", "41 00", "41 0d", "42 0c"] {
        assert_eq!(
            decode_first(flags),
            Err(DecodeError::ProtocolViolation(
                "unknown fetch object serialization flags"
            )),
            "{flags}"
        );
    }
    // The first object cannot refer to an object before it, whatever follows.
    for flags in ["00", "18", "14", "0c", "1d", "1e"] {
        assert_eq!(
            decode_first(flags),
            Err(DecodeError::ProtocolViolation(
                "fetch object refers to a prior object that is not there"
            )),
            "{flags}"
        );
    }
    // After an End of Range, group and object are known, subgroup and priority are not.
    let mut reader = FetchObjectReader::new();
    reader.decode(&hex("40 8c 01 02")).unwrap();
    assert!(reader.clone().decode(&hex("10 05 00")).is_ok());
    assert!(reader.clone().decode(&hex("00")).is_err());
    // After a datagram object, there is no prior subgroup.
    let mut reader = FetchObjectReader::new();
    reader.decode(&hex("40 5c 01 02 03 00")).unwrap();
    assert!(reader.clone().decode(&hex("00 00")).is_ok());
    assert_eq!(
        reader.decode(&hex("01 00")),
        Err(DecodeError::ProtocolViolation(
            "fetch object refers to a prior object that is not there"
        ))
    );
    // The object after the largest possible ID.
    let mut reader = FetchObjectReader::new();
    reader
        .decode(&hex("1c 00 ff ff ff ff ff ff ff ff 00 00"))
        .unwrap();
    assert_eq!(
        reader.decode(&hex("00 00")),
        Err(DecodeError::ProtocolViolation(
            "fetch object ID out of range"
        ))
    );
    // Truncated entries are incomplete, and leave the reader alone.
    let mut reader = FetchObjectReader::new();
    assert_eq!(
        reader.decode(&hex("40 8c 05")),
        Err(DecodeError::Incomplete)
    );
    assert_eq!(
        reader.decode(&hex("1c 04 09")),
        Err(DecodeError::Incomplete)
    );
    assert!(reader.decode(&hex("1c 04 09 03 00")).is_ok());

    // The writer refuses statuses and datagram objects with a subgroup.
    let header = FetchObjectHeader {
        group_id: 1,
        subgroup_id: 3,
        object_id: 2,
        ..Default::default()
    };
    let mut writer = FetchObjectWriter::new();
    let mut out = Vec::new();
    assert!(
        writer
            .encode(
                &FetchObject::Object {
                    header: header.clone(),
                    datagram: true
                },
                &mut out
            )
            .is_err()
    );
    let status = FetchObjectHeader {
        status: ObjectStatus::EndOfGroup,
        ..header
    };
    assert!(
        writer
            .encode(
                &FetchObject::Object {
                    header: status,
                    datagram: false
                },
                &mut out
            )
            .is_err()
    );
    let huge = FetchObject::NonExistentRange {
        end: Location::new(u64::MAX, 0),
    };
    assert_eq!(
        writer.encode(&huge, &mut out),
        Err(EncodeError::VarintOutOfRange(u64::MAX))
    );
    assert!(out.is_empty());
    // Failures do not move the writer: the next object is still the first.
    let first = FetchObject::Object {
        header: FetchObjectHeader::default(),
        datagram: false,
    };
    writer.encode(&first, &mut out).unwrap();
    assert_eq!(out, hex("1c 00 00 00 00"));
}

#[test]
fn datagram_rules() {
    let decode = |bytes: &str| draft16::decode_datagram(&hex(bytes), &|_| 128);
    // Extensions announced but empty.
    assert_eq!(
        decode("01 01 00 00 80 00 61"),
        Err(DecodeError::ProtocolViolation(
            "datagram announces extensions but has none"
        ))
    );
    // Status datagram followed by payload bytes.
    assert_eq!(
        decode("20 01 00 00 80 03 61"),
        Err(DecodeError::ProtocolViolation(
            "status datagram with a payload"
        ))
    );
    // Status 1 is gone.
    assert_eq!(
        decode("2c 01 00 01"),
        Err(DecodeError::ProtocolViolation("unknown object status"))
    );
    // Extensions on a status other than Normal.
    assert_eq!(
        decode("25 01 00 80 02 3c 00 03"),
        Err(DecodeError::ProtocolViolation(
            "extension headers on an object that is not Normal"
        ))
    );
    // Ends before the priority.
    assert_eq!(
        decode("00 01 00 00"),
        Err(DecodeError::ProtocolViolation("truncated datagram"))
    );
    // Status with end of group, and types outside 0b00X0XXXX.
    for datagram_type in [
        0x22, 0x23, 0x26, 0x27, 0x2a, 0x2b, 0x2e, 0x2f, 0x10, 0x1f, 0x30,
    ] {
        assert_eq!(
            draft16::decode_datagram(&[datagram_type, 0, 0, 0, 0], &|_| 0),
            Err(DecodeError::UnknownDatagramType(u64::from(datagram_type)))
        );
    }
    let header = DatagramHeader {
        status: Some(ObjectStatus::DoesNotExist),
        ..Default::default()
    };
    let mut out = Vec::new();
    assert!(draft16::encode_datagram(&header, None, &mut out).is_err());
    let header = DatagramHeader {
        status: Some(ObjectStatus::EndOfGroup),
        end_of_group: true,
        ..Default::default()
    };
    assert!(draft16::encode_datagram(&header, None, &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn encoded_messages_decode_with_their_own_lookups() {
    // A session that knows nothing can still read messages that need no lookup.
    let bytes = encode(&ControlMessage::MaxRequestId(MaxRequestId {
        request_id: 9,
    }));
    assert!(draft16::decode_control(&bytes, &|_| None, &|_| None).is_ok());
}
