//! Serving the peer's subscriptions: one task per subscription that opens a stream per
//! group, at the group's priority, and writes objects as the producer appends them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use moq_wire::draft14::{
    self as wire, ControlMessage, FilterType, GroupOrder, Location, ObjectStatus, Parameters,
    SubgroupHeader, SubgroupId, SubgroupObjectHeader, publish_done_code, reset_code,
};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::session::Inner;
use crate::track::{ActiveGuard, Group, TrackShared, lock};

/// How long a finished stream may take to be acknowledged before PUBLISH_DONE goes anyway.
const FINISH_GRACE: Duration = Duration::from_secs(5);

/// A subscription we serve, as the control loop sees it.
#[derive(Debug)]
pub(crate) struct Served {
    cancel: watch::Sender<bool>,
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
    let Some(broadcast) = inner.publish.clone() else {
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
        FilterType::LargestObject => (
            largest.map_or(
                Location {
                    group: 0,
                    object: 0,
                },
                |l| Location {
                    group: l.group,
                    object: l.object + 1,
                },
            ),
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
    let (cancel, cancelled) = watch::channel(false);
    lock(&inner.state)
        .served
        .insert(msg.request_id, Served { cancel });
    inner.send(ControlMessage::SubscribeOk(wire::SubscribeOk {
        request_id: msg.request_id,
        track_alias: alias,
        expires_ms: 0,
        group_order,
        largest,
        params: Parameters::default(),
    }));
    let guard = ActiveGuard::new(broadcast.inner.clone());
    tokio::spawn(serve(
        inner.clone(),
        track,
        Subscription {
            request_id: msg.request_id,
            alias,
            start,
            end_group,
        },
        cancelled,
        guard,
    ));
}

/// Handles UNSUBSCRIBE: the serving task resets its streams and sends PUBLISH_DONE.
pub(crate) fn unsubscribe(inner: &Inner, request_id: u64) {
    if let Some(served) = lock(&inner.state).served.get(&request_id) {
        let _ = served.cancel.send(true);
    }
}

#[derive(Debug, Clone, Copy)]
struct Subscription {
    request_id: u64,
    alias: u64,
    start: Location,
    end_group: Option<u64>,
}

impl Subscription {
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

async fn serve(
    inner: Arc<Inner>,
    track: Arc<TrackShared>,
    sub: Subscription,
    mut cancelled: watch::Receiver<bool>,
    _active: ActiveGuard,
) {
    let mut changed = track.watch();
    let streams = Arc::new(AtomicU64::new(0));
    let mut senders = JoinSet::new();
    // Groups retained before the subscription are eligible too (absolute starts).
    let mut next_sequence = 0;
    let status = loop {
        changed.mark_unchanged();
        let snapshot = track.snapshot();
        for (sequence, group) in snapshot.groups {
            if sequence < next_sequence {
                continue;
            }
            next_sequence = sequence + 1;
            if sub.wants(group.id) {
                senders.spawn(send_group(
                    inner.conn.clone(),
                    group.clone(),
                    sub.alias,
                    sub.first_object(group.id),
                    cancelled.clone(),
                    streams.clone(),
                ));
            }
        }
        next_sequence = next_sequence.max(track.next_sequence());
        if snapshot.ended {
            break publish_done_code::TRACK_ENDED;
        }
        if sub
            .end_group
            .is_some_and(|end| track.largest().is_some_and(|l| l.group > end))
        {
            break publish_done_code::SUBSCRIPTION_ENDED;
        }
        tokio::select! {
            res = changed.changed() => if res.is_err() { break publish_done_code::TRACK_ENDED },
            _ = cancelled.changed() => break publish_done_code::SUBSCRIPTION_ENDED,
            Some(_) = senders.join_next(), if !senders.is_empty() => {}
        }
    };
    while senders.join_next().await.is_some() {}
    lock(&inner.state).served.remove(&sub.request_id);
    inner.send(ControlMessage::PublishDone(wire::PublishDone {
        request_id: sub.request_id,
        status,
        stream_count: streams.load(Ordering::Relaxed),
        reason: String::new(),
    }));
}

/// Sends one group on its own stream; resets it if the subscription is cancelled.
async fn send_group(
    conn: quinn::Connection,
    group: Arc<Group>,
    alias: u64,
    first_object: u64,
    mut cancelled: watch::Receiver<bool>,
    streams: Arc<AtomicU64>,
) {
    if *cancelled.borrow() {
        return;
    }
    let mut stream = tokio::select! {
        res = conn.open_uni() => match res { Ok(s) => s, Err(_) => return },
        _ = cancelled.changed() => return,
    };
    streams.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_priority(group.send_priority);
    let mut buf = Vec::new();
    SubgroupHeader {
        track_alias: alias,
        group_id: group.id,
        subgroup_id: SubgroupId::Zero,
        publisher_priority: group.publisher_priority,
        extensions_present: false,
        contains_end_of_group: true,
    }
    .encode(&mut buf);
    let mut changed = group.watch();
    let mut next = first_object;
    let mut previous: Option<u64> = None;
    loop {
        changed.mark_unchanged();
        let read = group.read_from(next as usize);
        let mut chunks = Vec::with_capacity(read.objects.len() * 2 + 1);
        for payload in read.objects {
            let delta = previous.map_or(next, |p| next - p - 1);
            SubgroupObjectHeader {
                object_id_delta: delta,
                extensions: Vec::new(),
                payload_len: payload.len() as u64,
                status: ObjectStatus::Normal,
            }
            .encode(false, &mut buf);
            chunks.push(Bytes::from(std::mem::take(&mut buf)));
            chunks.push(payload);
            previous = Some(next);
            next += 1;
        }
        if !buf.is_empty() {
            chunks.push(Bytes::from(std::mem::take(&mut buf)));
        }
        if !chunks.is_empty() {
            tokio::select! {
                res = stream.write_all_chunks(&mut chunks) => if res.is_err() { return },
                _ = cancelled.changed() => {
                    let _ = stream.reset(reset_code::CANCELLED.try_into().unwrap_or_default());
                    return;
                }
            }
        }
        if read.closed {
            break;
        }
        tokio::select! {
            res = changed.changed() => if res.is_err() { break },
            _ = cancelled.changed() => {
                let _ = stream.reset(reset_code::CANCELLED.try_into().unwrap_or_default());
                return;
            }
            _ = stream.stopped() => return,
        }
    }
    if stream.finish().is_err() {
        return;
    }
    // Wait until the peer has everything, so PUBLISH_DONE does not overtake the data.
    tokio::select! {
        _ = stream.stopped() => {}
        _ = tokio::time::sleep(FINISH_GRACE) => {}
        _ = cancelled.changed() => {
            let _ = stream.reset(reset_code::CANCELLED.try_into().unwrap_or_default());
        }
    }
}
