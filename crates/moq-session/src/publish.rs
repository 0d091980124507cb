//! Serving the peer's subscriptions.
//!
//! One scheduler task per session decides what to hand to QUIC next: the most urgent
//! group with data, by [`Priority`]. It keeps QUIC's own buffer small (the connection's
//! send window follows the measured delivery rate), so everything not yet handed over can
//! still be dropped: groups superseded by a newer deliverable group, or whose data waited
//! longer than the track's `max_age`. A started stream that is abandoned is reset; a group
//! never started costs nothing, not even a stream.
//!
//! Starvation (thesis §6.2): when the link cannot deliver a new GoP's keyframe within a
//! GoP, a newer group does not pre-empt one already in progress; the group in progress
//! finishes, and the scheduler then jumps to the newest group, so pictures keep coming.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_wire::draft14::{
    self as wire, ControlMessage, FilterType, GroupOrder, Location, ObjectStatus, Parameters,
    SubgroupHeader, SubgroupId, SubgroupObjectHeader, publish_done_code, reset_code,
};
use tokio::sync::{Notify, mpsc};

use crate::session::Inner;
use crate::track::{ActiveGuard, Group, TrackShared};

/// How long a finished stream may take to be acknowledged before PUBLISH_DONE goes anyway.
const FINISH_GRACE: Duration = Duration::from_secs(5);
/// How often the send window and rate estimate are refreshed.
const TICK: Duration = Duration::from_millis(50);
/// Rate estimate horizon.
const RATE_WINDOW: Duration = Duration::from_secs(1);
/// Bounds of the connection send window (bytes handed to QUIC and not yet acknowledged).
const MIN_SEND_WINDOW: u64 = 12 * 1024;
/// Send window until the delivery rate is known.
const INITIAL_SEND_WINDOW: u64 = 64 * 1024;
const MAX_SEND_WINDOW: u64 = 64 * 1024 * 1024;
/// Extra queueing the send window allows on top of the round trip.
const WINDOW_SLACK: Duration = Duration::from_millis(50);

/// Commands from the control loop to the scheduler.
#[derive(Debug)]
pub(crate) enum Command {
    Serve(Box<Served>),
    Unsubscribe(u64),
}

/// The scheduler's handle, owned by the session.
#[derive(Debug)]
pub(crate) struct Publisher {
    commands: mpsc::UnboundedSender<Command>,
    doorbell: Arc<Notify>,
}

impl Publisher {
    pub fn start(inner: &Arc<Inner>) -> Publisher {
        let (commands, rx) = mpsc::unbounded_channel();
        let doorbell = Arc::new(Notify::new());
        tokio::spawn(run(inner.clone(), rx, doorbell.clone()));
        Publisher { commands, doorbell }
    }
}

