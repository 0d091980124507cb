//! The send scheduler of one publishing session, as a state machine without I/O.
//!
//! Inputs are events with the time they happened: a subscription starts or ends, an
//! object is written to a served track, QUIC accepted bytes of a write or opened a
//! stream, a finished stream was acknowledged, the path delivered so many bytes. Outputs
//! are what the session must do: [`Scheduler::next_transmit`] names the single most
//! urgent network operation (open a stream, or write the next bytes of an object on one),
//! and [`Scheduler::poll_action`] yields immediate actions (reset or finish a stream, send
//! PUBLISH_DONE, resize QUIC's send window, close a stalled session). No clock is read, no
//! socket touched: tests drive it in virtual time, and the async shell in `publish.rs`
//! only executes what it says.
//!
//! Policy, per subscription (each one a track served to the peer):
//! - Groups go out by [`Priority`]: lower class first, higher rank first within a class.
//!   QUIC's own buffer is kept near one round trip of the measured rate, so what has not
//!   been handed over can still be dropped.
//! - Data not handed to QUIC within the track's `max_age` (delivery timeout) is dropped
//!   with the rest of its group; a started stream is reset.
//! - The session's `max_backlog` budget applies in every mode, so a subscriber that cannot
//!   keep up costs bounded memory: a group whose first object waited that long is not
//!   started any more, and a group in progress is given up once its unsent data waited
//!   twice that long (cutting every group in progress would leave an in-order viewer with
//!   only the start of each GoP). Below the budget, in-order modes stay in order.
//! - In superseding modes a newer group makes older ones worthless: a group not started is
//!   dropped at once, one in progress once its unsent data is stale and either its first
//!   object (the keyframe) is out or the newer group's keyframe can arrive in time. While
//!   started, a group goes before newer ones of its subscription, in QUIC's buffer too (its
//!   stream's priority): they pre-empt it only by having it dropped (the source thesis's
//!   200 kbit/s starvation: one picture per round beats none).
//! - A session with data waiting and no write accepted for `stall_timeout` is closed: the
//!   peer stopped reading (no flow-control credit) and holds resources for nothing.
//!
//! Groups are kept per subscription in ID order, and those with data to send in one set
//! ordered by urgency, so no decision scans every group.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_wire::codec::Codec;
use moq_wire::message::{
    DataStreamHeader, ObjectStatus, SubgroupHeader, SubgroupId, SubgroupObjectHeader,
    publish_done_code, reset_code, session_error,
};

use crate::rate::RateEstimator;
use crate::send_queue::{SendQueue, SendWaits};
use crate::track::{Handoff, Payload, Priority, TrackCounters, TrackDelivery};

/// Bounds of the connection send window (bytes handed to QUIC and not yet acknowledged).
const MIN_SEND_WINDOW: u64 = 12 * 1024;
/// Send window until the delivery rate is known.
pub(crate) const INITIAL_SEND_WINDOW: u64 = 64 * 1024;
const MAX_SEND_WINDOW: u64 = 64 * 1024 * 1024;
/// Extra queueing the send window allows on top of the round trip.
const WINDOW_SLACK: Duration = Duration::from_millis(50);

/// The quinn priority of a group's stream. quinn sends the data it holds by stream
/// priority, so in superseding modes the newest group's stream would go ahead of an older
/// group's tail already handed over, starving it until the viewer gives that group up:
/// there, as in the scheduler, a started group goes before newer ones (their streams
/// open later), and is pre-empted only by being dropped.
fn quic_priority(p: Priority, superseding: bool) -> i32 {
    let rank = if superseding {
        p.rank.saturating_neg()
    } else {
        p.rank
    };
    Priority { rank, ..p }.quinn()
}

/// Limits of one publishing session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishLimits {
    /// Data of a subscription not handed to QUIC this long after it was written is
    /// dropped (oldest group first), whatever the delivery mode.
    pub max_backlog: Duration,
    /// A session with data waiting and no write accepted for this long is closed.
    pub stall_timeout: Duration,
}

impl Default for PublishLimits {
    fn default() -> Self {
        PublishLimits {
            max_backlog: Duration::from_secs(3),
            stall_timeout: Duration::from_secs(10),
        }
    }
}

