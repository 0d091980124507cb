//! Helpers of the draft-20 family's suites: encoding and decoding with the suite's codec
//! (`codec()` at the suite's root), on the channel each message travels on.

use moq_wire::codec::{Channel, NoRequests, RequestKind, StreamRequest};

use super::codec;
use moq_wire::message::{ControlMessage, Refusal};
use moq_wire::{DecodeError, EncodeError};

/// Encodes a control message, panicking on failure.
pub fn encode(message: &ControlMessage) -> Vec<u8> {
    try_encode(message).unwrap_or_else(|e| panic!("{message:?}: {e}"))
}

/// Encodes a control message, returning the error.
pub fn try_encode(message: &ControlMessage) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    codec()
        .encode_control(message, &NoRequests, &mut out)
        .map(|()| out)
}

/// Decodes a control message read on `channel`.
pub fn decode(bytes: &[u8], channel: Channel) -> Result<(ControlMessage, usize), DecodeError> {
    codec().decode_control(bytes, channel, &NoRequests)
}

/// Our request `request_id` of `kind`, whose stream an answer comes back on.
pub fn ours(request_id: u64, kind: RequestKind) -> Channel {
    Channel::Request(StreamRequest {
        request_id,
        kind,
        ours: true,
    })
}

/// The channel `message` travels on, as the receiver of it sees that channel.
pub fn channel_of(message: &ControlMessage) -> Channel {
    use ControlMessage as M;
    if let Some(refusal) = Refusal::of(message) {
        return ours(refusal.request_id, refusal.kind);
    }
    match message {
        M::ClientSetup(_) | M::Goaway(_) => Channel::Control { from_server: false },
        M::ServerSetup(_) => Channel::Control { from_server: true },
        M::SubscribeUpdate(m) => Channel::Request(StreamRequest {
            request_id: m.subscription_request_id,
            kind: RequestKind::Subscribe,
            ours: false,
        }),
        M::SubscribeOk(m) => ours(m.request_id, RequestKind::Subscribe),
        M::PublishDone(m) => ours(m.request_id, RequestKind::Subscribe),
        M::Redirect(m) => ours(m.request_id, RequestKind::Subscribe),
        M::FetchOk(m) => ours(m.request_id, RequestKind::Fetch),
        M::TrackStatusOk(m) => ours(m.request_id, RequestKind::TrackStatus),
        M::PublishOk(m) => ours(m.request_id, RequestKind::Publish),
        M::PublishNamespaceOk(m) => ours(m.request_id, RequestKind::PublishNamespace),
        M::SubscribeNamespaceOk(m) => ours(m.request_id, RequestKind::SubscribeNamespace),
        _ => Channel::NewRequest,
    }
}

/// Decodes a control message on the channel it travels on.
pub fn decode_as_sent(
    message: &ControlMessage,
    bytes: &[u8],
) -> Result<(ControlMessage, usize), DecodeError> {
    decode(bytes, channel_of(message))
}
