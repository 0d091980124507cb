//! draft-ietf-moq-transport-14: the wire form the message model ([`crate::message`]) was
//! built on.
//!
//! Negotiated with ALPN [`ALPN`] on raw QUIC and version [`VERSION`] in CLIENT_SETUP /
//! SERVER_SETUP.

/// The version number offered and selected in the setup messages (0xff000000 + draft number).
pub const VERSION: u64 = 0xff00000e;

/// The TLS ALPN token for MoQ Transport over raw QUIC.
pub const ALPN: &[u8] = b"moq-00";

use crate::codec::{
    Channel, Codec, ControlStreams, FetchWriter, Requests, Route, StreamEnd, StreamRequest,
};
use crate::message::{
    ControlMessage, DataStreamHeader, FetchObjectHeader, ObjectStatus, SubgroupId,
    SubgroupObjectHeader,
};
use crate::varint::MAX_VARINT;
use crate::{DecodeError, EncodeError};

/// Draft-14's wire form: the model's own methods, on one bidirectional control stream.
#[derive(Debug, Clone, Copy)]
pub struct Draft14;

/// The draft-14 codec.
pub static CODEC: Draft14 = Draft14;

/// Refuses what the draft-14 encoders would panic on: integers beyond 62 bits.
fn check(values: &[u64]) -> Result<(), EncodeError> {
    match values.iter().find(|&&v| v > MAX_VARINT) {
        Some(&v) => Err(EncodeError::VarintOutOfRange(v)),
        None => Ok(()),
    }
}

/// Refuses a status on an object with a payload, which draft-14 cannot express.
fn check_status(payload_len: u64, status: ObjectStatus) -> Result<(), EncodeError> {
    if payload_len != 0 && status != ObjectStatus::Normal {
        return Err(EncodeError::Invalid("only empty objects carry a status"));
    }
    Ok(())
}

impl Codec for Draft14 {
    fn draft(&self) -> u32 {
        14
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
        false
    }

    fn message_name(&self, msg: &ControlMessage) -> &'static str {
        msg.name()
    }

    fn route(&self, msg: &ControlMessage, _: &dyn Requests) -> Route {
        match msg {
            // Draft-14 does not answer SUBSCRIBE_UPDATE.
            ControlMessage::SubscribeUpdateOk(_) => Route::Nowhere,
            _ => Route::Control,
        }
    }

    fn encode_control(
        &self,
        msg: &ControlMessage,
        _: &dyn Requests,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        msg.encode(out)
    }

    fn decode_control(
        &self,
        buf: &[u8],
        channel: Channel,
        _: &dyn Requests,
    ) -> Result<(ControlMessage, usize), DecodeError> {
        match channel {
            Channel::Control { .. } => ControlMessage::decode(buf),
            Channel::NewRequest | Channel::Request(_) => Err(DecodeError::ProtocolViolation(
                "draft-14 has one bidirectional stream, the control stream",
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
        match header {
            DataStreamHeader::Subgroup(h) => {
                let explicit = match h.subgroup_id {
                    SubgroupId::Explicit(id) => id,
                    SubgroupId::Zero | SubgroupId::FirstObjectId => 0,
                };
                check(&[h.track_alias, h.group_id, explicit])?;
            }
            DataStreamHeader::Fetch(h) => check(&[h.request_id])?,
        }
        header.encode(out);
        Ok(())
    }

    fn decode_stream_header(
        &self,
        buf: &[u8],
        _: &dyn Fn(u64) -> u8,
    ) -> Result<(DataStreamHeader, usize), DecodeError> {
        DataStreamHeader::decode(buf)
    }

    fn encode_subgroup_object(
        &self,
        header: &SubgroupObjectHeader,
        extensions_present: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        check(&[header.object_id_delta, header.payload_len])?;
        check_status(header.payload_len, header.status)?;
        if !extensions_present && !header.extensions.is_empty() {
            return Err(EncodeError::Invalid(
                "extensions on a subgroup stream without extensions",
            ));
        }
        header.encode(extensions_present, out);
        Ok(())
    }

    fn decode_subgroup_object(
        &self,
        buf: &[u8],
        extensions_present: bool,
    ) -> Result<(SubgroupObjectHeader, usize), DecodeError> {
        SubgroupObjectHeader::decode(buf, extensions_present)
    }

    fn fetch_writer(&self) -> Box<dyn FetchWriter> {
        Box::new(Draft14FetchWriter)
    }
}

/// Draft-14 fetch objects name their full location: nothing to remember between them.
struct Draft14FetchWriter;

impl FetchWriter for Draft14FetchWriter {
    fn encode(&mut self, object: &FetchObjectHeader, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        check(&[
            object.group_id,
            object.subgroup_id,
            object.object_id,
            object.payload_len,
        ])?;
        check_status(object.payload_len, object.status)?;
        object.encode(out);
        Ok(())
    }
}