/// A group being sent to one subscription, and the stream it goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey {
    pub request_id: u64,
    pub group: u64,
}

/// A subscription to serve.
#[derive(Debug, Clone)]
pub struct NewSubscription {
    pub request_id: u64,
    pub alias: u64,
    pub delivery: TrackDelivery,
    pub(crate) counters: Arc<TrackCounters>,
}

/// The group an object belongs to, as written by the producer.
#[derive(Debug, Clone, Copy)]
pub struct GroupInfo {
    pub id: u64,
    pub priority: Priority,
    pub created: Instant,
}

/// The next network operation, most urgent first. Trying it must not change anything:
/// the shell reports the outcome with [`Scheduler::opened`] or [`Scheduler::wrote`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// Open a unidirectional stream for this group at this quinn priority.
    Open { key: StreamKey, priority: i32 },
    /// Write as much of these bytes as QUIC takes; the payload parts are the producer's
    /// own buffers, never copies.
    Write { key: StreamKey, chunks: Vec<Bytes> },
}

/// What the session must do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Abandon the stream (RESET_STREAM with this application code).
    Reset { key: StreamKey, code: u64 },
    /// Everything was handed to QUIC: finish the stream, then report its
    /// acknowledgement with [`Scheduler::acked`].
    Finish { key: StreamKey },
    /// The subscription is over: send PUBLISH_DONE.
    PublishDone {
        request_id: u64,
        status: u64,
        stream_count: u64,
    },
    /// Limit what QUIC buffers (bytes not yet acknowledged).
    SetSendWindow(u64),
    /// Close the session with this error code and reason.
    Close { code: u64, reason: String },
}

/// Why a group is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abandon {
    Superseded,
    Expired,
    OverBudget,
    Cancelled,
}

/// An object not yet handed to QUIC.
#[derive(Debug, Clone)]
struct Queued {
    id: u64,
    payload: Payload,
    /// When the producer wrote it: its freshness, for the delivery timeout.
    written: Instant,
    /// When it was queued for this subscription (later than `written` for a subscriber
    /// that joined after it, e.g. for the current catalog): the backlog budget counts
    /// from here.
    queued: Instant,
}

/// The object being handed to QUIC: its stream and object headers, then the payload.
#[derive(Debug, Clone)]
struct Current {
    id: u64,
    /// When the producer wrote the object (never, for an empty group's header).
    written: Option<Instant>,
    /// When it was queued for the subscription (never, for an empty group's header).
    queued: Option<Instant>,
    header: Bytes,
    payload: Payload,
    /// Bytes of header and payload QUIC has taken.
    offset: usize,
}

impl Current {
    fn total(&self) -> usize {
        self.header.len() + self.payload.len()
    }

    /// What is left to write, as slices of the original buffers.
    fn remaining(&self) -> Vec<Bytes> {
        let mut skip = self.offset;
        let mut out = Vec::with_capacity(1 + self.payload.parts().len());
        for part in std::iter::once(&self.header).chain(self.payload.parts()) {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            out.push(part.slice(skip..));
            skip = 0;
        }
        out
    }
}

type ReadyKey = (u8, bool, Reverse<i64>, StreamKey);

#[derive(Debug)]
struct OutGroup {
    info: GroupInfo,
    queued: VecDeque<Queued>,
    current: Option<Current>,
    /// The last object whose header was written, for the next object ID delta.
    previous: Option<u64>,
    opened: bool,
    header_sent: bool,
    /// The group's first object (its keyframe) is out, or the subscriber joined after it.
    first_out: bool,
    closed: bool,
    /// Dropped before it started, and announced as a stream without objects.
    empty: bool,
    /// Its key in the ready set while it has data to send.
    ready: Option<ReadyKey>,
}

impl OutGroup {
    fn new(info: GroupInfo) -> OutGroup {
        OutGroup {
            info,
            queued: VecDeque::new(),
            current: None,
            previous: None,
            opened: false,
            header_sent: false,
            first_out: false,
            closed: false,
            empty: false,
            ready: None,
        }
    }

    fn has_data(&self) -> bool {
        self.current.is_some() || !self.queued.is_empty() || self.empty && !self.header_sent
    }

