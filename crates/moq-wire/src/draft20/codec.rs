//! Draft-20 (and draft-22, which differs in one field) behind the codec seam: a pair of
//! unidirectional control streams, every request on a bidirectional stream of its own, and
//! request streams ended to cancel what earlier drafts cancelled with messages.

use crate::codec::{
    Channel, Codec, ControlStreams, FetchWriter, Requests, Route, StreamEnd, StreamRequest,
};
use crate::draft16::FetchObject;
use crate::message::{
    Announcer, ControlMessage, DataStreamHeader, FetchCancel, FetchObjectHeader, PublishDone,
    PublishNamespaceCancel, PublishNamespaceDone, RequestKind, SubgroupObjectHeader, Unsubscribe,
    publish_done_code, publish_namespace_error,
};
use crate::varint::MAX_VARINT;
use crate::{DecodeError, EncodeError};

use super::control::{Dialect, decode_control, encode_control, message_name};
use super::data::{
    FetchObjectWriter, decode_data_stream_header, decode_subgroup_object,
    encode_data_stream_header, encode_subgroup_object,
};

/// A draft of the draft-20 family.
#[derive(Debug, Clone, Copy)]
pub struct Draft20Family {
    draft: u32,
    alpn: &'static [u8],
    dialect: Dialect,
}

impl Draft20Family {
    /// Draft `draft` (ALPN `alpn`, `version` in the model), writing filters in `filter`.
    pub(crate) const fn new(
        draft: u32,
        alpn: &'static [u8],
        filter: super::FilterForm,
        version: u64,
    ) -> Draft20Family {
        Draft20Family {
            draft,
            alpn,
            dialect: Dialect { filter, version },
        }
    }
}

impl Codec for Draft20Family {
    fn draft(&self) -> u32 {
        self.draft
    }

    fn alpn(&self) -> &'static [u8] {
        self.alpn
    }

    fn version(&self) -> u64 {
        self.dialect.version
    }

    fn control_streams(&self) -> ControlStreams {
        ControlStreams::UnidirectionalPair
    }

    fn grants_request_ids(&self) -> bool {
        false
    }

    fn has_request_streams(&self) -> bool {
        true
    }

    fn message_name(&self, msg: &ControlMessage) -> &'static str {
        message_name(msg)
    }

    fn route(&self, msg: &ControlMessage, requests: &dyn Requests) -> Route {
        route(msg, requests)
    }

    fn encode_control(
        &self,
        msg: &ControlMessage,
        _: &dyn Requests,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        encode_control(msg, self.dialect, out)
    }

    fn decode_control(
        &self,
        buf: &[u8],
        channel: Channel,
        _: &dyn Requests,
    ) -> Result<(ControlMessage, usize), DecodeError> {
        decode_control(buf, channel, self.dialect)
    }

    fn stream_ended(
        &self,
        request: StreamRequest,
        how: StreamEnd,
        requests: &dyn Requests,
    ) -> Option<ControlMessage> {
        stream_ended(request, how, requests)
    }

    fn encode_stream_header(
        &self,
        header: &DataStreamHeader,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        encode_data_stream_header(header, None, out)
    }

    fn decode_stream_header(
        &self,
        buf: &[u8],
        default_priority: &dyn Fn(u64) -> u8,
    ) -> Result<(DataStreamHeader, usize), DecodeError> {
        decode_data_stream_header(buf, default_priority)
    }

    fn encode_subgroup_object(
        &self,
        header: &SubgroupObjectHeader,
        extensions_present: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        encode_subgroup_object(header, extensions_present, out)
    }

    fn decode_subgroup_object(
        &self,
        buf: &[u8],
        extensions_present: bool,
    ) -> Result<(SubgroupObjectHeader, usize), DecodeError> {
        decode_subgroup_object(buf, extensions_present)
    }

    fn fetch_writer(&self) -> Box<dyn FetchWriter> {
        Box::new(FetchObjectWriter::new())
    }
}

impl FetchWriter for FetchObjectWriter {
    fn encode(&mut self, object: &FetchObjectHeader, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        FetchObjectWriter::encode(self, &FetchObject::from_draft14(object.clone())?, out)
    }
}