/// Handles the peer's SUBSCRIBE.
pub(crate) fn subscribe(inner: &Arc<Inner>, msg: wire::Subscribe) {
    let refuse = |code: u64, reason: String| {
        inner.send(ControlMessage::SubscribeError(wire::SubscribeError {
            request_id: msg.request_id,
            code,
            reason,
        }));
    };
    let (Some(broadcast), Some(publisher)) = (inner.publish.clone(), inner.publisher.get()) else {
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
    let (start, end_group) = match msg.filter {
        FilterType::NextGroupStart => (
            Location {
                group: largest.map_or(0, |l| l.group + 1),
                object: 0,
            },
            None,
        ),
        // The draft starts after the largest object; we start at the beginning of its
        // group instead: a group is the only decodable join point, and moq-relay (which
        // subscribes upstream with this filter) drops a stream that does not start at
        // object 0. For the catalog it is also the only way to get the current one.
        FilterType::LargestObject => (
            Location {
                group: largest.map_or(0, |l| l.group),
                object: 0,
            },
            None,
        ),
        FilterType::AbsoluteStart(start) => (start, None),
        FilterType::AbsoluteRange { start, end_group } => {
            if end_group < start.group {
                return refuse(
                    wire::subscribe_error::INVALID_RANGE,
                    "end group before start".into(),
                );
            }
            (start, Some(end_group))
        }
    };
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
    track.add_doorbell(&publisher.doorbell);
    let served = Served {
        request_id: msg.request_id,
        alias,
        track,
        start,
        end_group,
        next_sequence: 0,
        streams: 0,
        pending_acks: 0,
        status: None,
        _active: ActiveGuard::new(broadcast.inner.clone()),
    };
    let _ = publisher.commands.send(Command::Serve(Box::new(served)));
    broadcast.notify_subscribed(&name);
}

/// Handles UNSUBSCRIBE: the scheduler resets the subscription's streams and sends PUBLISH_DONE.
pub(crate) fn unsubscribe(inner: &Inner, request_id: u64) {
    if let Some(publisher) = inner.publisher.get() {
        let _ = publisher.commands.send(Command::Unsubscribe(request_id));
    }
}

/// A subscription being served.
#[derive(Debug)]
pub(crate) struct Served {
    request_id: u64,
    alias: u64,
    track: Arc<TrackShared>,
    start: Location,
    end_group: Option<u64>,
    /// Creation sequence of the next group of the track not yet considered.
    next_sequence: u64,
    /// Streams opened, for PUBLISH_DONE.
    streams: u64,
    /// Finished streams whose acknowledgement we still wait for.
    pending_acks: usize,
    /// Set once no group will follow: the PUBLISH_DONE status.
    status: Option<u64>,
    _active: ActiveGuard,
}

impl Served {
    fn wants(&self, group: u64) -> bool {
        group >= self.start.group && self.end_group.is_none_or(|end| group <= end)
    }

    fn first_object(&self, group: u64) -> u64 {
        if group == self.start.group {
            self.start.object
        } else {
            0
        }
    }
}

/// A group being delivered to one subscription.
#[derive(Debug)]
struct Outgoing {
    request_id: u64,
    alias: u64,
    group: Arc<Group>,
    track: Arc<TrackShared>,
    next_object: u64,
    previous_object: Option<u64>,
    stream: Option<quinn::SendStream>,
    /// Bytes of the current object (header and payload) not yet accepted by QUIC.
    chunk: Bytes,
    /// Bytes of the current object handed to QUIC so far (0 = the object is untouched).
    chunk_written: usize,
}

impl Outgoing {
    fn started(&self) -> bool {
        self.stream.is_some()
    }

    /// Prepares the next chunk to write, if there is one; `None` when waiting for data.
    fn refill(&mut self) -> Option<()> {
        if !self.chunk.is_empty() {
            return Some(());
        }
        let payload = self.group.object(self.next_object as usize)?;
        let mut buf = Vec::with_capacity(payload.len() + 16);
        if self.stream.is_none() {
            SubgroupHeader {
                track_alias: self.alias,
                group_id: self.group.id,
                subgroup_id: SubgroupId::Zero,
                publisher_priority: self.group.priority.publisher,
                extensions_present: false,
                contains_end_of_group: true,
            }
            .encode(&mut buf);
        }
        let delta = self
            .previous_object
            .map_or(self.next_object, |p| self.next_object - p - 1);
        SubgroupObjectHeader {
            object_id_delta: delta,
            extensions: Vec::new(),
            payload_len: payload.len() as u64,
            status: ObjectStatus::Normal,
        }
        .encode(false, &mut buf);
        buf.extend_from_slice(&payload);
        self.chunk = Bytes::from(buf);
        self.chunk_written = 0;
        Some(())
    }

    /// How long the next object not yet touched has waited since it was written; the
    /// object in progress is committed and does not count.
    fn waited(&self, now: Instant) -> Option<Duration> {
        let waiting = self.next_object + u64::from(self.chunk_written > 0);
        self.group
            .written_at(waiting as usize)
            .map(|t| now.duration_since(t))
    }

    /// All objects handed over and the group closed.
    fn complete(&self) -> bool {
        self.chunk.is_empty()
            && self.group.is_closed()
            && self.next_object as usize >= self.group.len()
    }
}

/// Why a group is abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abandon {
    Superseded,
    Expired,
    Cancelled,
}

/// Delivery-rate estimate from the connection's byte counters.
#[derive(Debug, Default)]
struct RateEstimator {
    samples: VecDeque<(Instant, u64)>,
}

impl RateEstimator {
    /// Adds a sample of bytes delivered so far; returns bytes per second over the window.
    fn update(&mut self, now: Instant, delivered: u64) -> Option<f64> {
        self.samples.push_back((now, delivered));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
        let (t0, b0) = *self.samples.front()?;
        let span = now.duration_since(t0).as_secs_f64();
        (span >= RATE_WINDOW.as_secs_f64() / 2.0)
            .then(|| delivered.saturating_sub(b0) as f64 / span)
    }
}

