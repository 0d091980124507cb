//! The seam between a session and the drafts: every draft's wire form behind one interface.
//!
//! A session speaks the message model ([`crate::message`]) and never asks which draft is on
//! the wire. What it needs from the draft it negotiated is a [`Codec`]: control messages to
//! and from bytes, where each message travels ([`Route`]: drafts from 17 on put every
//! request on a bidirectional stream of its own, and some model messages become a stream
//! being closed), what a closed request stream means in model terms, and the data plane
//! (stream headers, object headers, fetch streams). Each draft module has one `CODEC`.
//!
//! The codec asks the session only what the bytes cannot say: what kind of request an ID
//! belongs to and which namespace a PUBLISH_NAMESPACE announced ([`Requests`]), and on which
//! stream a message arrived ([`Channel`]).

use std::fmt::Debug;

pub use crate::message::{Announcer, RequestKind};
use crate::message::{
    ControlMessage, DataStreamHeader, FetchObjectHeader, SubgroupObjectHeader, TrackNamespace,
};
use crate::{DecodeError, EncodeError};

/// What a codec may ask the session about its requests. A `None` where the draft needs an
/// answer is a protocol violation (decoding) or a refusal to encode, so the session should
/// answer for requests that ended but may still be referred to, too. Client and server
/// Request IDs differ in parity, so one table can serve both directions.
pub trait Requests {
    /// What our request `request_id` asked for.
    fn kind_of(&self, request_id: u64) -> Option<RequestKind>;
    /// The namespace a PUBLISH_NAMESPACE (ours or the peer's) with this ID announced.
    fn namespace_of(&self, request_id: u64) -> Option<TrackNamespace>;
    /// The ID of the PUBLISH_NAMESPACE that announced `namespace`.
    fn request_id_of(&self, namespace: &TrackNamespace, announcer: Announcer) -> Option<u64>;
}

/// A session that has made no request and heard of none (before SETUP is done).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRequests;

impl Requests for NoRequests {
    fn kind_of(&self, _: u64) -> Option<RequestKind> {
        None
    }
    fn namespace_of(&self, _: u64) -> Option<TrackNamespace> {
        None
    }
    fn request_id_of(&self, _: &TrackNamespace, _: Announcer) -> Option<u64> {
        None
    }
}

/// A request, as the bidirectional stream it travels on identifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamRequest {
    pub request_id: u64,
    pub kind: RequestKind,
    /// This endpoint made the request (and opened the stream).
    pub ours: bool,
}

/// Where a control message was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// The control stream. `from_server`: the peer is the server, which drafts that send
    /// one SETUP message for both sides need to know to decode it as the model's
    /// SERVER_SETUP rather than CLIENT_SETUP.
    Control { from_server: bool },
    /// The first message of a bidirectional stream the peer opened: a request.
    NewRequest,
    /// A later message on the stream of `request`.
    Request(StreamRequest),
}

/// Where a control message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// On the control stream.
    Control,
    /// It is a request, on a bidirectional stream of its own, opened for it.
    NewStream(StreamRequest),
    /// On the stream of request `request_id`; `finish` then ends our side of the stream
    /// (nothing else will follow on it).
    OnStream { request_id: u64, finish: bool },
    /// The message has no wire form of its own: it is said by ending our side of the
    /// stream of request `request_id`, with a reset (and STOP_SENDING) if `reset`, or a FIN.
    EndStream { request_id: u64, reset: bool },
    /// Not sent: the draft has no such message and nothing stands for it.
    Nowhere,
}

/// How the control streams of a session are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlStreams {
    /// One bidirectional stream, opened by the client: CLIENT_SETUP, then SERVER_SETUP on
    /// the way back, then every message not routed to a stream of its own.
    Bidirectional,
    /// Each endpoint opens one unidirectional stream and begins it with its SETUP.
    UnidirectionalPair,
}

