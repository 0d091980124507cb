//! Framing of control messages over the bidirectional control stream, in the session's draft.

use std::sync::Arc;

use moq_wire::draft16::{self, Announcer, RequestKind};
use moq_wire::message::{ControlMessage, TrackNamespace};
use moq_wire::{DecodeError, EncodeError};

use crate::error::SessionError;
use crate::version::Version;

/// What draft-16's codec must look up in the session: its replies and namespace messages
/// name a request only by ID.
pub(crate) trait RequestBook: Send + Sync {
    /// What our request `request_id` asked for.
    fn kind_of(&self, request_id: u64) -> Option<RequestKind>;
    /// The namespace a PUBLISH_NAMESPACE (ours or the peer's) with this ID announced.
    fn namespace_of(&self, request_id: u64) -> Option<TrackNamespace>;
    /// The ID of the PUBLISH_NAMESPACE that announced `namespace`.
    fn request_id_of(&self, namespace: &TrackNamespace, announcer: Announcer) -> Option<u64>;
}

/// A session before SETUP has made no request.
struct NoRequests;

impl RequestBook for NoRequests {
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

/// Control messages to and from bytes in one draft.
#[derive(Clone)]
pub(crate) struct Codec {
    version: Version,
    book: Arc<dyn RequestBook>,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("version", &self.version)
            .finish()
    }
}

impl Codec {
    /// A codec for SETUP, before any request exists.
    pub fn setup(version: Version) -> Codec {
        Codec {
            version,
            book: Arc::new(NoRequests),
        }
    }

    pub fn with_book(version: Version, book: Arc<dyn RequestBook>) -> Codec {
        Codec { version, book }
    }

    pub fn encode(&self, msg: &ControlMessage, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self.version {
            Version::Draft14 => msg.encode(out),
            Version::Draft16 => draft16::encode_control(
                msg,
                &|ns, announcer| self.book.request_id_of(ns, announcer),
                out,
            ),
        }
    }

    pub fn decode(&self, buf: &[u8]) -> Result<(ControlMessage, usize), DecodeError> {
        match self.version {
            Version::Draft14 => ControlMessage::decode(buf),
            Version::Draft16 => draft16::decode_control(buf, &|id| self.book.kind_of(id), &|id| {
                self.book.namespace_of(id)
            }),
        }
    }
}

/// Reads whole control messages from the control stream.
pub struct ControlReader {
    recv: quinn::RecvStream,
    buf: Vec<u8>,
    codec: Codec,
}

impl ControlReader {
    /// A reader of draft-14 messages.
    pub fn new(recv: quinn::RecvStream) -> ControlReader {
        ControlReader::with_codec(recv, Codec::setup(Version::Draft14))
    }

    pub(crate) fn with_codec(recv: quinn::RecvStream, codec: Codec) -> ControlReader {
        ControlReader {
            recv,
            buf: Vec::new(),
            codec,
        }
    }

    /// From now on, decode with `codec` (once the session can look up its requests).
    pub(crate) fn set_codec(&mut self, codec: Codec) {
        self.codec = codec;
    }

    /// The next whole message; an error once the stream ends or a message is malformed.
    pub async fn read(&mut self) -> Result<ControlMessage, SessionError> {
        loop {
            if !self.buf.is_empty() {
                match self.codec.decode(&self.buf) {
                    Ok((msg, used)) => {
                        self.buf.drain(..used);
                        return Ok(msg);
                    }
                    Err(e) if e.is_incomplete() => {}
                    Err(e) => return Err(SessionError::decode(e)),
                }
            }
            let mut chunk = [0u8; 4096];
            match self.recv.read(&mut chunk).await {
                Ok(Some(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Ok(None) => return Err(SessionError::ControlClosed),
                Err(quinn::ReadError::ConnectionLost(e)) => return Err(e.into()),
                Err(_) => return Err(SessionError::ControlClosed),
            }
        }
    }
}

/// Writes one control message.
pub(crate) async fn write(
    send: &mut quinn::SendStream,
    codec: &Codec,
    msg: &ControlMessage,
) -> Result<(), SessionError> {
    let mut buf = Vec::new();
    codec
        .encode(msg, &mut buf)
        .map_err(|e| SessionError::violation(format!("cannot encode {}: {e}", msg.name())))?;
    send.write_all(&buf).await.map_err(|e| match e {
        quinn::WriteError::ConnectionLost(e) => SessionError::Connection(e),
        _ => SessionError::ControlClosed,
    })
}