/// Where each message of the model goes in draft-20.
pub(crate) fn route(msg: &ControlMessage, requests: &dyn Requests) -> Route {
    use ControlMessage as M;
    let new = |kind| {
        RequestKind::of(msg).map_or(Route::Nowhere, |(_, request_id)| {
            Route::NewStream(StreamRequest {
                request_id,
                kind,
                ours: true,
            })
        })
    };
    let answer = |request_id, finish| Route::OnStream { request_id, finish };
    match msg {
        M::ClientSetup(_) | M::ServerSetup(_) | M::Goaway(_) => Route::Control,
        M::Subscribe(_) => new(RequestKind::Subscribe),
        M::Fetch(_) => new(RequestKind::Fetch),
        M::Publish(_) => new(RequestKind::Publish),
        M::PublishNamespace(_) => new(RequestKind::PublishNamespace),
        M::SubscribeNamespace(_) => new(RequestKind::SubscribeNamespace),
        M::SubscribeTracks(_) => new(RequestKind::SubscribeTracks),
        M::TrackStatus(_) => new(RequestKind::TrackStatus),
        // Updates and their answers travel on the stream of the request they update.
        M::SubscribeUpdate(m) => answer(m.subscription_request_id, false),
        M::SubscribeUpdateOk(m) => answer(m.subscription_request_id, false),
        // Answers that leave the request open (a subscription, an announced namespace).
        M::SubscribeOk(m) => answer(m.request_id, false),
        M::PublishOk(m) => answer(m.request_id, false),
        M::PublishNamespaceOk(m) => answer(m.request_id, false),
        M::SubscribeNamespaceOk(m) => answer(m.request_id, false),
        // What ends a request, our side of its stream with it.
        M::PublishDone(m) => answer(m.request_id, true),
        M::FetchOk(m) => answer(m.request_id, true),
        M::TrackStatusOk(m) => answer(m.request_id, true),
        M::Redirect(m) => answer(m.request_id, true),
        M::SubscribeError(m) | M::TrackStatusError(m) => answer(m.request_id, true),
        M::FetchError(m) => answer(m.request_id, true),
        M::PublishError(m) => answer(m.request_id, true),
        M::PublishNamespaceError(m) => answer(m.request_id, true),
        M::SubscribeNamespaceError(m) => answer(m.request_id, true),
        // Cancelling is ending the stream.
        M::Unsubscribe(m) => Route::EndStream {
            request_id: m.request_id,
            reset: true,
        },
        M::FetchCancel(m) => Route::EndStream {
            request_id: m.request_id,
            reset: true,
        },
        M::PublishNamespaceDone(m) => requests
            .request_id_of(&m.namespace, Announcer::Local)
            .map_or(Route::Nowhere, |request_id| Route::EndStream {
                request_id,
                reset: false,
            }),
        M::PublishNamespaceCancel(m) => requests
            .request_id_of(&m.namespace, Announcer::Peer)
            .map_or(Route::Nowhere, |request_id| Route::EndStream {
                request_id,
                reset: true,
            }),
        // No request flow control, and no namespace subscriptions of ours to end.
        M::MaxRequestId(_) | M::RequestsBlocked(_) | M::UnsubscribeNamespace(_) => Route::Nowhere,
    }
}

/// What the end of a request stream means in draft-20 (a FIN is not a cancellation).
pub(crate) fn stream_ended(
    request: StreamRequest,
    how: StreamEnd,
    requests: &dyn Requests,
) -> Option<ControlMessage> {
    use ControlMessage as M;
    let id = request.request_id;
    let reset = how == StreamEnd::Reset;
    match (request.ours, request.kind) {
        (false, RequestKind::Subscribe) if reset => {
            Some(M::Unsubscribe(Unsubscribe { request_id: id }))
        }
        (false, RequestKind::Fetch) if reset => {
            Some(M::FetchCancel(FetchCancel { request_id: id }))
        }
        (false, RequestKind::PublishNamespace) => requests
            .namespace_of(id)
            .map(|namespace| M::PublishNamespaceDone(PublishNamespaceDone { namespace })),
        // Our subscription's stream ending is the end of the subscription: a second end
        // after its PUBLISH_DONE changes nothing.
        (true, RequestKind::Subscribe) => Some(M::PublishDone(PublishDone {
            request_id: id,
            status: publish_done_code::INTERNAL_ERROR,
            stream_count: MAX_VARINT,
            reason: "the publisher ended the subscription's stream".into(),
        })),
        (true, RequestKind::PublishNamespace) => requests.namespace_of(id).map(|namespace| {
            M::PublishNamespaceCancel(PublishNamespaceCancel {
                namespace,
                code: publish_namespace_error::INTERNAL_ERROR,
                reason: "the peer ended the PUBLISH_NAMESPACE stream".into(),
            })
        }),
        _ => None,
    }
}
