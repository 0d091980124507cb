//! Where control messages travel: the session's side of the codec seam.
//!
//! The session sends and receives messages of the model only. Its draft's codec says where
//! each one goes ([`Route`]): the control stream (one bidirectional stream, or from draft-17
//! on a pair of unidirectional ones), or a bidirectional stream of the request it belongs
//! to, which is opened for the request and ended to cancel it. This module carries that out:
//! one writer task owns every stream we send control messages on, one reader task per
//! stream we receive them on feeds the session's control loop, and the end of a request
//! stream is turned back into model terms by the codec ([`WireCodec::stream_ended`]).

use std::collections::HashMap;
use std::sync::Arc;

use moq_wire::codec::{
    Channel, Codec as WireCodec, ControlStreams, NoRequests, Requests, Route, StreamEnd,
    StreamRequest,
};
use moq_wire::message::{ControlMessage, RequestKind, reset_code};
use tokio::sync::{mpsc, oneshot};

use crate::error::SessionError;

/// The session's codec and its requests, as the control tasks use them.
#[derive(Clone)]
pub(crate) struct Codec {
    pub wire: &'static dyn WireCodec,
    pub book: Arc<dyn Requests + Send + Sync>,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "draft-{}", self.wire.draft())
    }
}

impl Codec {
    /// Before SETUP is done: no request exists yet.
    pub fn setup(codec: &'static dyn WireCodec) -> Codec {
        Codec {
            wire: codec,
            book: Arc::new(NoRequests),
        }
    }

    pub fn encode(&self, msg: &ControlMessage, out: &mut Vec<u8>) -> Result<(), SessionError> {
        self.wire
            .encode_control(msg, self.book.as_ref(), out)
            .map_err(|e| {
                SessionError::violation(format!(
                    "cannot encode {}: {e}",
                    self.wire.message_name(msg)
                ))
            })
    }
}

/// Reads whole control messages from one stream.
pub struct ControlReader {
    recv: quinn::RecvStream,
    buf: Vec<u8>,
    codec: Codec,
    channel: Channel,
}

impl ControlReader {
    /// A reader of the draft-14 control stream a client opened to a server.
    pub fn new(recv: quinn::RecvStream) -> ControlReader {
        ControlReader::with_codec(
            recv,
            Codec::setup(&moq_wire::draft14::CODEC),
            Channel::Control { from_server: true },
        )
    }

    /// From now on, decode with `codec` (once the session can look up its requests).
    pub(crate) fn set_codec(&mut self, codec: Codec) {
        self.codec = codec;
    }

    pub(crate) fn with_codec(
        recv: quinn::RecvStream,
        codec: Codec,
        channel: Channel,
    ) -> ControlReader {
        ControlReader {
            recv,
            buf: Vec::new(),
            codec,
            channel,
        }
    }

    /// The next whole message; [`SessionError::ControlClosed`] once the stream ends between
    /// messages, an error if a message is malformed or the stream ends inside one.
    pub async fn read(&mut self) -> Result<ControlMessage, SessionError> {
        match self.next().await? {
            Some(msg) => Ok(msg),
            None => Err(SessionError::ControlClosed),
        }
    }

