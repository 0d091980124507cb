//! How the `control` target's input names the stream a message is read on: drafts from 17
//! on read the same bytes differently on the control stream, as a new request, or as an
//! answer on a request's stream, so the first byte of an input picks the stream
//! ([`channel`]) and the codecs read the rest on it. The seed generator writes draft-20
//! seeds behind the selector of the stream each message travels on ([`selector_for`]).

use moq_wire::codec::{Announcer, Channel, Codec, Requests, StreamRequest};
use moq_wire::message::RequestKind;
use moq_wire::message::{ControlMessage, TrackNamespace};

/// Every kind of request, in the order a selector numbers them.
pub const KINDS: [RequestKind; 8] = [
    RequestKind::Subscribe,
    RequestKind::Fetch,
    RequestKind::Publish,
    RequestKind::PublishNamespace,
    RequestKind::SubscribeNamespace,
    RequestKind::TrackStatus,
    RequestKind::SubscribeUpdate,
    RequestKind::SubscribeTracks,
];

/// The Request ID of the stream a request-stream selector stands for.
const STREAM_REQUEST_ID: u64 = 4;

/// The stream `selector` stands for: either control stream, a new request stream, or the
/// stream of a request of any kind, ours (bit 7) or the peer's.
pub fn channel(selector: u8) -> Channel {
    match selector % 4 {
        0 => Channel::Control { from_server: false },
        1 => Channel::Control { from_server: true },
        2 => Channel::NewRequest,
        _ => Channel::Request(StreamRequest {
            request_id: STREAM_REQUEST_ID,
            kind: KINDS[usize::from(selector / 4) % KINDS.len()],
            ours: selector & 0x80 != 0,
        }),
    }
}

/// A selector under which `codec` decodes `bytes` (the encoding of `message`) back to
/// `message`, or failing that (a SETUP, whose versions the draft does not send) to anything.
pub fn selector_for(codec: &dyn Codec, message: &ControlMessage, bytes: &[u8]) -> Option<u8> {
    let decoded = |selector| {
        codec
            .decode_control(bytes, channel(selector), &AnyRequests)
            .ok()
            .filter(|(_, used)| *used == bytes.len())
    };
    (0..=u8::MAX)
        .find(|&selector| decoded(selector).is_some_and(|(m, _)| m == *message))
        .or_else(|| (0..=u8::MAX).find(|&selector| decoded(selector).is_some()))
}

/// A session that knows every request the bytes name: its kind follows from its ID (so
/// every kind comes up), every PUBLISH_NAMESPACE announced `fuzz/ns`, and every namespace was
/// announced by request 7.
pub struct AnyRequests;

impl Requests for AnyRequests {
    fn kind_of(&self, request_id: u64) -> Option<RequestKind> {
        Some(KINDS[(request_id % KINDS.len() as u64) as usize])
    }
    fn namespace_of(&self, _request_id: u64) -> Option<TrackNamespace> {
        Some(TrackNamespace::from_path("fuzz/ns"))
    }
    fn request_id_of(&self, _namespace: &TrackNamespace, _announcer: Announcer) -> Option<u64> {
        Some(7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_wire::draft20;
    use moq_wire::message::{NamespacePrefix, Parameters, PublishNamespaceOk, SubscribeNamespace};

    #[test]
    fn selectors_reach_every_stream() {
        let channels: std::collections::HashSet<Channel> = (0..=u8::MAX).map(channel).collect();
        // Two control streams, new requests, and every kind of request, ours or not.
        assert_eq!(channels.len(), 3 + KINDS.len() * 2);
    }

    #[test]
    fn a_seed_goes_behind_the_stream_it_travels_on() {
        let request = ControlMessage::SubscribeNamespace(SubscribeNamespace {
            request_id: 2,
            namespace_prefix: NamespacePrefix(TrackNamespace::from_path("anon")),
            params: Parameters::new(),
        });
        let answer = ControlMessage::PublishNamespaceOk(PublishNamespaceOk { request_id: 4 });
        for (message, expected) in [
            (request, Channel::NewRequest),
            (
                answer,
                Channel::Request(StreamRequest {
                    request_id: STREAM_REQUEST_ID,
                    kind: RequestKind::PublishNamespace,
                    ours: true,
                }),
            ),
        ] {
            let mut bytes = Vec::new();
            draft20::CODEC
                .encode_control(&message, &AnyRequests, &mut bytes)
                .unwrap();
            let selector = selector_for(&draft20::CODEC, &message, &bytes).unwrap();
            assert_eq!(channel(selector), expected, "{message:?}");
        }
    }
}