struct Scheduler {
    inner: Arc<Inner>,
    conn: quinn::Connection,
    served: HashMap<u64, Served>,
    groups: Vec<Outgoing>,
    acks: mpsc::UnboundedSender<u64>,
    rate: RateEstimator,
    /// Bytes per second, once measured.
    bytes_per_second: Option<f64>,
}

enum Event {
    Command(Option<Command>),
    Ack(u64),
    Doorbell,
    Tick,
    Opened(Result<quinn::SendStream, quinn::ConnectionError>),
    Wrote(Result<usize, quinn::WriteError>),
}

async fn run(
    inner: Arc<Inner>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    doorbell: Arc<Notify>,
) {
    let (acks, mut ack_rx) = mpsc::unbounded_channel();
    let mut s = Scheduler {
        conn: inner.conn.clone(),
        inner,
        served: HashMap::new(),
        groups: Vec::new(),
        acks,
        rate: RateEstimator::default(),
        bytes_per_second: None,
    };
    s.conn.set_send_window(INITIAL_SEND_WINDOW);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if s.conn.close_reason().is_some() {
            return;
        }
        s.poll_tracks();
        s.finish_completed();
        s.apply_policies(Instant::now());
        s.finish_subscriptions();
        let chosen = s.pick();
        let event = match chosen {
            None => tokio::select! {
                cmd = commands.recv() => Event::Command(cmd),
                Some(id) = ack_rx.recv() => Event::Ack(id),
                _ = doorbell.notified() => Event::Doorbell,
                _ = tick.tick() => Event::Tick,
            },
            Some(i) => {
                let conn = s.conn.clone();
                let out = &mut s.groups[i];
                let started = out.started();
                tokio::select! {
                    biased;
                    res = conn.open_uni(), if !started => Event::Opened(res),
                    res = write(out), if started => Event::Wrote(res),
                    cmd = commands.recv() => Event::Command(cmd),
                    Some(id) = ack_rx.recv() => Event::Ack(id),
                    _ = doorbell.notified() => Event::Doorbell,
                    _ = tick.tick() => Event::Tick,
                }
            }
        };
        match event {
            Event::Command(None) => return,
            Event::Command(Some(Command::Serve(served))) => {
                s.served.insert(served.request_id, *served);
            }
            Event::Command(Some(Command::Unsubscribe(id))) => s.unsubscribe(id),
            Event::Ack(id) => {
                if let Some(served) = s.served.get_mut(&id) {
                    served.pending_acks = served.pending_acks.saturating_sub(1);
                }
            }
            Event::Doorbell => {}
            Event::Tick => s.update_window(),
            Event::Opened(Ok(stream)) => {
                if let Some(i) = chosen {
                    let out = &mut s.groups[i];
                    let _ = stream.set_priority(out.group.priority.quinn());
                    if let Some(served) = s.served.get_mut(&out.request_id) {
                        served.streams += 1;
                    }
                    out.stream = Some(stream);
                }
            }
            Event::Opened(Err(_)) => return,
            Event::Wrote(res) => {
                if let Some(i) = chosen {
                    s.wrote(i, res);
                }
            }
        }
    }
}

/// Writes as much of the current chunk as QUIC accepts.
async fn write(out: &mut Outgoing) -> Result<usize, quinn::WriteError> {
    let stream = out.stream.as_mut().expect("checked by the caller");
    stream.write(&out.chunk[out.chunk_written..]).await
}

fn varint(v: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(v).unwrap_or(quinn::VarInt::MAX)
}

impl Scheduler {
    /// Picks up new groups of every served track, and notices ended tracks.
    fn poll_tracks(&mut self) {
        for served in self.served.values_mut() {
            if served.status.is_some() {
                continue;
            }
            let snapshot = served.track.snapshot();
            for (sequence, group) in snapshot.groups {
                if sequence < served.next_sequence {
                    continue;
                }
                served.next_sequence = sequence + 1;
                if !served.wants(group.id) {
                    continue;
                }
                let first = served.first_object(group.id);
                self.groups.push(Outgoing {
                    request_id: served.request_id,
                    alias: served.alias,
                    track: served.track.clone(),
                    next_object: first,
                    previous_object: None,
                    stream: None,
                    chunk: Bytes::new(),
                    chunk_written: 0,
                    group,
                });
            }
            if snapshot.ended {
                served.status = Some(publish_done_code::TRACK_ENDED);
            } else if served
                .end_group
                .is_some_and(|end| served.track.largest().is_some_and(|l| l.group > end))
            {
                served.status = Some(publish_done_code::SUBSCRIPTION_ENDED);
            }
        }
    }

