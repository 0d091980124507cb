//! draft-14 codec tests: hand-derived byte vectors, round trips, partial input, malformed input
//! and a randomised no-panic check.

#[path = "../common/mod.rs"]
mod common;
mod fuzz;
mod malformed;
mod roundtrip;
mod samples;
mod vectors;

use common::Codec;
use moq_wire::message::ControlMessage;

/// Encodes a control message, panicking on failure.
fn encode(message: &ControlMessage) -> Vec<u8> {
    let mut out = Vec::new();
    message.encode(&mut out).expect("encodable");
    out
}

/// The draft-14 control-message codec.
const CODEC: Codec = Codec {
    encode,
    decode: ControlMessage::decode,
    name: ControlMessage::name,
    message_type: |message| message.message_type().expect("has a draft-14 form"),
};
