//! Publisher-side tracks: what a media producer writes and subscriptions read.
//!
//! Writing never waits: a producer appends objects under a short lock and rings the
//! doorbell of every session serving the track. Each session's scheduler then decides,
//! at its own pace, what to hand to QUIC. A track keeps only its most recent groups; a
//! session still sending an older group holds it by reference, never the producer.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_wire::draft14::{GroupOrder, Location, TrackNamespace};
use tokio::sync::{Notify, mpsc, watch};

/// Locks a mutex, recovering the data if a panicking thread poisoned it: every critical
/// section here leaves the state consistent, so the data stays usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How a track's groups are delivered to its subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackDelivery {
    /// Group order announced in SUBSCRIBE_OK when the subscriber leaves the choice to us.
    pub group_order: GroupOrder,
    /// How many recent groups a new subscriber with an absolute start can still get.
    pub retained_groups: usize,
    /// A newer group makes older ones worthless: an older group not started yet is
    /// dropped, and one in progress once its unsent data has waited longer than this and
    /// the newer group can be delivered (its stream is reset). `None`: groups never
    /// supersede each other.
    pub supersede_after: Option<Duration>,
    /// Objects not yet handed to QUIC this long after they were written are dropped with
    /// the rest of their group (the stream is reset if it was started).
    pub max_age: Option<Duration>,
}

impl Default for TrackDelivery {
    fn default() -> Self {
        TrackDelivery {
            group_order: GroupOrder::Ascending,
            retained_groups: 1,
            supersede_after: None,
            max_age: None,
        }
    }
}

/// Where a group's stream stands in the send order of a session.
///
/// Lower `class` goes first (catalog, base layer, enhancement layer); within a class the
/// higher `rank` goes first. Ranks are 64-bit, so a rank per group or per frame never
/// wraps in practice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub class: u8,
    pub rank: i64,
    /// Publisher priority written in the subgroup header, for relays (lower first).
    pub publisher: u8,
}

impl Priority {
    /// quinn's stream priority (higher first). The scheduler hands QUIC only a little data
    /// at a time, so this only orders what is already buffered; ranks wrap every 2^27.
    pub fn quinn(&self) -> i32 {
        let band = (3 - i32::from(self.class.min(3))) << 27;
        band | (self.rank.rem_euclid(1 << 27) as i32)
    }

    /// Whether `self` goes before `other`.
    pub fn precedes(&self, other: &Priority) -> bool {
        (self.class, std::cmp::Reverse(self.rank)) < (other.class, std::cmp::Reverse(other.rank))
    }
}

/// One group: objects in order, all sent on one stream.
#[derive(Debug)]
pub struct Group {
    pub id: u64,
    pub priority: Priority,
    pub created: Instant,
    state: Mutex<GroupState>,
}

#[derive(Debug, Default)]
struct GroupState {
    /// Payloads with the time each was written.
    objects: Vec<(Bytes, Instant)>,
    closed: bool,
}

impl Group {
    /// The object at `index`, if written yet.
    pub(crate) fn object(&self, index: usize) -> Option<Bytes> {
        lock(&self.state).objects.get(index).map(|(b, _)| b.clone())
    }

    /// When the object at `index` was written, if it was.
    pub(crate) fn written_at(&self, index: usize) -> Option<Instant> {
        lock(&self.state).objects.get(index).map(|(_, t)| *t)
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.state).objects.len()
    }

    fn close(&self) -> bool {
        let mut state = lock(&self.state);
        !std::mem::replace(&mut state.closed, true)
    }
}

/// Writes objects into one group. Dropping it closes the group.
#[derive(Debug)]
pub struct GroupWriter {
    group: Arc<Group>,
    track: Arc<TrackShared>,
}

impl GroupWriter {
    pub fn id(&self) -> u64 {
        self.group.id
    }

    /// Appends the next object (object IDs are contiguous from 0).
    pub fn write(&self, payload: Bytes) {
        let mut state = lock(&self.group.state);
        if state.closed {
            return;
        }
        state.objects.push((payload, Instant::now()));
        drop(state);
        self.track.ring();
    }

    pub fn close(self) {}
}

impl Drop for GroupWriter {
    fn drop(&mut self) {
        if self.group.close() {
            self.track.ring();
        }
    }
}

#[derive(Debug, Default)]
struct TrackState {
    groups: VecDeque<Arc<Group>>,
    /// Incremented for every new group, so readers can tell which ones they have seen.
    groups_created: u64,
    ended: bool,
}

/// What a subscription sees of a track at one moment.
#[derive(Debug)]
pub(crate) struct TrackSnapshot {
    /// Retained groups with their creation sequence numbers, oldest first.
    pub groups: Vec<(u64, Arc<Group>)>,
    pub ended: bool,
}

/// Delivery counters of one track, summed over every session serving it.
#[derive(Debug, Default)]
pub(crate) struct TrackCounters {
    pub objects_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub objects_dropped: AtomicU64,
    pub groups_superseded: AtomicU64,
    pub groups_expired: AtomicU64,
    pub streams_reset: AtomicU64,
}

