//! Subscribing: SUBSCRIBE requests, their replies, and reading objects from the data
//! streams the publisher opens.
//!
//! Memory is bounded end to end. Every byte read from a data stream takes a permit of the
//! session's receive budget, held until the consumer drops the [`Object`] it ended up in;
//! each subscription queues a bounded number of events. When the consumer stops pulling,
//! readers stop reading, QUIC's flow control stops the publisher, and whatever a hostile
//! publisher sends costs at most the budget plus the connection's receive window.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use moq_wire::codec::{Codec, DEFAULT_PUBLISHER_PRIORITY};
use moq_wire::message::{
    self as wire, ControlMessage, DataStreamHeader, FilterType, GroupOrder, Location, ObjectStatus,
    Parameters, TrackNamespace, session_error,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};

use crate::error::{Redirected, RequestError, SessionError};
use crate::inner::{Inner, Outgoing, REPLY_TIMEOUT, Session};
use crate::received::{Object, TrackEvent};
use crate::track::lock;

/// How long a data stream may wait for the SUBSCRIBE_OK that names its track alias.
const ALIAS_WAIT: Duration = Duration::from_secs(2);
/// How long after PUBLISH_DONE late streams may still arrive.
const DONE_GRACE: Duration = Duration::from_secs(2);
/// Largest object payload accepted: anything larger could never fit the budget.
const MAX_OBJECT_SIZE: u64 = 8 << 20;
/// Most bytes read from a stream at once.
const READ_CHUNK: usize = 64 << 10;
/// Most bytes read at once while the budget has less than [`READ_CHUNK`] left.
const SCARCE_READ_CHUNK: usize = 1 << 10;
/// Events a subscription queues for its consumer before its streams stop being read.
const EVENT_QUEUE: usize = 64;

/// What a subscription asks for.
#[derive(Debug, Clone)]
pub struct SubscribeOptions {
    /// Subscriber priority (lower is more important).
    pub priority: u8,
    pub group_order: GroupOrder,
    pub filter: FilterType,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            priority: 128,
            group_order: GroupOrder::Publisher,
            filter: FilterType::NextGroupStart,
        }
    }
}

/// A live subscription. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    session: Session,
    request_id: u64,
    pub largest: Option<Location>,
    pub group_order: GroupOrder,
    events: mpsc::Receiver<TrackEvent>,
}

impl Subscription {
    /// The next event; `None` once the track ended or the session closed.
    pub async fn next(&mut self) -> Option<TrackEvent> {
        self.events.recv().await
    }

    /// The next event if one is waiting: `Some(None)` once the track ended or the session
    /// closed, `None` when nothing is there yet.
    pub fn try_next(&mut self) -> Option<Option<TrackEvent>> {
        match self.events.try_recv() {
            Ok(event) => Some(Some(event)),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => Some(None),
        }
    }