    /// When the oldest object not yet touched was written; the object in progress is
    /// committed and does not count.
    fn oldest_untouched(&self) -> Option<Instant> {
        self.queued.front().map(|q| q.written)
    }

    /// When the oldest object not yet touched was queued for the subscription.
    fn oldest_untouched_queued(&self) -> Option<Instant> {
        self.queued.front().map(|q| q.queued)
    }

    fn untouched_waited_at_least(&self, limit: Duration, now: Instant) -> bool {
        self.oldest_untouched()
            .is_some_and(|w| now.saturating_duration_since(w) >= limit)
    }

    /// The object in progress, or the next one prepared with its headers in `codec`'s
    /// form. `None` also for IDs the draft cannot carry, which no track produces.
    fn current_or_next(&self, alias: u64, codec: &dyn Codec) -> Option<Current> {
        if let Some(current) = &self.current {
            return Some(current.clone());
        }
        let mut header = Vec::with_capacity(32);
        if !self.header_sent {
            let stream_header = DataStreamHeader::Subgroup(SubgroupHeader {
                track_alias: alias,
                group_id: self.info.id,
                subgroup_id: SubgroupId::Zero,
                publisher_priority: self.info.priority.publisher,
                extensions_present: false,
                contains_end_of_group: true,
            });
            codec
                .encode_stream_header(&stream_header, &mut header)
                .ok()?;
        }
        if self.empty {
            return (!self.header_sent).then(|| Current {
                id: 0,
                written: None,
                queued: None,
                header: Bytes::from(header),
                payload: Payload::from_parts(Vec::new()),
                offset: 0,
            });
        }
        let next = self.queued.front()?;
        let delta = self
            .previous
            .map_or(next.id, |p| next.id.saturating_sub(p.saturating_add(1)));
        let object = SubgroupObjectHeader {
            object_id_delta: delta,
            extensions: Vec::new(),
            payload_len: next.payload.len() as u64,
            status: ObjectStatus::Normal,
        };
        codec
            .encode_subgroup_object(&object, false, &mut header)
            .ok()?;
        Some(Current {
            id: next.id,
            written: Some(next.written),
            queued: Some(next.queued),
            header: Bytes::from(header),
            payload: next.payload.clone(),
            offset: 0,
        })
    }
}

#[derive(Debug)]
struct Sub {
    alias: u64,
    delivery: TrackDelivery,
    counters: Arc<TrackCounters>,
    groups: BTreeMap<u64, OutGroup>,
    /// Streams opened, for PUBLISH_DONE.
    streams: u64,
    /// Finished streams not yet acknowledged.
    unacked: usize,
    /// Highest group given up: its late objects are dropped, not sent as a new group.
    dropped_through: Option<u64>,
    /// Set once no group follows: the PUBLISH_DONE status.
    done: Option<u64>,
    /// UNSUBSCRIBE arrived: nothing more is accepted.
    cancelled: bool,
    /// How long its objects waited before QUIC took them.
    waits: SendWaits,
}

impl Sub {
    /// When the object that has waited longest (in progress or not) was queued.
    fn oldest_waiting(&self) -> Option<Instant> {
        self.groups
            .values()
            .filter_map(|g| {
                let current = g.current.as_ref().and_then(|c| c.queued);
                current.or_else(|| g.oldest_untouched_queued())
            })
            .min()
    }

    /// When the unsent data of `g` has waited too long, and why it is dropped then.
    fn deadline(&self, g: &OutGroup, limits: &PublishLimits) -> Option<(Instant, Abandon)> {
        let budget = if g.opened {
            limits.max_backlog.saturating_mul(2)
        } else {
            limits.max_backlog
        };
        let over_budget = g.oldest_untouched_queued()? + budget;
        match self.delivery.max_age {
            Some(age) if g.oldest_untouched()? + age <= over_budget => {
                Some((g.oldest_untouched()? + age, Abandon::Expired))
            }
            _ => Some((over_budget, Abandon::OverBudget)),
        }
    }

    /// Groups with unsent data whose deadline may pass before any newer group's, with
    /// that deadline: groups in ID order up to the first one not started (those after it
    /// are younger and have the same limits).
    fn deadlines<'a>(
        &'a self,
        limits: &'a PublishLimits,
    ) -> impl Iterator<Item = (u64, Instant, Abandon)> + 'a {
        let mut more = true;
        self.groups
            .iter()
            .filter_map(|(&id, g)| Some((id, g, self.deadline(g, limits)?)))
            .take_while(move |(_, g, _)| std::mem::replace(&mut more, g.opened))
            .map(|(id, _, (deadline, why))| (id, deadline, why))
    }
}

