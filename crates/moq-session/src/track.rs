//! Publisher-side tracks: what a media producer writes and subscriptions read.
//!
//! Writing never waits: a producer appends objects under a short lock and bumps a watch
//! counter; every subscription runs its own tasks that read at their own pace. A track
//! keeps only its most recent groups, so a slow subscriber holds on to the groups it is
//! still sending (they are reference counted), never the producer.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use moq_wire::draft14::{GroupOrder, Location, TrackNamespace};
use tokio::sync::watch;

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
}

impl Default for TrackDelivery {
    fn default() -> Self {
        TrackDelivery {
            group_order: GroupOrder::Ascending,
            retained_groups: 1,
        }
    }
}

/// One group: objects in order, all sent on one stream.
#[derive(Debug)]
pub struct Group {
    pub id: u64,
    /// QUIC send priority of the stream (quinn: higher first).
    pub send_priority: i32,
    /// Publisher priority written in the subgroup header (MoQ: lower first).
    pub publisher_priority: u8,
    state: Mutex<GroupState>,
    changed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct GroupState {
    objects: Vec<Bytes>,
    closed: bool,
}

/// Objects of a group from some index on, and whether more may follow.
#[derive(Debug)]
pub(crate) struct GroupRead {
    pub objects: Vec<Bytes>,
    pub closed: bool,
}

impl Group {
    pub(crate) fn read_from(&self, index: usize) -> GroupRead {
        let state = lock(&self.state);
        GroupRead {
            objects: state.objects.get(index..).unwrap_or_default().to_vec(),
            closed: state.closed,
        }
    }

    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn len(&self) -> usize {
        lock(&self.state).objects.len()
    }

    fn close(&self) {
        let mut state = lock(&self.state);
        if !state.closed {
            state.closed = true;
            drop(state);
            self.changed.send_modify(|v| *v += 1);
        }
    }
}

/// Writes objects into one group. Dropping it closes the group.
#[derive(Debug)]
pub struct GroupWriter {
    group: Arc<Group>,
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
        state.objects.push(payload);
        drop(state);
        self.group.changed.send_modify(|v| *v += 1);
    }

    pub fn close(self) {}
}

impl Drop for GroupWriter {
    fn drop(&mut self) {
        self.group.close();
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

#[derive(Debug)]
pub(crate) struct TrackShared {
    pub name: String,
    pub delivery: TrackDelivery,
    state: Mutex<TrackState>,
    changed: watch::Sender<u64>,
}

impl TrackShared {
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
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

    /// Sequence number the next created group will get.
    pub(crate) fn next_sequence(&self) -> u64 {
        lock(&self.state).groups_created
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
    pub fn create_group(&self, id: u64, send_priority: i32, publisher_priority: u8) -> GroupWriter {
        let group = Arc::new(Group {
            id,
            send_priority,
            publisher_priority,
            state: Mutex::default(),
            changed: watch::channel(0).0,
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
        self.shared.changed.send_modify(|v| *v += 1);
        GroupWriter { group }
    }

    /// Ends the track: no group follows; subscriptions finish once their groups are sent.
    pub fn finish(&self) {
        let mut state = lock(&self.shared.state);
        if let Some(last) = state.groups.back() {
            last.close();
        }
        state.ended = true;
        drop(state);
        self.shared.changed.send_modify(|v| *v += 1);
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
}

impl Broadcast {
    pub fn new(namespace: TrackNamespace) -> Broadcast {
        Broadcast {
            inner: Arc::new(BroadcastInner {
                namespace,
                tracks: Mutex::default(),
                active: watch::channel(0).0,
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
            changed: watch::channel(0).0,
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

    #[test]
    fn groups_close_when_superseded_and_keep_objects_in_order() {
        let b = broadcast();
        let t = b.create_track("video", TrackDelivery::default());
        assert_eq!(t.shared.largest(), None);
        let g0 = t.create_group(0, 5, 1);
        g0.write(Bytes::from_static(b"a"));
        g0.write(Bytes::from_static(b"b"));
        assert_eq!(
            t.shared.largest(),
            Some(Location {
                group: 0,
                object: 1
            })
        );
        let first = t.shared.snapshot().groups[0].1.clone();
        let read = first.read_from(1);
        assert_eq!(read.objects, [Bytes::from_static(b"b")]);
        assert!(!read.closed);
        let _g1 = t.create_group(1, 6, 1);
        assert!(first.read_from(0).closed);
        // Writing into a closed group is ignored rather than corrupting a finished stream.
        g0.write(Bytes::from_static(b"late"));
        assert_eq!(first.read_from(0).objects.len(), 2);
        let snap = t.shared.snapshot();
        assert_eq!(snap.groups.len(), 1, "only the newest group is retained");
        assert_eq!(snap.groups[0].0, 1);
        assert!(!snap.ended);
    }

    #[test]
    fn finish_ends_the_track_and_closes_the_open_group() {
        let b = broadcast();
        let t = b.create_track("video", TrackDelivery::default());
        let mut watch = t.shared.watch();
        let g = t.create_group(3, 0, 0);
        b.finish();
        assert!(watch.has_changed().unwrap());
        watch.mark_unchanged();
        let snap = t.shared.snapshot();
        assert!(snap.ended);
        assert!(snap.groups[0].1.read_from(0).closed);
        drop(g);
        assert!(b.track(b"video").is_some());
        assert!(b.track(b"audio").is_none());
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
