//! Serving the peer's subscriptions: SUBSCRIBE handling, and the task that carries out
//! the send scheduler's decisions on quinn.
//!
//! Every decision (what to send next, what to drop, when to give up on the peer) is made by
//! the [`Scheduler`], a state machine without I/O. This task only feeds it (new objects of
//! the served tracks, stream events, path samples, the time) and executes what it asks:
//! open a stream, write bytes, reset or finish a stream, send PUBLISH_DONE, resize QUIC's
//! send window, close the session.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moq_wire::message::{
    self as wire, ControlMessage, FilterType, GroupOrder, Location, Parameters,
};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;

use crate::feed::TrackFeed;
use crate::fetch;
use crate::inner::{Inner, REQUEST_WINDOW};
use crate::scheduler::{Action, NewSubscription, PublishLimits, Scheduler, StreamKey, Transmit};
use crate::track::{ActiveGuard, TrackShared, lock};

/// How long a finished stream may take to be acknowledged before PUBLISH_DONE goes anyway.
const FINISH_GRACE: Duration = Duration::from_secs(5);
/// How often the path is sampled for the send window.
const TICK: Duration = Duration::from_millis(50);
/// Commands queued for the task; each is a request of the peer, which the request window
/// bounds, so this is never reached by a peer that follows the protocol.
const COMMAND_QUEUE: usize = 4 * REQUEST_WINDOW as usize;

/// Commands from the control loop to the task.
#[derive(Debug)]
pub(crate) enum Command {
    Serve(Box<Served>),
    Unsubscribe(u64),
}

/// The task's handle, owned by the session's control loop.
#[derive(Debug, Clone)]
pub(crate) struct Publisher {
    commands: mpsc::Sender<Command>,
    doorbell: Arc<Notify>,
}

impl Publisher {
    pub fn start(inner: &Arc<Inner>, limits: PublishLimits) -> Publisher {
        let (commands, rx) = mpsc::channel(COMMAND_QUEUE);
        let doorbell = Arc::new(Notify::new());
        tokio::spawn(run(inner.clone(), rx, doorbell.clone(), limits));
        Publisher { commands, doorbell }
    }

    fn command(&self, inner: &Inner, command: Command) {
        if self.commands.try_send(command).is_err() {
            inner.close(&crate::SessionError::Protocol {
                code: wire::session_error::TOO_MANY_REQUESTS,
                reason: "too many subscription changes at once".into(),
            });
        }
    }
}