    /// Drops what can no longer be useful: expired data and superseded groups.
    fn apply_policies(&mut self, now: Instant) {
        let mut doomed = Vec::new();
        for (i, out) in self.groups.iter().enumerate() {
            let expired = out
                .track
                .delivery
                .max_age
                .is_some_and(|max| out.waited(now).is_some_and(|w| w > max));
            if expired {
                doomed.push((i, Abandon::Expired));
            }
        }
        // Newest group of each superseding subscription.
        let mut newest: HashMap<u64, usize> = HashMap::new();
        for (i, out) in self.groups.iter().enumerate() {
            if out.track.delivery.supersede_after.is_some() {
                let e = newest.entry(out.request_id).or_insert(i);
                if self.groups[*e].group.id < out.group.id {
                    *e = i;
                }
            }
        }
        for (i, out) in self.groups.iter().enumerate() {
            let Some(&n) = newest.get(&out.request_id) else {
                continue;
            };
            if n == i || doomed.iter().any(|(d, _)| *d == i) {
                continue;
            }
            // A group in progress keeps going while its data is fresh: cutting its tail
            // would make the receiver jump even when the link keeps up. Once stale it
            // yields to the newer group, except while its own keyframe is still going out
            // and the newer keyframe could not arrive in time either: then one picture
            // per round beats none (the thesis's 200 kbit/s starvation).
            let stale = out
                .track
                .delivery
                .supersede_after
                .is_some_and(|after| out.waited(now).is_some_and(|w| w > after));
            let keyframe_out = out.next_object > 0;
            if !out.started() || stale && (keyframe_out || self.deliverable(&self.groups[n], out)) {
                doomed.push((i, Abandon::Superseded));
            }
        }
        doomed.sort_by_key(|d| std::cmp::Reverse(d.0));
        doomed.dedup_by_key(|d| d.0);
        for (i, why) in doomed {
            self.abandon(i, why);
        }
    }

    /// Whether `newer` can deliver its first object (the keyframe) before the group after
    /// it arrives, judged by the measured rate and the spacing of `older` and `newer`.
    fn deliverable(&self, newer: &Outgoing, older: &Outgoing) -> bool {
        let Some(rate) = self.bytes_per_second else {
            return true;
        };
        let spacing = newer.group.created.duration_since(older.group.created);
        let key_bytes = newer.group.object(0).map_or(0, |b| b.len());
        rate * spacing.as_secs_f64() >= key_bytes as f64
    }

    fn abandon(&mut self, i: usize, why: Abandon) {
        let mut out = self.groups.swap_remove(i);
        let track = &out.track;
        let c = &track.counters;
        let untouched = out.group.len() as u64 - out.next_object.min(out.group.len() as u64);
        track.count(&c.objects_dropped, untouched);
        match why {
            Abandon::Superseded => track.count(&c.groups_superseded, 1),
            Abandon::Expired => track.count(&c.groups_expired, 1),
            Abandon::Cancelled => {}
        }
        if let Some(mut stream) = out.stream.take() {
            let code = match why {
                Abandon::Expired => reset_code::DELIVERY_TIMEOUT,
                Abandon::Superseded | Abandon::Cancelled => reset_code::CANCELLED,
            };
            if stream.reset(varint(code)).is_ok() {
                track.count(&c.streams_reset, 1);
            }
        }
    }

    /// The most urgent group with something to write. Within a superseding subscription a
    /// group already in progress goes first: newer groups only pre-empt it by having it
    /// abandoned.
    fn pick(&mut self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for i in 0..self.groups.len() {
            if self.groups[i].refill().is_none() {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => self.urgency_before(i, b),
            };
            if better {
                best = Some(i);
            }
        }
        best
    }

    fn urgency_before(&self, a: usize, b: usize) -> bool {
        let (a, b) = (&self.groups[a], &self.groups[b]);
        let same_sub = a.request_id == b.request_id && a.track.delivery.supersede_after.is_some();
        if same_sub && a.started() != b.started() {
            return a.started();
        }
        a.group.priority.precedes(&b.group.priority)
    }