/// How a request stream ended, as far as the peer's side of it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamEnd {
    /// The peer finished its side (FIN).
    Finished,
    /// The peer reset its side, or stopped ours (STOP_SENDING).
    Reset,
}

/// Writes the objects of one fetch stream, after its header: drafts from 16 on leave out
/// what an object shares with the one before, so a writer has state. One per stream.
pub trait FetchWriter: Send {
    /// Appends the next object's header; the caller then appends `payload_len` bytes of
    /// payload. On error nothing is written.
    fn encode(&mut self, object: &FetchObjectHeader, out: &mut Vec<u8>) -> Result<(), EncodeError>;
}

/// One draft's wire form of the message model, and the shape of its sessions.
pub trait Codec: Debug + Send + Sync {
    /// The draft's number (14, 16, 20, ...).
    fn draft(&self) -> u32;
    /// Its TLS ALPN token on raw QUIC.
    fn alpn(&self) -> &'static [u8];
    /// The version it stands for in the model's setup messages (0xff000000 + draft).
    fn version(&self) -> u64;
    fn control_streams(&self) -> ControlStreams;
    /// Whether a peer may only use the Request IDs granted to it (SETUP's MAX_REQUEST_ID,
    /// then MAX_REQUEST_ID messages). Without it, QUIC's stream limit bounds the requests.
    fn grants_request_ids(&self) -> bool;
    /// Whether some requests travel on bidirectional streams of their own (so Request IDs
    /// on the control stream may skip the IDs of those, and arrive out of order with them).
    fn has_request_streams(&self) -> bool;

    /// The name of the message `msg` is sent as, for logs.
    fn message_name(&self, msg: &ControlMessage) -> &'static str;
    /// Where `msg` goes.
    fn route(&self, msg: &ControlMessage, requests: &dyn Requests) -> Route;
    /// Appends `msg` as framed control message bytes. Fails without writing anything if the
    /// draft has no form for it or a field breaks the draft's rules.
    fn encode_control(
        &self,
        msg: &ControlMessage,
        requests: &dyn Requests,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError>;
    /// Decodes one framed control message from the front of `buf`, read on `channel`,
    /// returning it and the bytes used. [`DecodeError::Incomplete`] until all of it is there.
    fn decode_control(
        &self,
        buf: &[u8],
        channel: Channel,
        requests: &dyn Requests,
    ) -> Result<(ControlMessage, usize), DecodeError>;
    /// What it means, in model terms, that the peer's side of the stream of `request`
    /// ended `how` (a draft where streams end requests), if anything.
    fn stream_ended(
        &self,
        request: StreamRequest,
        how: StreamEnd,
        requests: &dyn Requests,
    ) -> Option<ControlMessage>;

    /// Appends a data stream header (always with its publisher priority byte).
    fn encode_stream_header(
        &self,
        header: &DataStreamHeader,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError>;
    /// Decodes the header at the start of a unidirectional stream. A subgroup that leaves
    /// its priority out gets `default_priority(track_alias)`.
    fn decode_stream_header(
        &self,
        buf: &[u8],
        default_priority: &dyn Fn(u64) -> u8,
    ) -> Result<(DataStreamHeader, usize), DecodeError>;
    /// Appends the header of an object on a subgroup stream.
    fn encode_subgroup_object(
        &self,
        header: &SubgroupObjectHeader,
        extensions_present: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError>;
    /// Decodes the header of an object on a subgroup stream.
    fn decode_subgroup_object(
        &self,
        buf: &[u8],
        extensions_present: bool,
    ) -> Result<(SubgroupObjectHeader, usize), DecodeError>;
    /// A writer for the objects of one fetch stream.
    fn fetch_writer(&self) -> Box<dyn FetchWriter>;
}

/// Publisher priority a subgroup has when its header leaves it out and the track announced
/// no default of its own (drafts from 16 on).
pub const DEFAULT_PUBLISHER_PRIORITY: u8 = 128;