/// Handles the peer's SUBSCRIBE. `ordered`: it came on the control stream, after every
/// message sent before it there (see [`after_the_earlier_one`] for one that did not).
pub(crate) fn subscribe(
    inner: &Arc<Inner>,
    publisher: Option<&Publisher>,
    msg: wire::Subscribe,
    ordered: bool,
) {
    let refuse = |code: u64, reason: String| {
        inner.send(ControlMessage::SubscribeError(wire::SubscribeError {
            request_id: msg.request_id,
            code,
            reason,
        }));
        inner.request_completed();
    };
    let (Some(broadcast), Some(publisher)) = (inner.publish.clone(), publisher) else {
        return refuse(
            wire::subscribe_error::NOT_SUPPORTED,
            "this endpoint does not publish".into(),
        );
    };
    let name = String::from_utf8_lossy(&msg.track_name).into_owned();
    if msg.namespace != *broadcast.namespace() {
        return refuse(
            wire::subscribe_error::TRACK_DOES_NOT_EXIST,
            format!(
                "namespace {} is not published here",
                msg.namespace.to_path()
            ),
        );
    }
    let Some(track) = broadcast.track(&msg.track_name) else {
        return refuse(
            wire::subscribe_error::TRACK_DOES_NOT_EXIST,
            format!("no track {name:?}"),
        );
    };
    let largest = track.largest();
    // Asked first, so that a new group the subscription itself brings on (a keyframe
    // request) is where it starts. Not for a session that continues the broadcast: its
    // subscribers were playing the groups before.
    let join = if lock(&inner.state).continues {
        Join::Continuing
    } else if broadcast.notify_subscribed(&name) {
        Join::NewGroupComing
    } else {
        Join::Live
    };
    let span = match Span::of(msg.filter, largest, join, msg.fill.is_some()) {
        Ok(span) => span,
        Err((code, reason)) => return refuse(code, reason.into()),
    };
    let (start, end_group) = (span.start, span.end_group);
    {
        let mut state = lock(&inner.state);
        if state.serves(&msg.track_name) {
            if !ordered && state.deferred.insert(msg.request_id) {
                drop(state);
                tokio::spawn(after_the_earlier_one(inner.clone(), publisher.clone(), msg));
                return;
            }
            drop(state);
            // One copy of a track per session: more would only multiply the traffic.
            return refuse(
                wire::subscribe_error::INTERNAL_ERROR,
                format!("track {name:?} is already subscribed in this session"),
            );
        }
        // A joining FETCH may name it (the draft allows that with this filter only). It
        // asks for what precedes the subscription's first object: `start`, not the draft's
        // largest + 1, since the subscription begins at the head of its group.
        let joinable = (msg.filter == FilterType::LargestObject)
            .then(|| (track.clone(), largest.map(|_| start)));
        state.start_serving(msg.request_id, msg.track_name.clone(), joinable);
    }
    let alias = inner.allocate_alias();
    let group_order = match msg.group_order {
        GroupOrder::Publisher => track.delivery.group_order,
        other => other,
    };
    inner.send(ControlMessage::SubscribeOk(wire::SubscribeOk {
        request_id: msg.request_id,
        track_alias: alias,
        expires_ms: 0,
        group_order,
        largest,
        params: Parameters::default(),
    }));
    // The subscription's fill (its joining FETCH, from draft-20 on). When a new group is
    // on its way, or a continuing session goes back a group, the subscription starts at a
    // group's first object, with nothing before it to fill.
    if let Some(fill) = &msg.fill {
        if join != Join::Live && largest.is_some() {
            fetch::refuse_fill(inner, msg.request_id);
        } else {
            let filter = fill.filter.unwrap_or(msg.filter);
            fetch::fill(
                inner,
                msg.request_id,
                &track,
                filter,
                fill.group_order,
                largest,
            );
        }
    }
    track.add_doorbell(&publisher.doorbell);
    let served = Served {
        request_id: msg.request_id,
        alias,
        feed: TrackFeed::new(msg.request_id, &track, start, end_group),
        track,
        _active: ActiveGuard::new(broadcast.inner.clone()),
    };
    publisher.command(inner, Command::Serve(Box::new(served)));
}

/// What a SUBSCRIBE for the largest object joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// The group under way.
    Live,
    /// A new group, which the subscription itself brought on (a keyframe request).
    NewGroupComing,
    /// The broadcast, on a session continuing it after a move: the peer is a relay whose
    /// viewers were playing it on another route, and one whose route changes subscribes
    /// again from the group it had got to, which may be the one before the group under way.
    Continuing,
}

/// The objects a subscription serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: Location,
    /// The last group, for a subscription with an end.
    end_group: Option<u64>,
}