/// The send scheduler of one session (see the module documentation).
#[derive(Debug)]
pub struct Scheduler {
    limits: PublishLimits,
    /// The session's draft, which the stream and object headers are written in.
    codec: &'static dyn Codec,
    subs: BTreeMap<u64, Sub>,
    ready: BTreeSet<ReadyKey>,
    actions: VecDeque<Action>,
    rate: RateEstimator,
    /// Bytes per second delivered, once measured.
    bytes_per_second: Option<f64>,
    /// Since when data has been waiting without QUIC taking any.
    stalled_since: Option<Instant>,
    closing: bool,
    /// Time of the latest input.
    now: Instant,
}

impl Scheduler {
    pub fn new(limits: PublishLimits, codec: &'static dyn Codec, now: Instant) -> Scheduler {
        Scheduler {
            limits,
            codec,
            subs: BTreeMap::new(),
            ready: BTreeSet::new(),
            actions: VecDeque::from([Action::SetSendWindow(INITIAL_SEND_WINDOW)]),
            rate: RateEstimator::default(),
            bytes_per_second: None,
            stalled_since: None,
            closing: false,
            now,
        }
    }

    /// Starts serving a subscription.
    pub fn subscribe(&mut self, sub: NewSubscription, now: Instant) {
        self.subs.insert(
            sub.request_id,
            Sub {
                alias: sub.alias,
                delivery: sub.delivery,
                counters: sub.counters,
                groups: BTreeMap::new(),
                streams: 0,
                unacked: 0,
                dropped_through: None,
                done: None,
                cancelled: false,
                waits: SendWaits::default(),
            },
        );
        self.update(now);
    }

    /// The peer unsubscribed: every stream of the subscription is reset, then PUBLISH_DONE.
    pub fn unsubscribe(&mut self, request_id: u64, now: Instant) {
        let Some(sub) = self.subs.get_mut(&request_id) else {
            return;
        };
        sub.cancelled = true;
        sub.done
            .get_or_insert(publish_done_code::SUBSCRIPTION_ENDED);
        let groups: Vec<u64> = sub.groups.keys().copied().collect();
        for group in groups {
            self.abandon(StreamKey { request_id, group }, Abandon::Cancelled);
        }
        self.update(now);
    }

    /// No group follows the ones already reported: PUBLISH_DONE with `status` once
    /// everything was delivered (or given up).
    pub fn end_subscription(&mut self, request_id: u64, status: u64, now: Instant) {
        if let Some(sub) = self.subs.get_mut(&request_id) {
            sub.done.get_or_insert(status);
        }
        self.update(now);
    }

    /// An object was written to a served track (object IDs increase within a group).
    pub fn object(
        &mut self,
        request_id: u64,
        group: GroupInfo,
        id: u64,
        payload: Payload,
        written: Instant,
        now: Instant,
    ) {
        let Some(sub) = self.subs.get_mut(&request_id) else {
            return;
        };
        let known = sub.groups.get(&group.id).map(|g| !g.empty);
        let given_up = sub.dropped_through.is_some_and(|d| group.id <= d);
        if sub.cancelled
            || sub.done.is_some()
            || known == Some(false)
            || known.is_none() && given_up
        {
            sub.counters.add(|c| &c.objects_dropped, 1);
            return;
        }
        let g = sub
            .groups
            .entry(group.id)
            .or_insert_with(|| OutGroup::new(group));
        if g.queued.is_empty() && g.current.is_none() && g.previous.is_none() && id > 0 {
            // Joined mid-group: its keyframe will not come.
            g.first_out = true;
        }
        g.queued.push_back(Queued {
            id,
            payload,
            written,
            queued: now.max(written),
        });
        self.refresh(StreamKey {
            request_id,
            group: group.id,
        });
        self.update(now);
    }