    /// Stops receiving every group older than `group` (STOP_SENDING on their streams,
    /// now and for streams that open later).
    pub fn stop_groups_before(&self, group: u64) {
        if let Some(sub) = lock(&self.session.inner.state)
            .outgoing
            .get(&self.request_id)
        {
            sub.stop_before.send_if_modified(|g| {
                let raise = group > *g;
                if raise {
                    *g = group;
                }
                raise
            });
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = lock(&self.session.inner.state);
        if state.outgoing.remove(&self.request_id).is_some() {
            state.aliases.retain(|_, id| *id != self.request_id);
            drop(state);
            self.session
                .inner
                .send(ControlMessage::Unsubscribe(wire::Unsubscribe {
                    request_id: self.request_id,
                }));
        }
    }
}

impl Session {
    /// Subscribes to a track and waits for SUBSCRIBE_OK.
    pub async fn subscribe(
        &self,
        namespace: TrackNamespace,
        track: &str,
        options: SubscribeOptions,
    ) -> Result<Subscription, SessionError> {
        let inner = &self.inner;
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (reply_tx, reply_rx) = oneshot::channel();
        let request_id = inner
            .request(|request_id, state| {
                state.outgoing.insert(
                    request_id,
                    Outgoing {
                        events: events_tx,
                        stop_before: watch::channel(0).0,
                        reply: Some(reply_tx),
                        streams_open: 0,
                        streams_done: 0,
                        done: None,
                    },
                );
                ControlMessage::Subscribe(wire::Subscribe {
                    request_id,
                    namespace,
                    track_name: track.as_bytes().to_vec(),
                    subscriber_priority: options.priority,
                    group_order: options.group_order,
                    forward: true,
                    filter: options.filter,
                    params: Parameters::default(),
                    fill: None,
                })
            })
            .await?;
        // From here on, dropping `sub` cleans up (and unsubscribes) whatever happens.
        let mut sub = Subscription {
            session: self.clone(),
            request_id,
            largest: None,
            group_order: options.group_order,
            events,
        };
        let ok = match tokio::time::timeout(REPLY_TIMEOUT, reply_rx).await {
            Ok(Ok(Ok(ok))) => ok,
            Ok(Ok(Err(refused))) => {
                // The publisher already forgot it: no UNSUBSCRIBE.
                lock(&inner.state).outgoing.remove(&request_id);
                return Err(refused);
            }
            Ok(Err(_)) => return Err(self.close_reason().unwrap_or(SessionError::ControlClosed)),
            Err(_) => return Err(SessionError::Timeout("waiting for SUBSCRIBE_OK")),
        };
        sub.largest = ok.largest;
        sub.group_order = ok.group_order;
        Ok(sub)
    }
}

pub(crate) fn subscribe_ok(inner: &Inner, msg: wire::SubscribeOk) -> Result<(), SessionError> {
    let mut state = lock(&inner.state);
    let Some(reply) = state
        .outgoing
        .get_mut(&msg.request_id)
        .and_then(|o| o.reply.take())
    else {
        // Already unsubscribed, or a reply to nothing: the latter is a violation.
        return if state.was_requested(msg.request_id) {
            Ok(())
        } else {
            Err(SessionError::violation(
                "SUBSCRIBE_OK for an unknown request",
            ))
        };
    };
    if state
        .aliases
        .insert(msg.track_alias, msg.request_id)
        .is_some_and(|other| other != msg.request_id)
    {
        return Err(SessionError::Protocol {
            code: session_error::DUPLICATE_TRACK_ALIAS,
            reason: format!("track alias {} already in use", msg.track_alias),
        });
    }
    drop(state);
    inner.notify();
    let _ = reply.send(Ok(msg));
    Ok(())
}

pub(crate) fn subscribe_error(inner: &Inner, msg: wire::SubscribeError) {
    let mut state = lock(&inner.state);
    if let Some(reply) = state
        .outgoing
        .get_mut(&msg.request_id)
        .and_then(|o| o.reply.take())
    {
        state.outgoing.remove(&msg.request_id);
        let _ = reply.send(Err(RequestError {
            what: "SUBSCRIBE",
            code: msg.code,
            reason: msg.reason,
        }
        .into()));
    }
}

/// The peer refused one of our SUBSCRIBEs with REDIRECT.
pub(crate) fn redirect(inner: &Inner, msg: wire::Redirect) {
    let mut state = lock(&inner.state);
    if let Some(reply) = state
        .outgoing
        .get_mut(&msg.request_id)
        .and_then(|o| o.reply.take())
    {
        state.outgoing.remove(&msg.request_id);
        let _ = reply.send(Err(SessionError::Redirected(Redirected {
            url: (!msg.connect_uri.is_empty()).then_some(msg.connect_uri),
            target: msg.target,
            reason: msg.reason,
        })));
    }
}

pub(crate) fn publish_done(inner: &Arc<Inner>, msg: wire::PublishDone) {
    let mut state = lock(&inner.state);
    let Some(sub) = state.outgoing.get_mut(&msg.request_id) else {
        return;
    };
    // Only the first end counts (a draft that ends a subscription with its stream may
    // report the end of the stream after PUBLISH_DONE).
    if sub.done.is_some() {
        return;
    }
    // Ended before it was accepted: the SUBSCRIBE failed.
    if let Some(reply) = sub.reply.take() {
        state.outgoing.remove(&msg.request_id);
        let _ = reply.send(Err(RequestError {
            what: "SUBSCRIBE",
            code: msg.status,
            reason: msg.reason,
        }
        .into()));
        return;
    }
    sub.done = Some((msg.stream_count, msg.status, msg.reason));
    drop(state);
    finish_if_done(inner, msg.request_id, false);
    // Streams that were reset before their header never show up: end anyway after a grace.
    let inner = inner.clone();
    tokio::spawn(async move {
        tokio::time::sleep(DONE_GRACE).await;
        finish_if_done(&inner, msg.request_id, true);
    });
}

/// Emits `Ended` once PUBLISH_DONE arrived and all announced streams were processed.
fn finish_if_done(inner: &Inner, request_id: u64, grace_expired: bool) {
    let mut state = lock(&inner.state);
    let Some(sub) = state.outgoing.get(&request_id) else {
        return;
    };
    let Some((count, _, _)) = &sub.done else {
        return;
    };
    let all_seen = sub.streams_done >= *count && sub.streams_open == 0;
    if !(all_seen || grace_expired && sub.streams_open == 0) {
        return;
    }
    let Some(Outgoing {
        events,
        done: Some((_, status, reason)),
        ..
    }) = state.outgoing.remove(&request_id)
    else {
        return;
    };
    state.aliases.retain(|_, id| *id != request_id);
    drop(state);
    // After every event already queued; the consumer is not waited for here.
    tokio::spawn(async move {
        let _ = events.send(TrackEvent::Ended { status, reason }).await;
    });
}

/// The connection is gone: wake every pending request. A subscription whose PUBLISH_DONE
/// arrived has ended, whether or not the streams it announced came before the close: a
/// publisher finishing its broadcast closes as soon as its subscriptions are done.
pub(crate) fn session_closed(inner: &Inner) {
    let mut state = lock(&inner.state);
    let ended: Vec<_> = state
        .outgoing
        .drain()
        .filter_map(|(_, sub)| {
            sub.done
                .map(|(_, status, reason)| (sub.events, status, reason))
        })
        .collect();
    state.aliases.clear();
    drop(state);
    for (events, status, reason) in ended {
        // After every event already queued; the consumer is not waited for here.
        tokio::spawn(async move {
            let _ = events.send(TrackEvent::Ended { status, reason }).await;
        });
    }
}

pub(crate) async fn accept_data_streams(inner: Arc<Inner>) {
    while let Ok(recv) = inner.conn.accept_uni().await {
        tokio::spawn(read_data_stream(inner.clone(), recv));
    }
    session_closed(&inner);
}

enum StreamEnd {
    Finished,
    Reset,
    /// The session must close with this error.
    Violation(SessionError),
}

struct StreamReader {
    recv: quinn::RecvStream,
    buf: BytesMut,
    fin: bool,
    budget: Arc<Semaphore>,
    /// Permits for the bytes in `buf`.
    held: Option<OwnedSemaphorePermit>,
}

impl StreamReader {
    fn new(recv: quinn::RecvStream, budget: Arc<Semaphore>) -> StreamReader {
        StreamReader {
            recv,
            buf: BytesMut::new(),
            fin: false,
            budget,
            held: None,
        }
    }