impl Span {
    /// The span of a subscription with `filter` on a track whose largest object is
    /// `largest`, or why it is refused. `fill`: the peer asks for the head of the group
    /// under way too, which a live join serves.
    fn of(
        filter: FilterType,
        largest: Option<Location>,
        join: Join,
        fill: bool,
    ) -> Result<Span, (u64, &'static str)> {
        let at_group = |group: &dyn Fn(Location) -> u64| Span {
            start: Location {
                group: largest.map_or(0, group),
                object: 0,
            },
            end_group: None,
        };
        Ok(match (filter, join) {
            (FilterType::NextGroupStart, _) => at_group(&|l| l.group.saturating_add(1)),
            // The draft starts after the largest object, its fill bringing the head of the
            // group: the peer stitches the two halves together.
            (FilterType::LargestObject, Join::Live) if fill => Span {
                start: largest.map_or(Location::default(), |l| Location {
                    group: l.group,
                    object: l.object.saturating_add(1),
                }),
                end_group: None,
            },
            // Without a fill, the draft starts after the largest object too; we start at
            // the beginning of its group instead: a group is the only decodable join point
            // for a subscriber that asks for no head, and for the catalog the only way to
            // get the current one. A joining FETCH that follows asks for what precedes this
            // start, so the head is never sent twice (moq-relay drops a whole group its
            // fill already began).
            (FilterType::LargestObject, Join::Live) => at_group(&|l| l.group),
            // At the new group: the relay would otherwise pass the group under way,
            // keyframe seconds old, on to its viewers in one burst.
            (FilterType::LargestObject, Join::NewGroupComing) => {
                at_group(&|l| l.group.saturating_add(1))
            }
            // One group's burst on a route change, which saves the viewers that resubscribe
            // from the group before the one under way the rest of that group.
            (FilterType::LargestObject, Join::Continuing) => {
                at_group(&|l| l.group.saturating_sub(1))
            }
            // From the start of a recent group: a decodable join point by construction.
            (FilterType::GroupsBack(back), _) => at_group(&move |l| l.group.saturating_sub(back)),
            (FilterType::AbsoluteStart(start), _) => Span {
                start,
                end_group: None,
            },
            (FilterType::AbsoluteRange { start, end_group }, _) => {
                if end_group < start.group {
                    return Err((
                        wire::subscribe_error::INVALID_RANGE,
                        "end group before start",
                    ));
                }
                Span {
                    start,
                    end_group: Some(end_group),
                }
            }
            // Subscriptions end on a group boundary here.
            (FilterType::AbsoluteObjectRange { .. }, _) => {
                return Err((
                    wire::subscribe_error::NOT_SUPPORTED,
                    "a subscription that ends inside a group",
                ));
            }
        })
    }
}

/// A subscriber of `request_id` asks for a new group: ask the producer for a keyframe.
pub(crate) fn new_group_requested(inner: &Inner, request_id: u64) {
    let name = lock(&inner.state).served_track(request_id);
    if let (Some(broadcast), Some(name)) = (inner.publish.as_ref(), name) {
        broadcast.notify_subscribed(&String::from_utf8_lossy(&name));
    }
}

/// How long a SUBSCRIBE of a track already served, read on a request stream of its own,
/// waits for that subscription's end before it is refused. A peer that cancels a
/// subscription (resetting its stream) and subscribes again at once sends the two on
/// different streams, which may be read in either order; they arrive within a round trip.
const OVERTAKE_GRACE: Duration = Duration::from_millis(500);