    /// No object follows in this group.
    pub fn group_closed(&mut self, request_id: u64, group: u64, now: Instant) {
        let key = StreamKey { request_id, group };
        if let Some(g) = self.group_mut(key) {
            g.closed = true;
            self.finish_if_complete(key);
        }
        self.update(now);
    }

    /// The most urgent network operation, if any data waits.
    pub fn next_transmit(&self) -> Option<Transmit> {
        let &(_, _, _, key) = self.ready.first()?;
        let sub = self.subs.get(&key.request_id)?;
        let g = sub.groups.get(&key.group)?;
        if !g.opened {
            return Some(Transmit::Open {
                key,
                priority: quic_priority(g.info.priority, sub.delivery.supersede_after.is_some()),
            });
        }
        let current = g.current_or_next(sub.alias, self.codec)?;
        Some(Transmit::Write {
            key,
            chunks: current.remaining(),
        })
    }

    /// The stream of `key` was opened (as [`Transmit::Open`] asked).
    pub fn opened(&mut self, key: StreamKey, now: Instant) {
        let Some(sub) = self.subs.get_mut(&key.request_id) else {
            return;
        };
        let Some(g) = sub.groups.get_mut(&key.group) else {
            return;
        };
        g.opened = true;
        sub.streams += 1;
        // Not progress: a peer that reads nothing may still grant new streams.
        self.refresh(key);
        self.update(now);
    }

    /// QUIC took `bytes` of the [`Transmit::Write`] for `key`.
    pub fn wrote(&mut self, key: StreamKey, bytes: usize, now: Instant) {
        let Some(sub) = self.subs.get_mut(&key.request_id) else {
            return;
        };
        let alias = sub.alias;
        let codec = self.codec;
        let counters = sub.counters.clone();
        let Some(g) = sub.groups.get_mut(&key.group) else {
            return;
        };
        if g.current.is_none() {
            let Some(next) = g.current_or_next(alias, codec) else {
                return;
            };
            if !g.empty {
                g.queued.pop_front();
                g.previous = Some(next.id);
            }
            g.header_sent = true;
            g.current = Some(next);
        }
        if let Some(current) = &mut g.current {
            current.offset += bytes;
            if current.offset >= current.total() {
                if let Some(queued) = current.queued {
                    sub.waits.record(now, now.saturating_duration_since(queued));
                }
                if let Some(written) = current.written {
                    let handoff = Handoff {
                        group: key.group,
                        object: current.id,
                        written,
                        taken: now,
                    };
                    counters.handed_off(handoff, current.total());
                }
                g.current = None;
                g.first_out = true;
            }
        }
        self.refresh(key);
        self.finish_if_complete(key);
        if bytes > 0 {
            self.progress(now);
        }
        self.update(now);
    }

    /// Writing or opening failed for `key` (the peer stopped the stream): give it up.
    pub fn stream_failed(&mut self, key: StreamKey, now: Instant) {
        self.abandon(key, Abandon::Cancelled);
        self.update(now);
    }

    /// A finished stream was acknowledged, or its grace period passed.
    pub fn acked(&mut self, key: StreamKey, now: Instant) {
        if let Some(sub) = self.subs.get_mut(&key.request_id) {
            sub.unacked = sub.unacked.saturating_sub(1);
        }
        self.update(now);
    }

    /// The connection has delivered `delivered` bytes in all so far; `min_rtt` is the
    /// smallest round trip seen. Keeps QUIC's buffer near what the path delivers in a round
    /// trip plus a little, so a bottleneck queue never holds more than that either. The
    /// round trip is the minimum: the smoothed one includes the queue this window builds,
    /// and would inflate it without bound.
    pub fn path_sample(&mut self, delivered: u64, min_rtt: Duration, now: Instant) {
        self.bytes_per_second = self.rate.update(now, delivered);
        if let Some(rate) = self.bytes_per_second {
            let horizon = min_rtt + WINDOW_SLACK;
            let window = (2.0 * rate * horizon.as_secs_f64()) as u64;
            self.actions.push_back(Action::SetSendWindow(
                window.clamp(MIN_SEND_WINDOW, MAX_SEND_WINDOW),
            ));
        }
        self.update(now);
    }