    fn wrote(&mut self, i: usize, res: Result<usize, quinn::WriteError>) {
        let out = &mut self.groups[i];
        match res {
            Ok(n) => {
                out.chunk_written += n;
                if out.chunk_written < out.chunk.len() {
                    return;
                }
                let c = &out.track.counters;
                out.track.count(&c.objects_sent, 1);
                out.track.count(&c.bytes_sent, out.chunk.len() as u64);
                out.chunk = Bytes::new();
                out.chunk_written = 0;
                out.previous_object = Some(out.next_object);
                out.next_object += 1;
            }
            // Stopped by the peer (STOP_SENDING) or the connection is gone.
            Err(_) => {
                self.abandon(i, Abandon::Cancelled);
            }
        }
    }

    /// Closes the streams of groups that are closed and fully handed to QUIC.
    fn finish_completed(&mut self) {
        while let Some(i) = self.groups.iter().position(Outgoing::complete) {
            self.finish(i);
        }
    }

    /// Closes a completed group's stream and waits for its acknowledgement in the background.
    fn finish(&mut self, i: usize) {
        let mut out = self.groups.swap_remove(i);
        let Some(mut stream) = out.stream.take() else {
            // Nothing of it was ever wanted (e.g. an empty group): no stream to close.
            return;
        };
        if stream.finish().is_err() {
            return;
        }
        if let Some(served) = self.served.get_mut(&out.request_id) {
            served.pending_acks += 1;
        }
        let acked = stream.stopped();
        let acks = self.acks.clone();
        let id = out.request_id;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(FINISH_GRACE, acked).await;
            let _ = acks.send(id);
        });
    }

    fn unsubscribe(&mut self, request_id: u64) {
        while let Some(i) = self.groups.iter().position(|o| o.request_id == request_id) {
            self.abandon(i, Abandon::Cancelled);
        }
        if let Some(served) = self.served.get_mut(&request_id) {
            served.status = Some(publish_done_code::SUBSCRIPTION_ENDED);
        }
    }

    /// Sends PUBLISH_DONE for subscriptions with nothing left to deliver.
    fn finish_subscriptions(&mut self) {
        let finished: Vec<u64> = self
            .served
            .values()
            .filter(|s| {
                s.status.is_some()
                    && s.pending_acks == 0
                    && !self.groups.iter().any(|o| o.request_id == s.request_id)
            })
            .map(|s| s.request_id)
            .collect();
        for id in finished {
            let served = self.served.remove(&id).expect("listed above");
            self.inner
                .send(ControlMessage::PublishDone(wire::PublishDone {
                    request_id: id,
                    status: served.status.expect("checked above"),
                    stream_count: served.streams,
                    reason: String::new(),
                }));
        }
    }

    /// Keeps QUIC's buffer near what the path delivers in a round trip plus a little, so
    /// data not yet sent stays here, where it can still be dropped, and a bottleneck queue
    /// never holds more than that either. The round trip is the minimum seen: the smoothed
    /// one includes the queue this window builds, and would inflate it without bound.
    fn update_window(&mut self) {
        let stats = self.conn.stats();
        let delivered = stats.udp_tx.bytes.saturating_sub(stats.path.lost_bytes);
        self.bytes_per_second = self.rate.update(Instant::now(), delivered);
        let Some(rate) = self.bytes_per_second else {
            return;
        };
        let horizon = stats.path.min_rtt + WINDOW_SLACK;
        let window = (2.0 * rate * horizon.as_secs_f64()) as u64;
        self.conn
            .set_send_window(window.clamp(MIN_SEND_WINDOW, MAX_SEND_WINDOW));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_estimate_needs_half_a_window_of_samples() {
        let mut r = RateEstimator::default();
        let t0 = Instant::now();
        assert_eq!(r.update(t0, 0), None);
        assert_eq!(r.update(t0 + Duration::from_millis(100), 10_000), None);
        let rate = r.update(t0 + Duration::from_millis(500), 50_000).unwrap();
        assert!((rate - 100_000.0).abs() < 1.0, "{rate}");
        // Old samples fall out of the window.
        let rate = r
            .update(t0 + Duration::from_millis(2_000), 50_000)
            .unwrap_or(0.0);
        assert_eq!(rate, 0.0);
    }
}