/// Subscribes `msg` once the subscription of the same track it may have overtaken has
/// ended, or refuses it as a duplicate after [`OVERTAKE_GRACE`]; nothing if the peer
/// cancelled it meanwhile.
async fn after_the_earlier_one(inner: Arc<Inner>, publisher: Publisher, msg: wire::Subscribe) {
    let mut changed = inner.changed.subscribe();
    let _ = tokio::time::timeout(OVERTAKE_GRACE, async {
        while lock(&inner.state).serves(&msg.track_name) {
            if changed.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    if lock(&inner.state).deferred.remove(&msg.request_id) {
        subscribe(&inner, Some(&publisher), msg, true);
    }
}

/// Handles UNSUBSCRIBE: the task resets the subscription's streams and sends PUBLISH_DONE.
pub(crate) fn unsubscribe(inner: &Inner, publisher: Option<&Publisher>, request_id: u64) {
    {
        let mut state = lock(&inner.state);
        // A SUBSCRIBE still waiting for an earlier one is dropped before it starts.
        if state.deferred.remove(&request_id) {
            drop(state);
            inner.request_completed();
            return;
        }
        // Only a subscription being served can be ended, once.
        if !state.stop_serving(request_id) {
            return;
        }
        // Its fill, if one is being served, is reset.
        state.fetches.remove(&request_id);
    }
    // A SUBSCRIBE of the same track may be waiting for this one to end.
    inner.notify();
    if let Some(publisher) = publisher {
        publisher.command(inner, Command::Unsubscribe(request_id));
    }
}

/// A subscription being served.
#[derive(Debug)]
pub(crate) struct Served {
    request_id: u64,
    alias: u64,
    track: Arc<TrackShared>,
    feed: TrackFeed,
    _active: ActiveGuard,
}

/// What woke the task.
enum Event {
    Command(Option<Command>),
    Acked(StreamKey),
    Tick,
    Timeout,
    Doorbell,
    Opened(
        StreamKey,
        i32,
        Result<quinn::SendStream, quinn::ConnectionError>,
    ),
    Wrote(StreamKey, Result<usize, quinn::WriteError>),
}

fn varint(v: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(v).unwrap_or(quinn::VarInt::MAX)
}

/// Tries the scheduler's next network operation. Cancel-safe: if another event wins,
/// nothing was opened or written.
async fn execute(
    conn: &quinn::Connection,
    streams: &mut HashMap<StreamKey, quinn::SendStream>,
    transmit: Option<Transmit>,
) -> Event {
    match transmit {
        Some(Transmit::Open { key, priority }) => {
            Event::Opened(key, priority, conn.open_uni().await)
        }
        Some(Transmit::Write { key, mut chunks }) => match streams.get_mut(&key) {
            Some(stream) => {
                let written = stream.write_chunks(&mut chunks).await;
                Event::Wrote(key, written.map(|w| w.bytes))
            }
            None => Event::Wrote(key, Err(quinn::WriteError::ClosedStream)),
        },
        None => std::future::pending().await,
    }
}

async fn run(
    inner: Arc<Inner>,
    mut commands: mpsc::Receiver<Command>,
    doorbell: Arc<Notify>,
    limits: PublishLimits,
) {
    let conn = inner.conn.clone();
    let mut sched = Scheduler::new(limits, inner.codec, Instant::now());
    let mut served: BTreeMap<u64, Served> = BTreeMap::new();
    let mut streams: HashMap<StreamKey, quinn::SendStream> = HashMap::new();
    let mut acks: JoinSet<StreamKey> = JoinSet::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if conn.close_reason().is_some() {
            return;
        }
        let now = Instant::now();
        for s in served.values_mut() {
            s.feed.poll(&s.track, &mut sched, now);
        }
        sched.handle_timeout(now);
        while let Some(action) = sched.poll_action() {
            match action {
                Action::Reset { key, code } => {
                    if let Some(mut stream) = streams.remove(&key) {
                        let _ = stream.reset(varint(code));
                    }
                }
                Action::Finish { key } => {
                    let finished = streams.remove(&key).and_then(|mut stream| {
                        stream.finish().ok()?;
                        Some(stream.stopped())
                    });
                    match finished {
                        Some(acked) => {
                            acks.spawn(async move {
                                let _ = tokio::time::timeout(FINISH_GRACE, acked).await;
                                key
                            });
                        }
                        None => sched.acked(key, now),
                    }
                }
                Action::PublishDone {
                    request_id,
                    status,
                    stream_count,
                } => {
                    served.remove(&request_id);
                    lock(&inner.state).stop_serving(request_id);
                    inner.notify();
                    inner.send(ControlMessage::PublishDone(wire::PublishDone {
                        request_id,
                        status,
                        stream_count,
                        reason: String::new(),
                    }));
                    inner.request_completed();
                }
                Action::SetSendWindow(window) => conn.set_send_window(window),
                Action::Close { code, reason } => {
                    conn.close(varint(code), reason.as_bytes());
                    return;
                }
            }
        }
        let transmit = sched.next_transmit();
        let deadline = sched.poll_timeout();
        let event = tokio::select! {
            biased;
            cmd = commands.recv() => Event::Command(cmd),
            Some(Ok(key)) = acks.join_next(), if !acks.is_empty() => Event::Acked(key),
            _ = tick.tick() => Event::Tick,
            _ = sleep_until(deadline), if deadline.is_some() => Event::Timeout,
            event = execute(&conn, &mut streams, transmit) => event,
            _ = doorbell.notified() => Event::Doorbell,
        };
        let now = Instant::now();
        match event {
            Event::Command(None) => return,
            Event::Command(Some(Command::Serve(s))) => {
                sched.subscribe(
                    NewSubscription {
                        request_id: s.request_id,
                        alias: s.alias,
                        delivery: s.track.delivery,
                        counters: s.track.counters.clone(),
                    },
                    now,
                );
                served.insert(s.request_id, *s);
            }
            Event::Command(Some(Command::Unsubscribe(id))) => {
                if let Some(s) = served.get_mut(&id) {
                    s.feed.stop();
                }
                sched.unsubscribe(id, now);
            }
            Event::Acked(key) => sched.acked(key, now),
            Event::Tick => {
                let stats = conn.stats();
                let delivered = stats.udp_tx.bytes.saturating_sub(stats.path.lost_bytes);
                sched.path_sample(delivered, stats.path.min_rtt, now);
                *lock(&inner.send_queue) = sched.send_queue(now);
            }
            Event::Timeout | Event::Doorbell => {}
            Event::Opened(key, priority, Ok(stream)) => {
                let _ = stream.set_priority(priority);
                streams.insert(key, stream);
                sched.opened(key, now);
            }
            Event::Opened(_, _, Err(_)) => return,
            Event::Wrote(key, Ok(bytes)) => sched.wrote(key, bytes, now),
            // Stopped by the peer (STOP_SENDING), or the connection is gone.
            Event::Wrote(key, Err(_)) => {
                streams.remove(&key);
                sched.stream_failed(key, now);
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LARGEST: Location = Location {
        group: 7,
        object: 4,
    };

    fn start(filter: FilterType, join: Join, fill: bool) -> Location {
        Span::of(filter, Some(LARGEST), join, fill).unwrap().start
    }

    #[test]
    fn a_live_join_starts_at_the_group_under_way_or_after_the_head_its_fill_brings() {
        assert_eq!(
            start(FilterType::LargestObject, Join::Live, false),
            Location::new(7, 0)
        );
        assert_eq!(
            start(FilterType::LargestObject, Join::Live, true),
            Location::new(7, 5)
        );
    }

    #[test]
    fn a_join_that_brought_on_a_new_group_starts_there() {
        for fill in [false, true] {
            assert_eq!(
                start(FilterType::LargestObject, Join::NewGroupComing, fill),
                Location::new(8, 0)
            );
        }
    }

    #[test]
    fn a_continuing_session_starts_a_join_at_the_group_before_the_one_under_way() {
        for fill in [false, true] {
            assert_eq!(
                start(FilterType::LargestObject, Join::Continuing, fill),
                Location::new(6, 0)
            );
        }
        let first = Span::of(
            FilterType::LargestObject,
            Some(Location::new(0, 3)),
            Join::Continuing,
            false,
        );
        assert_eq!(first.unwrap().start, Location::new(0, 0));
    }

    #[test]
    fn explicit_starts_are_kept_whatever_the_join() {
        for join in [Join::Live, Join::NewGroupComing, Join::Continuing] {
            assert_eq!(
                start(FilterType::GroupsBack(2), join, false),
                Location::new(5, 0)
            );
            assert_eq!(
                start(FilterType::NextGroupStart, join, false),
                Location::new(8, 0)
            );
            assert_eq!(
                start(FilterType::AbsoluteStart(Location::new(3, 2)), join, false),
                Location::new(3, 2)
            );
        }
    }

    #[test]
    fn a_range_ending_before_it_starts_or_inside_a_group_is_refused() {
        let backwards = FilterType::AbsoluteRange {
            start: Location::new(5, 0),
            end_group: 4,
        };
        let inside = FilterType::AbsoluteObjectRange {
            start: Location::new(5, 0),
            end: Location::new(6, 2),
        };
        for filter in [backwards, inside] {
            assert!(Span::of(filter, Some(LARGEST), Join::Live, false).is_err());
        }
        let range = FilterType::AbsoluteRange {
            start: Location::new(5, 0),
            end_group: 6,
        };
        let span = Span::of(range, Some(LARGEST), Join::Live, false).unwrap();
        assert_eq!(span.end_group, Some(6));
    }
}