    /// Applies the time-based policies due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.update(now);
    }

    /// The next time a policy may act without any other input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Instant| {
            if t > self.now {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for sub in self.subs.values() {
            for (_, deadline, _) in sub.deadlines(&self.limits) {
                consider(deadline);
            }
            if let Some(after) = sub.delivery.supersede_after {
                let older = sub.groups.values().rev().skip(1);
                for w in older
                    .filter(|g| g.opened)
                    .filter_map(OutGroup::oldest_untouched)
                {
                    consider(w + after);
                }
            }
        }
        if let Some(since) = self.stalled_since {
            consider(since + self.limits.stall_timeout);
        }
        next
    }

    /// The next immediate action.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Subscriptions being served (PUBLISH_DONE not sent yet).
    pub fn subscriptions(&self) -> usize {
        self.subs.len()
    }

    /// Whether a subscription with this ID is served and not cancelled.
    pub fn serves(&self, request_id: u64) -> bool {
        self.subs.get(&request_id).is_some_and(|s| !s.cancelled)
    }

    /// The publisher's own queue at `now`: that of the subscription whose data waits
    /// longest before QUIC takes it.
    pub fn send_queue(&self, now: Instant) -> SendQueue {
        self.subs
            .values()
            .filter(|s| !s.cancelled)
            .map(|s| s.waits.queue(now, s.oldest_waiting()))
            .fold(SendQueue::default(), SendQueue::max)
    }

    /// Payload bytes held for the subscriptions (queued or in progress), for tests and
    /// statistics.
    pub fn backlog_bytes(&self) -> usize {
        self.subs
            .values()
            .flat_map(|s| s.groups.values())
            .map(|g| {
                let queued: usize = g.queued.iter().map(|q| q.payload.len()).sum();
                queued + g.current.as_ref().map_or(0, |c| c.payload.len())
            })
            .sum()
    }

    fn group_mut(&mut self, key: StreamKey) -> Option<&mut OutGroup> {
        self.subs
            .get_mut(&key.request_id)?
            .groups
            .get_mut(&key.group)
    }

    /// Puts the group in the ready set, or takes it out, as its data and state say.
    fn refresh(&mut self, key: StreamKey) {
        let Some(sub) = self.subs.get_mut(&key.request_id) else {
            return;
        };
        let superseding = sub.delivery.supersede_after.is_some();
        let Some(g) = sub.groups.get_mut(&key.group) else {
            return;
        };
        let p = g.info.priority;
        // Within a superseding subscription a started group goes first (see the module doc).
        let want =
            g.has_data()
                .then_some((p.class, !(superseding && g.opened), Reverse(p.rank), key));
        if g.ready != want {
            if let Some(old) = g.ready.take() {
                self.ready.remove(&old);
            }
            if let Some(new) = want {
                self.ready.insert(new);
            }
            g.ready = want;
        }
    }

    fn finish_if_complete(&mut self, key: StreamKey) {
        let Some(sub) = self.subs.get_mut(&key.request_id) else {
            return;
        };
        let complete = sub
            .groups
            .get(&key.group)
            .is_some_and(|g| g.closed && !g.has_data());
        if !complete {
            return;
        }
        if let Some(g) = sub.groups.remove(&key.group) {
            if let Some(ready) = g.ready {
                self.ready.remove(&ready);
            }
            if g.opened {
                sub.unacked += 1;
                self.actions.push_back(Action::Finish { key });
            }
        }
    }

    fn abandon(&mut self, key: StreamKey, why: Abandon) {
        let Some(sub) = self.subs.get_mut(&key.request_id) else {
            return;
        };
        let Some(g) = sub.groups.remove(&key.group) else {
            return;
        };
        if let Some(ready) = g.ready {
            self.ready.remove(&ready);
        }
        sub.dropped_through = Some(sub.dropped_through.map_or(key.group, |d| d.max(key.group)));
        let c = &sub.counters;
        let unsent = g.queued.len() + usize::from(g.current.is_some());
        c.add(|c| &c.objects_dropped, unsent as u64);
        let counter: Option<fn(&TrackCounters) -> &AtomicU64> = match why {
            Abandon::Superseded => Some(|c| &c.groups_superseded),
            Abandon::Expired => Some(|c| &c.groups_expired),
            Abandon::OverBudget => Some(|c| &c.groups_over_budget),
            Abandon::Cancelled => None,
        };
        if let Some(counter) = counter {
            c.add(counter, 1);
        }
        if g.opened {
            c.add(|c| &c.streams_reset, 1);
            let code = match why {
                Abandon::Expired | Abandon::OverBudget => reset_code::DELIVERY_TIMEOUT,
                Abandon::Superseded | Abandon::Cancelled => reset_code::CANCELLED,
            };
            self.actions.push_back(Action::Reset { key, code });
        } else if sub.delivery.announce_dropped && why != Abandon::Cancelled {
            let mut empty = OutGroup::new(g.info);
            empty.empty = true;
            empty.closed = true;
            sub.groups.insert(key.group, empty);
            self.refresh(key);
        }
    }

    /// QUIC took data: the session is not stalled.
    fn progress(&mut self, now: Instant) {
        self.stalled_since = Some(now);
    }

    /// Applies every policy after an input at `now`.
    fn update(&mut self, now: Instant) {
        self.now = self.now.max(now);
        let now = self.now;
        let ids: Vec<u64> = self.subs.keys().copied().collect();
        for &id in &ids {
            self.expire(id, now);
            self.supersede(id, now);
        }
        self.check_stall(now);
        for id in ids {
            self.finish_subscription(id);
        }
    }

    /// Drops the groups whose unsent data is older than the subscription allows.
    fn expire(&mut self, request_id: u64, now: Instant) {
        let Some(sub) = self.subs.get(&request_id) else {
            return;
        };
        let doomed: Vec<(u64, Abandon)> = sub
            .deadlines(&self.limits)
            .filter(|(_, deadline, _)| *deadline <= now)
            .map(|(group, _, why)| (group, why))
            .collect();
        for (group, why) in doomed {
            self.abandon(StreamKey { request_id, group }, why);
        }
    }

    /// Drops older groups of a superseding subscription that a newer group makes worthless.
    fn supersede(&mut self, request_id: u64, now: Instant) {
        let Some(sub) = self.subs.get(&request_id) else {
            return;
        };
        let Some(after) = sub.delivery.supersede_after else {
            return;
        };
        let Some((_, newest)) = sub.groups.last_key_value() else {
            return;
        };
        let doomed: Vec<u64> = sub
            .groups
            .iter()
            .rev()
            .skip(1)
            .filter(|(_, g)| {
                !g.opened
                    || g.untouched_waited_at_least(after, now)
                        && (g.first_out || self.deliverable(newest, g))
            })
            .map(|(&id, _)| id)
            .collect();
        for group in doomed {
            self.abandon(StreamKey { request_id, group }, Abandon::Superseded);
        }
    }

    /// Whether `newer` can deliver its first object (the keyframe) before the group after
    /// it arrives, judged by the measured rate and the spacing of `older` and `newer`.
    fn deliverable(&self, newer: &OutGroup, older: &OutGroup) -> bool {
        let Some(rate) = self.bytes_per_second else {
            return true;
        };
        let spacing = newer
            .info
            .created
            .saturating_duration_since(older.info.created);
        let key_bytes = newer.queued.front().map_or(0, |q| q.payload.len());
        rate * spacing.as_secs_f64() >= key_bytes as f64
    }

    fn check_stall(&mut self, now: Instant) {
        if self.ready.is_empty() {
            self.stalled_since = None;
            return;
        }
        let since = *self.stalled_since.get_or_insert(now);
        if !self.closing && now.saturating_duration_since(since) >= self.limits.stall_timeout {
            self.closing = true;
            self.actions.push_back(Action::Close {
                code: session_error::INTERNAL_ERROR,
                reason: format!(
                    "subscriber made no progress for {} s (it does not read)",
                    self.limits.stall_timeout.as_secs()
                ),
            });
        }
    }

    /// Sends PUBLISH_DONE once nothing of a finished subscription is left.
    fn finish_subscription(&mut self, request_id: u64) {
        let Some(sub) = self.subs.get(&request_id) else {
            return;
        };
        let Some(status) = sub.done else {
            return;
        };
        if sub.groups.is_empty() && sub.unacked == 0 {
            self.actions.push_back(Action::PublishDone {
                request_id,
                status,
                stream_count: sub.streams,
            });
            self.subs.remove(&request_id);
        }
    }
}

#[cfg(test)]
mod tests;