    /// Reads more bytes; `Ok(false)` at FIN. Waits for data first and for room in the
    /// budget after: a stream the publisher starves (a low-priority frame it may never
    /// finish) must not hold budget while it waits, or a few hundred of them stop every
    /// other stream. While the budget is short, reads are small, so the streams waiting for
    /// room hold little outside it.
    async fn fill(&mut self) -> Result<bool, StreamEnd> {
        if self.fin {
            return Ok(false);
        }
        let max = if self.budget.available_permits() >= READ_CHUNK {
            READ_CHUNK
        } else {
            SCARCE_READ_CHUNK
        };
        match self.recv.read_chunk(max, true).await {
            Ok(Some(chunk)) => {
                let Ok(used) = self
                    .budget
                    .clone()
                    .acquire_many_owned(chunk.bytes.len() as u32)
                    .await
                else {
                    return Err(StreamEnd::Reset);
                };
                match &mut self.held {
                    Some(held) => held.merge(used),
                    None => self.held = Some(used),
                }
                self.buf.extend_from_slice(&chunk.bytes);
                Ok(true)
            }
            Ok(None) => {
                self.fin = true;
                Ok(false)
            }
            Err(_) => Err(StreamEnd::Reset),
        }
    }

    /// Takes the permits of the first `n` bytes of `buf` (which the caller consumes).
    fn take_permits(&mut self, n: usize) -> Option<OwnedSemaphorePermit> {
        if n == 0 {
            return None;
        }
        self.held.as_mut().and_then(|held| held.split(n))
    }

    /// Decodes the next item with `decode`, reading as needed. `Ok(None)` at a clean FIN.
    async fn next<T>(
        &mut self,
        decode: impl Fn(&[u8]) -> Result<(T, usize), moq_wire::DecodeError>,
    ) -> Result<Option<T>, StreamEnd> {
        loop {
            if !self.buf.is_empty() {
                match decode(&self.buf) {
                    Ok((item, used)) => {
                        self.buf.advance(used);
                        drop(self.take_permits(used));
                        return Ok(Some(item));
                    }
                    Err(e) if e.is_incomplete() => {}
                    Err(e) => return Err(StreamEnd::Violation(SessionError::decode(e))),
                }
            }
            if !self.fill().await? {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(StreamEnd::Violation(SessionError::violation(
                        "stream ended inside an object",
                    )))
                };
            }
        }
    }

    /// The next `len` bytes, with their budget permits.
    async fn payload(
        &mut self,
        len: usize,
    ) -> Result<(Bytes, Option<OwnedSemaphorePermit>), StreamEnd> {
        while self.buf.len() < len {
            if !self.fill().await? {
                return Err(StreamEnd::Violation(SessionError::violation(
                    "stream ended inside an object payload",
                )));
            }
        }
        let permits = self.take_permits(len);
        Ok((self.buf.split_to(len).freeze(), permits))
    }
}

