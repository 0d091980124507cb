//! draft-16 codec tests: hand-derived byte vectors, round trips, partial input, malformed input
//! and a randomised no-panic check. Messages are the draft-14 model types throughout.

#[path = "../common/mod.rs"]
mod common;
mod fuzz;
mod malformed;
mod roundtrip;
mod samples;
mod vectors;

use common::Codec;
use moq_wire::DecodeError;
use moq_wire::draft16::{self, Announcer, RequestKind};
use moq_wire::message::{ControlMessage, TrackNamespace};

/// Request IDs the samples refer to, and what they belong to.
pub mod ids {
    pub const PUBLISH_NAMESPACE: u64 = 0;
    pub const PUBLISH: u64 = 3;
    pub const SUBSCRIBE: u64 = 4;
    pub const UPDATE: u64 = 6;
    pub const FETCH: u64 = 12;
    pub const TRACK_STATUS: u64 = 16;
    pub const SUBSCRIBE_NAMESPACE: u64 = 18;
    /// Our PUBLISH_NAMESPACE of `samples::namespace()`.
    pub const OUR_NAMESPACE: u64 = 20;
    /// The peer's PUBLISH_NAMESPACE of `samples::namespace()`.
    pub const PEER_NAMESPACE: u64 = 21;
}

/// The session's table of request kinds, as the samples need it.
pub fn answers(request_id: u64) -> Option<RequestKind> {
    Some(match request_id {
        ids::PUBLISH_NAMESPACE => RequestKind::PublishNamespace,
        ids::PUBLISH => RequestKind::Publish,
        ids::SUBSCRIBE => RequestKind::Subscribe,
        ids::UPDATE => RequestKind::SubscribeUpdate,
        ids::FETCH => RequestKind::Fetch,
        ids::TRACK_STATUS => RequestKind::TrackStatus,
        ids::SUBSCRIBE_NAMESPACE => RequestKind::SubscribeNamespace,
        _ => return None,
    })
}

/// The namespaces of the PUBLISH_NAMESPACE requests the samples end.
pub fn namespace_of(request_id: u64) -> Option<TrackNamespace> {
    matches!(request_id, ids::OUR_NAMESPACE | ids::PEER_NAMESPACE).then(samples::namespace)
}

/// The inverse of [`namespace_of`].
pub fn request_id_of(namespace: &TrackNamespace, announcer: Announcer) -> Option<u64> {
    (*namespace == samples::namespace()).then_some(match announcer {
        Announcer::Local => ids::OUR_NAMESPACE,
        Announcer::Peer => ids::PEER_NAMESPACE,
    })
}

/// Encodes a control message, panicking on failure.
fn encode(message: &ControlMessage) -> Vec<u8> {
    let mut out = Vec::new();
    draft16::encode_control(message, &request_id_of, &mut out).expect("encodable");
    out
}

/// Encodes a control message, returning the error.
fn try_encode(message: &ControlMessage) -> Result<Vec<u8>, moq_wire::EncodeError> {
    let mut out = Vec::new();
    draft16::encode_control(message, &request_id_of, &mut out).map(|()| out)
}

/// Decodes a control message with the sample lookups.
fn decode(bytes: &[u8]) -> Result<(ControlMessage, usize), DecodeError> {
    draft16::decode_control(bytes, &answers, &namespace_of)
}

/// The draft-16 control-message codec, with the sample lookups.
const CODEC: Codec = Codec {
    encode,
    decode,
    name: draft16::message_name,
    message_type: |message| draft16::message_type(message).expect("has a draft-16 form"),
};
