//! Helpers shared by the draft-14 and draft-16 codec tests. Both binaries include this module
//! with `#[path = "../common/mod.rs"] mod common;` and hand in their control-message codec as a
//! [`Codec`].

pub mod fuzz;
pub mod samples;
pub mod vectors;

use std::fmt::Debug;

use moq_wire::DecodeError;
use moq_wire::message::{ControlMessage, DatagramHeader};

/// What a control-message decoder returns: the message and the bytes it used.
pub type Decoded = Result<(ControlMessage, usize), DecodeError>;

/// One draft's control-message codec, with the session lookups it needs already applied.
pub struct Codec {
    pub encode: fn(&ControlMessage) -> Vec<u8>,
    pub decode: fn(&[u8]) -> Decoded,
    pub name: fn(&ControlMessage) -> &'static str,
    pub message_type: fn(&ControlMessage) -> u64,
}

/// Parses hex bytes separated by whitespace, ignoring `//` comments to the end of a line.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s
        .lines()
        .flat_map(|line| line.split("//").next().unwrap_or("").bytes())
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// Frames a raw payload as a control message of the given type.
pub fn framed(message_type: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![message_type];
    bytes.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The reason of a protocol violation, panicking on any other result.
pub fn violation<T: Debug>(result: Result<T, DecodeError>) -> &'static str {
    match result {
        Err(DecodeError::ProtocolViolation(why)) => why,
        other => panic!("expected a protocol violation, got {other:?}"),
    }
}

/// A byte-exact vector, checked both ways: `message` encodes to exactly `expected` (hex), and
/// those bytes decode to exactly `message`.
pub fn check_control(codec: &Codec, message: ControlMessage, expected: &str) {
    let expected = hex(expected);
    assert_eq!(
        (codec.encode)(&message),
        expected,
        "{}",
        (codec.name)(&message)
    );
    assert_eq!(
        (codec.decode)(&expected).unwrap(),
        (message, expected.len())
    );
}

/// Every proper prefix of `bytes` must decode to `Incomplete`.
pub fn assert_prefixes_incomplete<T: Debug>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, DecodeError>,
) {
    for len in 0..bytes.len() {
        let result = decode(&bytes[..len]);
        assert!(
            matches!(result, Err(DecodeError::Incomplete)),
            "prefix {len}/{} of {bytes:02x?}: {result:?}",
            bytes.len()
        );
    }
}

/// `encoding` of `value`, followed by `trailing` bytes that are not its own, decodes to `value`
/// and consumes exactly the encoding.
pub fn assert_decodes_to<T: PartialEq + Debug>(
    value: &T,
    encoding: &[u8],
    trailing: &[u8],
    decode: impl Fn(&[u8]) -> Result<(T, usize), DecodeError>,
) {
    let bytes = [encoding, trailing].concat();
    let (decoded, used) = decode(&bytes).unwrap();
    assert_eq!(&decoded, value);
    assert_eq!(used, encoding.len());
}

/// [`assert_decodes_to`], and every proper prefix of the encoding is incomplete.
pub fn assert_decodes_exactly<T: PartialEq + Debug>(
    value: &T,
    encoding: &[u8],
    trailing: &[u8],
    decode: impl Fn(&[u8]) -> Result<(T, usize), DecodeError>,
) {
    assert_decodes_to(value, encoding, trailing, &decode);
    assert_prefixes_incomplete(encoding, decode);
}

/// The payload that follows a datagram header: none after a status.
pub fn datagram_payload(header: &DatagramHeader) -> &'static [u8] {
    if header.status.is_none() {
        b"payload"
    } else {
        b""
    }
}

/// Each message decodes to itself and leaves the bytes of a following message alone.
pub fn control_messages_round_trip(codec: &Codec, messages: Vec<ControlMessage>) {
    for message in messages {
        let mut bytes = (codec.encode)(&message);
        let len = bytes.len();
        // Bytes of a following message must be left alone.
        bytes.extend_from_slice(&[0x03, 0xff]);
        let (decoded, used) = (codec.decode)(&bytes).unwrap();
        assert_eq!(decoded, message, "{}", (codec.name)(&message));
        assert_eq!(used, len, "{}", (codec.name)(&message));
    }
}

/// Each encoding starts with the message type and a 16-bit length of the rest.
pub fn control_messages_are_framed(codec: &Codec, messages: Vec<ControlMessage>) {
    for message in messages {
        let bytes = (codec.encode)(&message);
        let mut rest = bytes.as_slice();
        assert_eq!(
            moq_wire::varint::decode(&mut rest).unwrap(),
            (codec.message_type)(&message)
        );
        let len = u16::from_be_bytes([rest[0], rest[1]]);
        assert_eq!(usize::from(len), rest.len() - 2, "{}", message.name());
    }
}

/// Every proper prefix of each message's encoding is incomplete.
pub fn control_message_prefixes_are_incomplete(codec: &Codec, messages: Vec<ControlMessage>) {
    for message in messages {
        assert_prefixes_incomplete(&(codec.encode)(&message), codec.decode);
    }
}

/// The control-message tests both drafts run on their samples, under the same names:
/// `control_messages_round_trip`, `control_message_type_and_length_frame_the_payload` and
/// `control_message_prefixes_are_incomplete`.
macro_rules! control_message_tests {
    ($codec:expr, $samples:expr) => {
        #[test]
        fn control_messages_round_trip() {
            $crate::common::control_messages_round_trip(&$codec, $samples);
        }

        #[test]
        fn control_message_type_and_length_frame_the_payload() {
            $crate::common::control_messages_are_framed(&$codec, $samples);
        }

        #[test]
        fn control_message_prefixes_are_incomplete() {
            $crate::common::control_message_prefixes_are_incomplete(&$codec, $samples);
        }
    };
}
pub(crate) use control_message_tests;
