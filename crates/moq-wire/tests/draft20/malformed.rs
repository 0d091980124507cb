//! Inputs that break draft-20's rules decode to the right error, and values that would
//! produce them are refused by the encoders.

use moq_wire::codec::{Channel, RequestKind};
use moq_wire::draft20;
use moq_wire::message::*;
use moq_wire::{DecodeError, EncodeError};

use super::common::{hex, violation};
use super::samples::ids;
use super::{decode, encode, ours, try_encode};

const NAMESPACE: &str = "02 04 616e6f6e 04 64656d6f";

/// A SUBSCRIBE of anon/demo "" (request 4) with the raw parameter bytes `params`.
pub fn subscribe_with(params: &str) -> Vec<u8> {
    let body = hex(&format!("04 {NAMESPACE} 00 {params}"));
    let mut bytes = vec![0x03];
    bytes.extend_from_slice(&(body.len() as u16).to_be_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

pub fn new_request(bytes: &[u8]) -> Result<(ControlMessage, usize), DecodeError> {
    decode(bytes, Channel::NewRequest)
}

#[test]
fn parameters_the_draft_or_the_message_does_not_define_are_violations() {
    assert_eq!(
        violation(new_request(&subscribe_with("01 40 00"))),
        "unknown message parameter"
    );
    // LARGEST_OBJECT is an answer's parameter.
    assert_eq!(
        violation(new_request(&subscribe_with("01 09 01 02"))),
        "parameter not allowed in this message"
    );
    // SUBSCRIBER_PRIORITY twice (a type delta of 0).
    assert_eq!(
        violation(new_request(&subscribe_with("02 20 01 00 02"))),
        "parameter repeated"
    );
    // AUTHORIZATION_TOKEN may repeat.
    assert!(new_request(&subscribe_with("02 03 01 61 00 01 62")).is_ok());
}

#[test]
fn parameter_values_out_of_range_are_violations() {
    assert_eq!(
        violation(new_request(&subscribe_with("01 10 02"))),
        "FORWARD / INCLUDE_PROPERTIES must be 0 or 1"
    );
    assert_eq!(
        violation(new_request(&subscribe_with("01 22 00"))),
        "group order must be ascending (1) or descending (2)"
    );
    // Inside FILL_PARAMETERS only the fill's four parameters.
    assert_eq!(
        violation(new_request(&subscribe_with("01 23 03 01 02 05"))),
        "parameter not allowed in this message"
    );
    assert_eq!(
        violation(new_request(&subscribe_with("01 23 04 00 00 00 00"))),
        "FILL_PARAMETERS longer than its parameters"
    );
}

#[test]
fn names_break_the_draft_limits() {
    // An empty namespace field.
    let body = hex("04 01 00 00 00");
    let mut bytes = vec![0x03, 0x00, body.len() as u8];
    bytes.extend_from_slice(&body);
    assert_eq!(
        violation(new_request(&bytes)),
        "track namespace field of 0 bytes"
    );
    // 33 fields.
    let mut body = vec![0x04, 33];
    for _ in 0..33 {
        body.extend_from_slice(&[0x01, b'a']);
    }
    body.extend_from_slice(&[0x00, 0x00]);
    let mut bytes = vec![0x03, 0x00, body.len() as u8];
    bytes.extend_from_slice(&body);
    assert_eq!(
        violation(new_request(&bytes)),
        "track namespace must have 1 to 32 fields"
    );
    // PUBLISH_NAMESPACE of no namespace at all.
    assert_eq!(
        violation(new_request(&hex("06 0003 14 00 00"))),
        "track namespace must have 1 to 32 fields"
    );
}

#[test]
fn messages_on_the_wrong_stream_are_violations() {
    let subscribe = subscribe_with("00");
    assert_eq!(
        violation(decode(&subscribe, Channel::Control { from_server: true })),
        "the control stream carries only SETUP and GOAWAY"
    );
    assert_eq!(
        violation(decode(
            &subscribe,
            ours(ids::SUBSCRIBE, RequestKind::Subscribe)
        )),
        "a message that does not belong on this request's stream"
    );
    let setup = hex("af00 0000");
    assert_eq!(
        violation(new_request(&setup)),
        "a request stream begins with a request"
    );
    // SUBSCRIBE_OK answers a SUBSCRIBE only, and only ours.
    let subscribe_ok = hex("04 0002 09 00");
    assert!(decode(&subscribe_ok, ours(ids::SUBSCRIBE, RequestKind::Subscribe)).is_ok());
    assert!(decode(&subscribe_ok, ours(ids::FETCH, RequestKind::Fetch)).is_err());
    // What draft-20 defines and the model does not carry: refused.
    let publish_state_notify = hex("22 0001 00");
    assert_eq!(
        violation(decode(
            &publish_state_notify,
            ours(ids::SUBSCRIBE, RequestKind::Subscribe)
        )),
        "a message that does not belong on this request's stream"
    );
    // Types of earlier drafts only.
    assert_eq!(
        decode(&hex("15 0001 00"), Channel::Control { from_server: true }),
        Err(DecodeError::UnknownMessageType(0x15))
    );
}

#[test]
fn a_track_property_numbered_as_a_token_is_dropped() {
    // PUBLISH with properties 0x03 (empty) and 0x08 = 7: the model keeps tokens and track
    // properties in one list, where a property 0x03 would read as a token.
    let bytes = hex(&format!("1d 0013 03 {NAMESPACE} 00 02 00 03 00 05 07"));
    let (ControlMessage::Publish(publish), _) = new_request(&bytes).unwrap() else {
        panic!("not a PUBLISH")
    };
    assert_eq!(publish.params, Parameters::new().with_int(0x08, 7));
}

#[test]
fn answers_break_their_rules() {
    // Track properties in a REQUEST_OK that answers a PUBLISH_NAMESPACE.
    assert_eq!(
        violation(decode(
            &hex("07 0003 00 22 02"),
            ours(ids::PUBLISH_NAMESPACE, RequestKind::PublishNamespace)
        )),
        "track properties in a REQUEST_OK that answers no TRACK_STATUS"
    );
    // A Redirect naming a track but no namespace.
    assert_eq!(
        violation(decode(
            &hex("05 0007 34 00 00 00 00 01 76"),
            ours(ids::SUBSCRIBE, RequestKind::Subscribe)
        )),
        "a redirect target with a track name and no namespace"
    );
    // End Of Track is a flag.
    assert_eq!(
        violation(decode(
            &hex("18 0004 02 04 00 00"),
            ours(ids::FETCH, RequestKind::Fetch)
        )),
        "end of track must be 0 or 1"
    );
}

#[test]
fn lengths_that_do_not_match_the_fields_are_violations() {
    let mut bytes = subscribe_with("00");
    bytes[2] += 1;
    bytes.push(0x00);
    assert_eq!(
        violation(new_request(&bytes)),
        "control message longer than its fields"
    );
    let mut bytes = subscribe_with("00");
    bytes[2] -= 1;
    bytes.pop();
    assert_eq!(
        violation(new_request(&bytes)),
        "control message shorter than its fields"
    );
}

#[test]
fn the_encoder_refuses_what_the_decoder_would() {
    let subscribe = |filter| {
        ControlMessage::Subscribe(Subscribe {
            filter,
            ..super::common::samples::subscribe(FilterType::NextGroupStart)
        })
    };
    assert_eq!(
        try_encode(&subscribe(FilterType::AbsoluteRange {
            start: Location::new(5, 0),
            end_group: 4,
        })),
        Err(EncodeError::Invalid(
            "location filter ends before it starts"
        ))
    );
    assert!(try_encode(&subscribe(FilterType::GroupsBack(u64::MAX))).is_err());
    // A parameter the message does not take.
    let mut with_largest = super::common::samples::subscribe(FilterType::NextGroupStart);
    with_largest.params = Parameters::new().with_bytes(draft20::param::LARGEST_OBJECT, vec![1, 2]);
    assert_eq!(
        try_encode(&ControlMessage::Subscribe(with_largest)),
        Err(EncodeError::Invalid(
            "parameter not allowed in this message"
        ))
    );
    // A redirect target of no namespace.
    let redirect = ControlMessage::Redirect(Redirect {
        request_id: 4,
        reason: String::new(),
        connect_uri: String::new(),
        target: Some((TrackNamespace(Vec::new()), b"v".to_vec())),
    });
    assert!(try_encode(&redirect).is_err());
    // Nothing is written on failure.
    let mut out = vec![0xaa];
    assert!(
        super::codec()
            .encode_control(&redirect, &moq_wire::codec::NoRequests, &mut out)
            .is_err()
    );
    assert_eq!(out, [0xaa]);
    let _ = encode;
}

#[test]
fn data_stream_headers_the_draft_does_not_define() {
    for stream_type in [0x16, 0x1e, 0x56, 0x80, 0x0f] {
        let mut bytes = Vec::new();
        moq_wire::varint::vi64::encode(stream_type, &mut bytes);
        bytes.extend_from_slice(&[0x01, 0x02, 0x03]);
        assert_eq!(
            draft20::decode_data_stream_header(&bytes, &|_| 128),
            Err(DecodeError::UnknownStreamType(stream_type)),
            "{stream_type:#x}"
        );
    }
    // Bit 4 of a datagram type is reserved; status with end of group is invalid.
    for datagram_type in [0x10, 0x22] {
        assert_eq!(
            draft20::decode_datagram(&[datagram_type, 0x05, 0x28, 0x80], &|_| 128),
            Err(DecodeError::UnknownDatagramType(datagram_type.into()))
        );
    }
    // A fetch stream's first entry cannot refer to an entry before it; unknown flags.
    let mut reader = draft20::FetchObjectReader::new();
    assert!(matches!(
        reader.decode(&hex("00 64")),
        Err(DecodeError::ProtocolViolation(_))
    ));
    assert_eq!(
        violation(draft20::FetchObjectReader::new().decode(&hex("8100 00 00"))),
        "unknown fetch object serialization flags"
    );
    // Draft-16 has no End of Timed-Out Range.
    assert_eq!(
        violation(moq_wire::draft16::FetchObjectReader::new().decode(&hex("420c 00 00"))),
        "unknown fetch object serialization flags"
    );
}

#[test]
fn objects_break_the_status_rules() {
    assert_eq!(
        violation(draft20::decode_subgroup_object(&hex("00 00 01"), false)),
        "unknown object status"
    );
    let missing = SubgroupObjectHeader {
        status: ObjectStatus::DoesNotExist,
        ..Default::default()
    };
    assert_eq!(
        draft20::encode_subgroup_object(&missing, false, &mut Vec::new()),
        Err(EncodeError::Invalid(
            "draft-20 has no 'does not exist' object status"
        ))
    );
}