/// A snapshot of a track's delivery counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackStats {
    /// Objects handed to QUIC, over all subscribers.
    pub objects_sent: u64,
    pub bytes_sent: u64,
    /// Objects dropped before being handed to QUIC (superseded or too old).
    pub objects_dropped: u64,
    /// Groups abandoned because a newer group could be delivered.
    pub groups_superseded: u64,
    /// Groups abandoned because their data waited longer than the delivery timeout.
    pub groups_expired: u64,
    /// Streams reset (RESET_STREAM) after they had started.
    pub streams_reset: u64,
}

#[derive(Debug)]
pub(crate) struct TrackShared {
    pub name: String,
    pub delivery: TrackDelivery,
    state: Mutex<TrackState>,
    /// Schedulers of the sessions serving this track.
    doorbells: Mutex<Vec<Weak<Notify>>>,
    pub counters: TrackCounters,
}

impl TrackShared {
    /// Wakes every session serving the track.
    fn ring(&self) {
        let mut bells = lock(&self.doorbells);
        bells.retain(|bell| match bell.upgrade() {
            Some(bell) => {
                bell.notify_one();
                true
            }
            None => false,
        });
    }

    pub(crate) fn add_doorbell(&self, bell: &Arc<Notify>) {
        lock(&self.doorbells).push(Arc::downgrade(bell));
    }

    pub(crate) fn snapshot(&self) -> TrackSnapshot {
        let state = lock(&self.state);
        let first_seq = state.groups_created - state.groups.len() as u64;
        TrackSnapshot {
            groups: (first_seq..).zip(state.groups.iter().cloned()).collect(),
            ended: state.ended,
        }
    }

    /// Location of the newest object, if anything was published.
    pub(crate) fn largest(&self) -> Option<Location> {
        let state = lock(&self.state);
        let group = state.groups.back()?;
        Some(Location {
            group: group.id,
            object: group.len().saturating_sub(1) as u64,
        })
    }

    pub(crate) fn count(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Produces one track. Cheap to clone; all clones write the same track.
#[derive(Debug, Clone)]
pub struct TrackProducer {
    pub(crate) shared: Arc<TrackShared>,
}

impl TrackProducer {
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Starts a new group; the previous one is closed. Group IDs must increase.
    pub fn create_group(&self, id: u64, priority: Priority) -> GroupWriter {
        let group = Arc::new(Group {
            id,
            priority,
            created: Instant::now(),
            state: Mutex::default(),
        });
        let mut state = lock(&self.shared.state);
        if let Some(previous) = state.groups.back() {
            previous.close();
        }
        state.groups.push_back(group.clone());
        state.groups_created += 1;
        while state.groups.len() > self.shared.delivery.retained_groups.max(1) {
            state.groups.pop_front();
        }
        drop(state);
        self.shared.ring();
        GroupWriter {
            group,
            track: self.shared.clone(),
        }
    }

    /// Ends the track: no group follows; subscriptions finish once their groups are sent.
    pub fn finish(&self) {
        let mut state = lock(&self.shared.state);
        if let Some(last) = state.groups.back() {
            last.close();
        }
        state.ended = true;
        drop(state);
        self.shared.ring();
    }

    /// Delivery counters so far, over all subscribers.
    pub fn stats(&self) -> TrackStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TrackStats {
            objects_sent: get(&c.objects_sent),
            bytes_sent: get(&c.bytes_sent),
            objects_dropped: get(&c.objects_dropped),
            groups_superseded: get(&c.groups_superseded),
            groups_expired: get(&c.groups_expired),
            streams_reset: get(&c.streams_reset),
        }
    }
}

/// A namespace of tracks served to subscribers.
#[derive(Debug, Clone)]
pub struct Broadcast {
    pub(crate) inner: Arc<BroadcastInner>,
}

#[derive(Debug)]
pub(crate) struct BroadcastInner {
    pub namespace: TrackNamespace,
    tracks: Mutex<HashMap<Vec<u8>, Arc<TrackShared>>>,
    /// Number of subscriptions currently being served, across sessions.
    pub active: watch::Sender<usize>,
    /// Told the track name of every new subscription.
    subscribed: Mutex<Option<mpsc::UnboundedSender<String>>>,
}

impl Broadcast {
    pub fn new(namespace: TrackNamespace) -> Broadcast {
        Broadcast {
            inner: Arc::new(BroadcastInner {
                namespace,
                tracks: Mutex::default(),
                active: watch::channel(0).0,
                subscribed: Mutex::default(),
            }),
        }
    }

    pub fn namespace(&self) -> &TrackNamespace {
        &self.inner.namespace
    }

    /// Creates (or replaces) a track.
    pub fn create_track(&self, name: &str, delivery: TrackDelivery) -> TrackProducer {
        let shared = Arc::new(TrackShared {
            name: name.to_owned(),
            delivery,
            state: Mutex::default(),
            doorbells: Mutex::default(),
            counters: TrackCounters::default(),
        });
        lock(&self.inner.tracks).insert(name.as_bytes().to_vec(), shared.clone());
        TrackProducer { shared }
    }