async fn read_data_stream(inner: Arc<Inner>, recv: quinn::RecvStream) {
    let mut reader = StreamReader::new(recv, inner.receive_budget.clone());
    let codec = inner.codec;
    let header = match reader
        // A subgroup that leaves its priority out has the track's default; the tracks we
        // subscribe to announce none that we read.
        .next(|buf| codec.decode_stream_header(buf, &|_| DEFAULT_PUBLISHER_PRIORITY))
        .await
    {
        Ok(Some(DataStreamHeader::Subgroup(h))) => h,
        Ok(Some(DataStreamHeader::Fetch(_))) | Ok(None) | Err(StreamEnd::Reset) => return,
        Err(StreamEnd::Finished) => return,
        Err(StreamEnd::Violation(e)) => return inner.close(&e),
    };
    let Some((request_id, events, mut stop_before)) =
        claim_stream(&inner, header.track_alias).await
    else {
        let _ = reader.recv.stop(quinn::VarInt::from_u32(0));
        return;
    };
    let group = header.group_id;
    let end = tokio::select! {
        end = read_objects(&mut reader, codec, &header, &events) => end,
        _ = stop_before.wait_for(|g| group < *g) => {
            let _ = reader.recv.stop(quinn::VarInt::from_u64(wire::reset_code::CANCELLED).unwrap_or_default());
            StreamEnd::Reset
        }
    };
    let complete = match end {
        StreamEnd::Finished => true,
        StreamEnd::Reset => false,
        StreamEnd::Violation(e) => {
            inner.close(&e);
            false
        }
    };
    let _ = events.send(TrackEvent::GroupEnd { group, complete }).await;
    {
        let mut state = lock(&inner.state);
        if let Some(sub) = state.outgoing.get_mut(&request_id) {
            sub.streams_open -= 1;
            sub.streams_done += 1;
        }
    }
    finish_if_done(&inner, request_id, false);
}

/// Finds the subscription a stream belongs to, waiting briefly for its SUBSCRIBE_OK.
async fn claim_stream(
    inner: &Inner,
    alias: u64,
) -> Option<(u64, mpsc::Sender<TrackEvent>, watch::Receiver<u64>)> {
    let mut changed = inner.changed.subscribe();
    let deadline = tokio::time::Instant::now() + ALIAS_WAIT;
    loop {
        {
            let mut state = lock(&inner.state);
            if let Some(request_id) = state.aliases.get(&alias).copied() {
                let sub = state.outgoing.get_mut(&request_id)?;
                sub.streams_open += 1;
                return Some((request_id, sub.events.clone(), sub.stop_before.subscribe()));
            }
        }
        tokio::time::timeout_at(deadline, changed.changed())
            .await
            .ok()?
            .ok()?;
    }
}

async fn read_objects(
    reader: &mut StreamReader,
    codec: &dyn Codec,
    header: &wire::SubgroupHeader,
    events: &mpsc::Sender<TrackEvent>,
) -> StreamEnd {
    let mut previous: Option<u64> = None;
    let extensions = header.extensions_present;
    loop {
        let object = match reader
            .next(|buf| codec.decode_subgroup_object(buf, extensions))
            .await
        {
            Ok(Some(o)) => o,
            // A group that ends without a single object was dropped by the publisher
            // before it started: nothing of it will come.
            Ok(None) if previous.is_none() => return StreamEnd::Reset,
            Ok(None) => return StreamEnd::Finished,
            Err(end) => return end,
        };
        let Some(id) = previous.map_or(Some(object.object_id_delta), |p| {
            p.checked_add(object.object_id_delta)?.checked_add(1)
        }) else {
            return StreamEnd::Violation(SessionError::violation("object ID overflow"));
        };
        previous = Some(id);
        if object.status != ObjectStatus::Normal {
            continue;
        }
        if object.payload_len > MAX_OBJECT_SIZE {
            return StreamEnd::Violation(SessionError::violation("object larger than 8 MiB"));
        }
        let (payload, budget) = match reader.payload(object.payload_len as usize).await {
            Ok(p) => p,
            Err(end) => return end,
        };
        let object = TrackEvent::Object(Object {
            group: header.group_id,
            id,
            payload,
            received: Instant::now(),
            budget,
        });
        // Waits while the consumer is behind: this is where backpressure starts. What
        // waits here is bounded by the receive budget.
        if events.send(object).await.is_err() {
            return StreamEnd::Reset;
        }
    }
}