    /// The next whole message, `None` at a FIN between messages.
    async fn next(&mut self) -> Result<Option<ControlMessage>, SessionError> {
        loop {
            if !self.buf.is_empty() {
                let codec = &self.codec;
                match codec
                    .wire
                    .decode_control(&self.buf, self.channel, codec.book.as_ref())
                {
                    Ok((msg, used)) => {
                        self.buf.drain(..used);
                        return Ok(Some(msg));
                    }
                    Err(e) if e.is_incomplete() => {}
                    Err(e) => return Err(SessionError::decode(e)),
                }
            }
            let mut chunk = [0u8; 4096];
            match self.recv.read(&mut chunk).await {
                Ok(Some(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Ok(None) if self.buf.is_empty() => return Ok(None),
                Ok(None) => {
                    return Err(SessionError::violation(
                        "a stream ended inside a control message",
                    ));
                }
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
    codec.encode(msg, &mut buf)?;
    write_bytes(send, &buf).await
}

async fn write_bytes(send: &mut quinn::SendStream, bytes: &[u8]) -> Result<(), SessionError> {
    send.write_all(bytes).await.map_err(|e| match e {
        quinn::WriteError::ConnectionLost(e) => SessionError::Connection(e),
        _ => SessionError::ControlClosed,
    })
}

/// The control streams of a session whose SETUP exchange is done.
pub(crate) struct Established {
    pub send: quinn::SendStream,
    pub reader: ControlReader,
    /// The peer's setup message.
    pub peer_setup: ControlMessage,
}

/// The client's side of SETUP: opens the control stream(s), sends `hello`, reads the answer.
pub(crate) async fn client_setup(
    conn: &quinn::Connection,
    codec: &Codec,
    hello: &ControlMessage,
) -> Result<Established, SessionError> {
    let channel = Channel::Control { from_server: true };
    let (mut send, recv) = match codec.wire.control_streams() {
        ControlStreams::Bidirectional => {
            let (send, recv) = conn.open_bi().await?;
            (send, Some(recv))
        }
        ControlStreams::UnidirectionalPair => (conn.open_uni().await?, None),
    };
    write(&mut send, codec, hello).await?;
    let recv = match recv {
        Some(recv) => recv,
        None => conn.accept_uni().await?,
    };
    let mut reader = ControlReader::with_codec(recv, codec.clone(), channel);
    let peer_setup = reader.read().await?;
    Ok(Established {
        send,
        reader,
        peer_setup,
    })
}

/// The server's side of SETUP: accepts the control stream(s), reads the client's setup and
/// sends what `answer` makes of it.
pub(crate) async fn server_setup(
    conn: &quinn::Connection,
    codec: &Codec,
    answer: impl FnOnce(&ControlMessage) -> Result<ControlMessage, SessionError>,
) -> Result<Established, SessionError> {
    let channel = Channel::Control { from_server: false };
    let (send, recv) = match codec.wire.control_streams() {
        ControlStreams::Bidirectional => {
            let (send, recv) = conn.accept_bi().await?;
            (Some(send), recv)
        }
        // The client's first unidirectional stream is its control stream.
        ControlStreams::UnidirectionalPair => (None, conn.accept_uni().await?),
    };
    let mut reader = ControlReader::with_codec(recv, codec.clone(), channel);
    let peer_setup = reader.read().await?;
    let reply = answer(&peer_setup)?;
    let mut send = match send {
        Some(send) => send,
        None => conn.open_uni().await?,
    };
    write(&mut send, codec, &reply).await?;
    Ok(Established {
        send,
        reader,
        peer_setup,
    })
}

/// A control message the session reads, and where it came from.
#[derive(Debug)]
pub(crate) struct Inbound {
    pub msg: ControlMessage,
    /// Read on the control stream, in order with every other request there.
    pub ordered: bool,
}

/// Control messages read on any stream, or why reading stopped.
pub(crate) type InboundSender = mpsc::Sender<Result<Inbound, SessionError>>;

/// What the writer task is asked to do.
#[derive(Debug)]
pub(crate) enum Outbound {
    Message(ControlMessage),
    /// A request stream the peer opened: answers to `request_id` go on `send`; `stop` tells
    /// its reader to stop reading (when we cancel the request).
    Adopt {
        request_id: u64,
        send: quinn::SendStream,
        stop: oneshot::Sender<()>,
    },
    /// The request of this stream is over on the peer's side: finish ours.
    Release(u64),
}

/// Our side of a request stream.
struct RequestStream {
    send: quinn::SendStream,
    /// Dropping it lets the reader go on; sending stops the reader (STOP_SENDING).
    stop: oneshot::Sender<()>,
}

fn code(v: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(v).unwrap_or(quinn::VarInt::from_u32(0))
}

/// The writer task: every message of the session goes through here, to the stream its
/// route names. Ends when the session drops its queue or a write to the control stream
/// fails (the error is returned, to close the session with). It hands the readers of the
/// request streams it opens a way back to its queue, but holds only a weak one itself: a
/// queue it kept open would keep it, its streams and the connection alive for ever.
pub(crate) async fn write_control(
    conn: quinn::Connection,
    mut control: quinn::SendStream,
    codec: Codec,
    (queue, mut rx): (mpsc::WeakSender<Outbound>, mpsc::Receiver<Outbound>),
    inbound: InboundSender,
) -> Result<(), SessionError> {
    // Control messages go before any object data.
    let _ = control.set_priority(i32::MAX);
    let mut streams: HashMap<u64, RequestStream> = HashMap::new();
    while let Some(outbound) = rx.recv().await {
        let msg = match outbound {
            Outbound::Message(msg) => msg,
            Outbound::Adopt {
                request_id,
                send,
                stop,
            } => {
                let _ = send.set_priority(i32::MAX);
                streams.insert(request_id, RequestStream { send, stop });
                continue;
            }
            Outbound::Release(request_id) => {
                if let Some(mut stream) = streams.remove(&request_id) {
                    let _ = stream.send.finish();
                }
                continue;
            }
        };
        match codec.wire.route(&msg, codec.book.as_ref()) {
            Route::Control => write(&mut control, &codec, &msg).await?,
            Route::Nowhere => {}
            Route::NewStream(request) => {
                let (mut send, recv) = conn.open_bi().await?;
                let _ = send.set_priority(i32::MAX);
                write(&mut send, &codec, &msg).await?;
                let (stop, stopped) = oneshot::channel();
                let peer_stop = stop_sending(&send);
                streams.insert(request.request_id, RequestStream { send, stop });
                let Some(queue) = queue.upgrade() else {
                    // The session is gone; nobody would read the answer.
                    continue;
                };
                let reader =
                    ControlReader::with_codec(recv, codec.clone(), Channel::Request(request));
                tokio::spawn(read_request_stream(
                    reader,
                    request,
                    stopped,
                    peer_stop,
                    queue,
                    inbound.clone(),
                ));
            }
            Route::OnStream { request_id, finish } => {
                let mut bytes = Vec::new();
                codec.encode(&msg, &mut bytes)?;
                // A stream the peer already reset takes nothing more; only the control
                // stream failing, or the connection, ends the session.
                let Some(stream) = streams.get_mut(&request_id) else {
                    continue;
                };
                let written = write_bytes(&mut stream.send, &bytes).await;
                if let Err(err @ SessionError::Connection(_)) = written {
                    return Err(err);
                }
                if (written.is_err() || finish)
                    && let Some(mut stream) = streams.remove(&request_id)
                {
                    let _ = stream.send.finish();
                }
            }
            Route::EndStream { request_id, reset } => {
                if let Some(mut stream) = streams.remove(&request_id) {
                    if reset {
                        let _ = stream.send.reset(code(reset_code::CANCELLED));
                        let _ = stream.stop.send(());
                    } else {
                        let _ = stream.send.finish();
                    }
                }
            }
        }
    }
    Ok(())
}

/// Reads the control stream for the rest of the session.
pub(crate) async fn read_control(mut reader: ControlReader, inbound: InboundSender) {
    loop {
        let read = reader
            .read()
            .await
            .map(|msg| Inbound { msg, ordered: true });
        let failed = read.is_err();
        if inbound.send(read).await.is_err() || failed {
            return;
        }
    }
}

/// Resolves to the code of the peer's STOP_SENDING on `send`, or to `None` once that
/// direction ended otherwise (finished and acknowledged, reset by us, or the connection
/// gone).
fn stop_sending(send: &quinn::SendStream) -> impl Future<Output = Option<quinn::VarInt>> + use<> {
    let stopped = send.stopped();
    async move { stopped.await.ok().flatten() }
}

/// Reads the rest of a request stream: its answers (ours) or its updates (the peer's), then
/// what its end means. Our side of the stream is finished when the request is over: at
/// its end for ours, at a reset for the peer's (whose FIN only says no update follows).
/// The peer may also cancel with STOP_SENDING on our side (`peer_stop`, from
/// [`stop_sending`]): that is a reset too, whether or not its own side had ended.
async fn read_request_stream(
    mut reader: ControlReader,
    request: StreamRequest,
    stopped: oneshot::Receiver<()>,
    peer_stop: impl Future<Output = Option<quinn::VarInt>>,
    outbound: mpsc::Sender<Outbound>,
    inbound: InboundSender,
) {
    // Only our cancelling fires this; the writer dropping its end does not.
    let stopped = async move {
        if stopped.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let mut stopped = std::pin::pin!(stopped);
    let mut peer_stop = std::pin::pin!(peer_stop);
    let mut watching_peer = true;
    let end = loop {
        let next = tokio::select! {
            next = reader.next() => next,
            // We cancelled the request: its answers are of no interest any more.
            () = &mut stopped => {
                let _ = reader.recv.stop(code(reset_code::CANCELLED));
                return;
            }
            stop = &mut peer_stop, if watching_peer => {
                watching_peer = false;
                match stop {
                    Some(_) => break StreamEnd::Reset,
                    None => continue,
                }
            }
        };
        match next {
            Ok(Some(msg)) => {
                if inbound
                    .send(Ok(Inbound {
                        msg,
                        ordered: false,
                    }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            // A peer's request stays open on our side until we end it, and may still be
            // cancelled with STOP_SENDING (moq-relay cancels a subscription so).
            Ok(None) if !request.ours && watching_peer => match peer_stop.await {
                Some(_) => break StreamEnd::Reset,
                None => break StreamEnd::Finished,
            },
            Ok(None) => break StreamEnd::Finished,
            Err(SessionError::ControlClosed) => break StreamEnd::Reset,
            Err(err) => {
                let _ = inbound.send(Err(err)).await;
                return;
            }
        }
    };
    if request.ours || end == StreamEnd::Reset {
        let _ = outbound.send(Outbound::Release(request.request_id)).await;
    }
    let codec = &reader.codec;
    if let Some(msg) = codec.wire.stream_ended(request, end, codec.book.as_ref()) {
        let _ = inbound
            .send(Ok(Inbound {
                msg,
                ordered: false,
            }))
            .await;
    }
}

/// Accepts the bidirectional streams the peer opens for its requests, for the rest of the
/// session. A draft without request streams allows none beyond the control stream.
pub(crate) async fn accept_request_streams(
    conn: quinn::Connection,
    codec: Codec,
    outbound: mpsc::Sender<Outbound>,
    inbound: InboundSender,
) {
    while let Ok((send, recv)) = conn.accept_bi().await {
        if !codec.wire.has_request_streams() {
            let _ = inbound
                .send(Err(SessionError::violation(
                    "a second bidirectional stream",
                )))
                .await;
            return;
        }
        tokio::spawn(read_new_request(
            ControlReader::with_codec(recv, codec.clone(), Channel::NewRequest),
            send,
            outbound.clone(),
            inbound.clone(),
        ));
    }
}

/// Reads the request a peer's stream begins with, hands the stream's sending side to the
/// writer task, and reads on.
async fn read_new_request(
    mut reader: ControlReader,
    send: quinn::SendStream,
    outbound: mpsc::Sender<Outbound>,
    inbound: InboundSender,
) {
    let msg = match reader.next().await {
        Ok(Some(msg)) => msg,
        // Reset before its request arrived: nothing to answer.
        Ok(None) | Err(SessionError::ControlClosed) | Err(SessionError::Connection(_)) => return,
        Err(err) => {
            let _ = inbound.send(Err(err)).await;
            return;
        }
    };
    let Some((kind, request_id)) = RequestKind::of(&msg) else {
        let _ = inbound
            .send(Err(SessionError::violation(
                "a request stream does not begin with a request",
            )))
            .await;
        return;
    };
    let request = StreamRequest {
        request_id,
        kind,
        ours: false,
    };
    let (stop, stopped) = oneshot::channel();
    let peer_stop = stop_sending(&send);
    // Queued before the request reaches the session, so its answer finds the stream.
    if outbound
        .send(Outbound::Adopt {
            request_id,
            send,
            stop,
        })
        .await
        .is_err()
    {
        return;
    }
    if inbound
        .send(Ok(Inbound {
            msg,
            ordered: false,
        }))
        .await
        .is_err()
    {
        return;
    }
    reader.channel = Channel::Request(request);
    read_request_stream(reader, request, stopped, peer_stop, outbound, inbound).await;
}