    pub(crate) fn track(&self, name: &[u8]) -> Option<Arc<TrackShared>> {
        lock(&self.inner.tracks).get(name).cloned()
    }

    /// Ends every track.
    pub fn finish(&self) {
        let tracks: Vec<_> = lock(&self.inner.tracks).values().cloned().collect();
        for shared in tracks {
            TrackProducer { shared }.finish();
        }
    }

    /// Sends the track name of every new subscription to `tx` (e.g. to ask the encoder
    /// for a keyframe so a new viewer need not wait for the next GoP).
    pub fn on_subscribe(&self, tx: mpsc::UnboundedSender<String>) {
        *lock(&self.inner.subscribed) = Some(tx);
    }

    pub(crate) fn notify_subscribed(&self, track: &str) {
        if let Some(tx) = lock(&self.inner.subscribed).as_ref() {
            let _ = tx.send(track.to_owned());
        }
    }

    /// Number of subscriptions being served right now.
    pub fn active_subscriptions(&self) -> usize {
        *self.inner.active.borrow()
    }

    /// Waits until no subscription is being served (all ended tracks fully sent).
    pub async fn drained(&self) {
        let mut rx = self.inner.active.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

/// Counts a served subscription for [`Broadcast::drained`] while alive.
#[derive(Debug)]
pub(crate) struct ActiveGuard(Arc<BroadcastInner>);

impl ActiveGuard {
    pub fn new(inner: Arc<BroadcastInner>) -> ActiveGuard {
        inner.active.send_modify(|n| *n += 1);
        ActiveGuard(inner)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.send_modify(|n| *n -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broadcast() -> Broadcast {
        Broadcast::new(TrackNamespace(vec![b"live".to_vec()]))
    }

    const P: Priority = Priority {
        class: 1,
        rank: 0,
        publisher: 64,
    };

    #[test]
    fn groups_close_when_superseded_and_keep_objects_in_order() {
        let b = broadcast();
        let t = b.create_track("video", TrackDelivery::default());
        assert_eq!(t.shared.largest(), None);
        let g0 = t.create_group(0, P);
        g0.write(Bytes::from_static(b"a"));
        g0.write(Bytes::from_static(b"bc"));
        assert_eq!(
            t.shared.largest(),
            Some(Location {
                group: 0,
                object: 1
            })
        );
        let first = t.shared.snapshot().groups[0].1.clone();
        assert_eq!(first.object(1), Some(Bytes::from_static(b"bc")));
        assert!(first.written_at(1).is_some() && first.written_at(2).is_none());
        assert!(!first.is_closed());
        let _g1 = t.create_group(1, P);
        assert!(first.is_closed());
        // Writing into a closed group is ignored rather than corrupting a finished stream.
        g0.write(Bytes::from_static(b"late"));
        assert_eq!(first.len(), 2);
        let snap = t.shared.snapshot();
        assert_eq!(snap.groups.len(), 1, "only the newest group is retained");
        assert_eq!(snap.groups[0].0, 1);
        assert!(!snap.ended);
    }

    #[test]
    fn writers_ring_every_serving_session_and_finish_ends_the_track() {
        let b = broadcast();
        let t = b.create_track("video", TrackDelivery::default());
        let bell = Arc::new(Notify::new());
        t.shared.add_doorbell(&bell);
        let g = t.create_group(3, P);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // notify_one keeps a permit, so a ring before the wait is not lost.
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), bell.notified())
                .await
                .unwrap();
        });
        b.finish();
        let snap = t.shared.snapshot();
        assert!(snap.ended);
        assert!(snap.groups[0].1.is_closed());
        drop(g);
        assert!(b.track(b"video").is_some());
        assert!(b.track(b"audio").is_none());
    }

    #[test]
    fn priorities_order_by_class_then_rank_far_beyond_i32() {
        let p = |class, rank| Priority {
            class,
            rank,
            publisher: 0,
        };
        assert!(p(0, -5).precedes(&p(1, 1 << 40)));
        assert!(p(1, (1 << 40) + 1).precedes(&p(1, 1 << 40)));
        assert!(p(1, -(1 << 40)).precedes(&p(2, 1 << 50)));
        assert!(!p(1, 7).precedes(&p(1, 7)));
        assert!(p(0, 0).quinn() > p(1, i64::MAX).quinn());
        assert!(p(1, 0).quinn() > p(2, (1 << 27) - 1).quinn());
        assert!(p(2, 11).quinn() > p(2, 10).quinn());
    }

    #[test]
    fn active_guard_counts_subscriptions() {
        let b = broadcast();
        assert_eq!(b.active_subscriptions(), 0);
        let g = ActiveGuard::new(b.inner.clone());
        assert_eq!(b.active_subscriptions(), 1);
        drop(g);
        assert_eq!(b.active_subscriptions(), 0);
    }
}
