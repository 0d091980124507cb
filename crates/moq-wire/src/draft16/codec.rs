//! Draft-16 behind the codec seam: its encoders and decoders, and its one kind of request
//! stream (SUBSCRIBE_NAMESPACE, which draft-16 sends on a bidirectional stream of its own).

use crate::codec::{
    Channel, Codec, ControlStreams, FetchWriter, Requests, Route, StreamEnd, StreamRequest,
};
use crate::message::{
    ControlMessage, DataStreamHeader, FetchObjectHeader, RequestKind, SubgroupObjectHeader,
};
use crate::{DecodeError, EncodeError};

use super::{
    ALPN, FetchObjectWriter, VERSION, decode_control, decode_data_stream_header,
    decode_subgroup_object, encode_control, encode_data_stream_header, encode_subgroup_object,
    message_name,
};

/// Draft-16's wire form.
#[derive(Debug, Clone, Copy)]
pub struct Draft16;

/// The draft-16 codec.
pub static CODEC: Draft16 = Draft16;

impl Codec for Draft16 {
    fn draft(&self) -> u32 {
        16
    }

    fn alpn(&self) -> &'static [u8] {
        ALPN
    }

    fn version(&self) -> u64 {
        VERSION
    }

    fn control_streams(&self) -> ControlStreams {
        ControlStreams::Bidirectional
    }

    fn grants_request_ids(&self) -> bool {
        true
    }

    fn has_request_streams(&self) -> bool {
        true
    }

    fn message_name(&self, msg: &ControlMessage) -> &'static str {
        message_name(msg)
    }

    fn route(&self, msg: &ControlMessage, _: &dyn Requests) -> Route {
        use ControlMessage as M;
        match msg {
            M::SubscribeNamespace(m) => Route::NewStream(StreamRequest {
                request_id: m.request_id,
                kind: RequestKind::SubscribeNamespace,
                ours: true,
            }),
            // The answer goes back on the request's stream, and ends it.
            M::SubscribeNamespaceOk(m) => Route::OnStream {
                request_id: m.request_id,
                finish: false,
            },
            M::SubscribeNamespaceError(m) => Route::OnStream {
                request_id: m.request_id,
                finish: true,
            },
            _ => Route::Control,
        }
    }

    fn encode_control(
        &self,
        msg: &ControlMessage,
        requests: &dyn Requests,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        encode_control(
            msg,
            &|ns, announcer| requests.request_id_of(ns, announcer),
            out,
        )
    }

    fn decode_control(
        &self,
        buf: &[u8],
        channel: Channel,
        requests: &dyn Requests,
    ) -> Result<(ControlMessage, usize), DecodeError> {
        let decoded = decode_control(buf, &|id| requests.kind_of(id), &|id| {
            requests.namespace_of(id)
        })?;
        match (channel, &decoded.0) {
            (Channel::Control { .. }, _) => Ok(decoded),
            (Channel::NewRequest, ControlMessage::SubscribeNamespace(_)) => Ok(decoded),
            // What answers our SUBSCRIBE_NAMESPACE comes back on its stream.
            (
                Channel::Request(StreamRequest { ours: true, .. }),
                ControlMessage::SubscribeNamespaceOk(_)
                | ControlMessage::SubscribeNamespaceError(_),
            ) => Ok(decoded),
            _ => Err(DecodeError::ProtocolViolation(
                "a draft-16 bidirectional stream other than the control stream carries only \
                 SUBSCRIBE_NAMESPACE and its answer",
            )),
        }
    }

    fn stream_ended(
        &self,
        _: StreamRequest,
        _: StreamEnd,
        _: &dyn Requests,
    ) -> Option<ControlMessage> {
        None
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
        self.encode_draft14(object, out)
    }
}
