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
use moq_wire::message::{GroupOrder, Location, TrackNamespace};
use tokio::sync::{Notify, watch};

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
    /// A group dropped before it started still goes out, as a stream with no object, so a
    /// receiver playing in order learns not to wait for it.
    pub announce_dropped: bool,
}

impl Default for TrackDelivery {
    fn default() -> Self {
        TrackDelivery {
            group_order: GroupOrder::Ascending,
            retained_groups: 1,
            supersede_after: None,
            max_age: None,
            announce_dropped: false,
        }
    }
}

/// In the modes that skip old GoPs, a GoP in progress is given up for a newer one once its
/// unsent frames have waited this long: less is a jump at every GoP boundary even when the
/// link nearly keeps up, more is latency.
pub const SUPERSEDE_AFTER: Duration = Duration::from_millis(200);

/// How a video's tracks are delivered, by the one choice the delivery modes make for them
/// (moq-media's `DeliveryMode`: its `newest_group_first` and `splits_layers`).
impl TrackDelivery {
    /// The base layer (key and reference frames, one group per GoP). In order, every group
    /// goes out and a dropped one is announced, since an in-order player waits for each;
    /// newest first, an older group gives way to a newer one after [`SUPERSEDE_AFTER`].
    /// `max_age`: the delivery timeout, if any.
    pub fn base_layer(newest_first: bool, max_age: Option<Duration>) -> TrackDelivery {
        TrackDelivery {
            group_order: if newest_first {
                GroupOrder::Descending
            } else {
                GroupOrder::Ascending
            },
            supersede_after: newest_first.then_some(SUPERSEDE_AFTER),
            max_age,
            announce_dropped: !newest_first,
            ..TrackDelivery::default()
        }
    }

    /// The enhancement layer (non-reference frames, one group each): newest first, each
    /// given up once it waited `max_age`.
    pub fn enhancement_layer(max_age: Duration) -> TrackDelivery {
        TrackDelivery {
            group_order: GroupOrder::Descending,
            max_age: Some(max_age),
            ..TrackDelivery::default()
        }
    }
}

/// Where a group's stream stands in the send order of a session.
///
/// Lower `class` goes first (catalog, audio, video base layer, enhancement layer); within a class the
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
    /// at a time, so this only orders what is already buffered. Ranks keep their order
    /// from -2^26 to 2^26 (group numbers as ranks, older or newer first) and wrap every
    /// 2^27 beyond.
    pub fn quinn(&self) -> i32 {
        let band = (3 - i32::from(self.class.min(3))) << 27;
        band | (self.rank.wrapping_add(1 << 26).rem_euclid(1 << 27) as i32)
    }

    /// Whether `self` goes before `other`.
    pub fn precedes(&self, other: &Priority) -> bool {
        (self.class, std::cmp::Reverse(self.rank)) < (other.class, std::cmp::Reverse(other.rank))
    }
}

/// An object's payload: byte ranges sent back to back (e.g. a frame header and the access
/// unit it describes). Shared, never copied, by every subscriber it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload(Arc<[Bytes]>);

impl Payload {
    pub fn from_parts(parts: Vec<Bytes>) -> Payload {
        Payload(parts.into())
    }

    pub fn parts(&self) -> &[Bytes] {
        &self.0
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Bytes> for Payload {
    fn from(bytes: Bytes) -> Payload {
        Payload::from_parts(vec![bytes])
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
    objects: Vec<(Payload, Instant)>,
    closed: bool,
}

impl Group {
    /// Objects from `index` on, with the time each was written, and whether the group is
    /// closed (no object follows the ones returned).
    pub(crate) fn read_from(&self, index: usize) -> (Vec<(Payload, Instant)>, bool) {
        let state = lock(&self.state);
        let objects = state.objects.get(index..).unwrap_or_default().to_vec();
        (objects, state.closed)
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
    pub fn write(&self, payload: impl Into<Payload>) {
        let payload = payload.into();
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

/// Groups created since a reader last looked (see [`TrackShared::groups_since`]).
#[derive(Debug)]
pub(crate) struct NewGroups {
    /// Groups with their creation sequence numbers, oldest first.
    pub groups: Vec<(u64, Arc<Group>)>,
    /// The sequence number to ask for next time.
    pub next: u64,
    /// Groups the reader never saw: they left the history before it looked.
    pub missed: u64,
    pub ended: bool,
}

/// How long a track keeps groups beyond `retained_groups`, so a session that is busy
/// for a moment still finds every group it has not read yet.
const HISTORY: Duration = Duration::from_secs(2);

/// An object QUIC took whole for one subscriber: the end of its wait in the publisher.
/// From there it is QUIC's to send, as the congestion window allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handoff {
    pub group: u64,
    pub object: u64,
    /// When the producer wrote it.
    pub written: Instant,
    /// When QUIC took its last byte.
    pub taken: Instant,
}

/// Told of every [`Handoff`] of a broadcast, with the track's name. Called on the
/// session's task: it must not block.
pub type HandoffHook = Arc<dyn Fn(&str, Handoff) + Send + Sync>;

/// Told the track name of every new subscription (e.g. to ask the encoder for a keyframe,
/// so a new viewer need not wait for the next GoP); answers whether a new group of that
/// track is on its way because of it. Called on the session's task: it must not block.
pub type SubscribeHook = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// A track's [`HandoffHook`], with the name it reports.
#[derive(Clone)]
pub(crate) struct HandoffReport {
    track: String,
    hook: HandoffHook,
}

impl HandoffReport {
    pub fn new(track: &str, hook: HandoffHook) -> HandoffReport {
        HandoffReport {
            track: track.to_owned(),
            hook,
        }
    }
}

impl std::fmt::Debug for HandoffReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandoffReport")
            .field("track", &self.track)
            .finish_non_exhaustive()
    }
}

/// Delivery counters of one track, summed over every session serving it.
#[derive(Debug, Default)]
pub(crate) struct TrackCounters {
    /// Where hand-offs are reported, if anyone asked.
    pub handoff: Option<HandoffReport>,
    pub objects_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub objects_dropped: AtomicU64,
    pub groups_superseded: AtomicU64,
    pub groups_expired: AtomicU64,
    pub groups_over_budget: AtomicU64,
    pub groups_missed: AtomicU64,
    pub streams_reset: AtomicU64,
}

impl TrackCounters {
    pub fn add(&self, counter: impl Fn(&TrackCounters) -> &AtomicU64, n: u64) {
        counter(self).fetch_add(n, Ordering::Relaxed);
    }

    /// Counts an object QUIC took whole and reports it to the broadcast's hook.
    pub fn handed_off(&self, handoff: Handoff, bytes: usize) {
        self.add(|c| &c.objects_sent, 1);
        self.add(|c| &c.bytes_sent, bytes as u64);
        if let Some(report) = &self.handoff {
            (report.hook)(&report.track, handoff);
        }
    }
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
    /// Groups abandoned because a subscriber's backlog exceeded its budget.
    pub groups_over_budget: u64,
    /// Groups a busy session never saw: they left the track's history first.
    pub groups_missed: u64,
    /// Streams reset (RESET_STREAM) after they had started.
    pub streams_reset: u64,
    /// Open sessions that have subscribed to the track.
    pub sessions: u64,
}

#[derive(Debug)]
pub(crate) struct TrackShared {
    pub name: String,
    pub delivery: TrackDelivery,
    state: Mutex<TrackState>,
    /// Schedulers of the sessions serving this track.
    doorbells: Mutex<Vec<Weak<Notify>>>,
    pub counters: Arc<TrackCounters>,
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

    /// Sessions serving the track that are still open: a session's doorbell lives as long
    /// as the session, and is added once per subscription it makes.
    fn sessions(&self) -> usize {
        let mut open: Vec<*const Notify> = lock(&self.doorbells)
            .iter()
            .filter_map(|bell| bell.upgrade().map(|b| Arc::as_ptr(&b)))
            .collect();
        open.sort();
        open.dedup();
        open.len()
    }

    /// Groups with a creation sequence number of `sequence` or more.
    pub(crate) fn groups_since(&self, sequence: u64) -> NewGroups {
        let state = lock(&self.state);
        let first = state.groups_created - state.groups.len() as u64;
        let from = sequence.max(first);
        let skip = usize::try_from(from - first).unwrap_or(usize::MAX);
        NewGroups {
            groups: (from..)
                .zip(state.groups.iter().skip(skip).cloned())
                .collect(),
            next: state.groups_created,
            missed: from - sequence.min(from),
            ended: state.ended,
        }
    }

    /// Sequence number of the oldest group a new subscriber may still start from.
    pub(crate) fn oldest_joinable(&self) -> u64 {
        let state = lock(&self.state);
        let kept = (state.groups.len() as u64).min(self.delivery.retained_groups.max(1) as u64);
        state.groups_created - kept
    }

    /// The groups the track holds (oldest first), and whether it ended.
    pub(crate) fn held_groups(&self) -> (Vec<Arc<Group>>, bool) {
        let state = lock(&self.state);
        (state.groups.iter().cloned().collect(), state.ended)
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
        let retained = self.shared.delivery.retained_groups.max(1);
        while state.groups.len() > retained
            && state
                .groups
                .front()
                .is_some_and(|g| g.created.elapsed() > HISTORY)
        {
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
            groups_over_budget: get(&c.groups_over_budget),
            groups_missed: get(&c.groups_missed),
            streams_reset: get(&c.streams_reset),
            sessions: self.shared.sessions() as u64,
        }
    }
}

/// A namespace of tracks served to subscribers.
#[derive(Debug, Clone)]
pub struct Broadcast {
    pub(crate) inner: Arc<BroadcastInner>,
}

pub(crate) struct BroadcastInner {
    pub namespace: TrackNamespace,
    tracks: Mutex<HashMap<Vec<u8>, Arc<TrackShared>>>,
    /// Number of subscriptions currently being served, across sessions.
    pub active: watch::Sender<usize>,
    /// Told the track name of every new subscription.
    subscribed: Mutex<Option<SubscribeHook>>,
    /// Given to the tracks created from then on.
    handoff: Mutex<Option<HandoffReport>>,
}

impl std::fmt::Debug for BroadcastInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BroadcastInner")
            .field("namespace", &self.namespace)
            .field("tracks", &self.tracks)
            .field("active", &self.active)
            .field("handoff", &self.handoff)
            .finish_non_exhaustive()
    }
}

impl Broadcast {
    pub fn new(namespace: TrackNamespace) -> Broadcast {
        Broadcast {
            inner: Arc::new(BroadcastInner {
                namespace,
                tracks: Mutex::default(),
                active: watch::channel(0).0,
                subscribed: Mutex::default(),
                handoff: Mutex::default(),
            }),
        }
    }

    pub fn namespace(&self) -> &TrackNamespace {
        &self.inner.namespace
    }

    /// Creates (or replaces) a track.
    pub fn create_track(&self, name: &str, delivery: TrackDelivery) -> TrackProducer {
        let handoff = lock(&self.inner.handoff)
            .as_ref()
            .map(|any| HandoffReport::new(name, any.hook.clone()));
        let shared = Arc::new(TrackShared {
            name: name.to_owned(),
            delivery,
            state: Mutex::default(),
            doorbells: Mutex::default(),
            counters: Arc::new(TrackCounters {
                handoff,
                ..TrackCounters::default()
            }),
        });
        lock(&self.inner.tracks).insert(name.as_bytes().to_vec(), shared.clone());
        TrackProducer { shared }
    }

    /// Ends a track and takes it off the broadcast: new subscriptions to it are refused,
    /// current ones finish once they have everything.
    pub fn remove_track(&self, name: &str) {
        if let Some(shared) = lock(&self.inner.tracks).remove(name.as_bytes()) {
            TrackProducer { shared }.finish();
        }
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

    /// Calls `hook` with the track name of every new subscription, before it is served.
    pub fn on_subscribe(&self, hook: SubscribeHook) {
        *lock(&self.inner.subscribed) = Some(hook);
    }

    /// Reports every object QUIC takes whole, per subscriber, on the tracks created from
    /// now on: how long the publisher held it is the first stage of its delay.
    pub fn on_handoff(&self, hook: HandoffHook) {
        *lock(&self.inner.handoff) = Some(HandoffReport::new("", hook));
    }

    /// Tells the hook of a new subscription to `track`: whether a new group of it is on
    /// its way because of it.
    pub(crate) fn notify_subscribed(&self, track: &str) -> bool {
        let hook = lock(&self.inner.subscribed).clone();
        hook.is_some_and(|hook| hook(track))
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

    fn bytes(payload: &Payload) -> Vec<u8> {
        payload.parts().concat()
    }

    #[test]
    fn groups_close_when_superseded_and_keep_objects_in_order() {
        let b = broadcast();
        let t = b.create_track("video", TrackDelivery::default());
        assert_eq!(t.shared.largest(), None);
        let g0 = t.create_group(0, P);
        g0.write(Bytes::from_static(b"a"));
        g0.write(Payload::from_parts(vec![
            Bytes::from_static(b"b"),
            Bytes::from_static(b"c"),
        ]));
        assert_eq!(
            t.shared.largest(),
            Some(Location {
                group: 0,
                object: 1
            })
        );
        let new = t.shared.groups_since(0);
        assert_eq!((new.next, new.missed, new.ended), (1, 0, false));
        let first = new.groups[0].1.clone();
        let (objects, closed) = first.read_from(1);
        assert_eq!(objects.len(), 1);
        assert_eq!(bytes(&objects[0].0), b"bc");
        assert_eq!(objects[0].0.len(), 2);
        assert!(!closed);
        assert!(first.read_from(5).0.is_empty());
        let _g1 = t.create_group(1, P);
        assert!(first.read_from(2).1, "a new group closes the previous one");
        // Writing into a closed group is ignored rather than corrupting a finished stream.
        g0.write(Bytes::from_static(b"late"));
        assert_eq!(first.len(), 2);
        let new = t.shared.groups_since(1);
        assert_eq!(new.groups.len(), 1);
        assert_eq!((new.groups[0].0, new.groups[0].1.id), (1, 1));
        // A new subscriber starts from the retained groups only (one by default).
        assert_eq!(t.shared.oldest_joinable(), 1);
    }

    #[test]
    fn history_outlives_retention_briefly_then_counts_missed_groups() {
        let b = broadcast();
        let t = b.create_track("video-enh", TrackDelivery::default());
        for id in 0..5 {
            t.create_group(id, P).write(Bytes::from_static(b"x"));
        }
        // Recent groups stay for a reader that fell behind.
        let new = t.shared.groups_since(0);
        assert_eq!(new.groups.len(), 5);
        assert_eq!(new.missed, 0);
        let mut state = lock(&t.shared.state);
        state.groups.drain(..3);
        drop(state);
        let new = t.shared.groups_since(1);
        assert_eq!(new.missed, 2);
        assert_eq!(
            new.groups.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(new.next, 5);
    }

    #[test]
    fn the_base_layer_in_order_announces_drops_and_newest_first_gives_way() {
        let in_order = TrackDelivery::base_layer(false, None);
        assert_eq!(in_order.group_order, GroupOrder::Ascending);
        assert!(
            in_order.announce_dropped,
            "an in-order player waits for each"
        );
        assert_eq!(in_order.supersede_after, None);
        assert_eq!(in_order.max_age, None);
        let timeout = Some(Duration::from_millis(300));
        let newest = TrackDelivery::base_layer(true, timeout);
        assert_eq!(newest.group_order, GroupOrder::Descending);
        assert!(!newest.announce_dropped);
        assert_eq!(newest.supersede_after, Some(SUPERSEDE_AFTER));
        assert_eq!(newest.max_age, timeout);
        let enhancement = TrackDelivery::enhancement_layer(Duration::from_millis(500));
        assert_eq!(enhancement.group_order, GroupOrder::Descending);
        assert_eq!(enhancement.max_age, Some(Duration::from_millis(500)));
        assert_eq!(enhancement.supersede_after, None);
        assert!(!enhancement.announce_dropped);
    }

    #[test]
    fn sessions_count_each_open_session_once() {
        let t = broadcast().create_track("video", TrackDelivery::default());
        let (a, b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        t.shared.add_doorbell(&a);
        t.shared.add_doorbell(&a);
        t.shared.add_doorbell(&b);
        assert_eq!(t.stats().sessions, 2, "a subscribing twice counts once");
        drop(b);
        assert_eq!(t.stats().sessions, 1, "a closed session no longer counts");
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
        let new = t.shared.groups_since(0);
        assert!(new.ended);
        assert!(new.groups[0].1.read_from(0).1);
        drop(g);
        assert!(b.track(b"video").is_some());
        assert!(b.track(b"audio").is_none());
    }

    #[test]
    fn the_subscribe_hook_answers_whether_a_new_group_comes() {
        let b = broadcast();
        assert!(!b.notify_subscribed("video"), "no hook: nothing comes");
        let told = Arc::new(Mutex::new(Vec::new()));
        let seen = told.clone();
        b.on_subscribe(Arc::new(move |track: &str| {
            lock(&seen).push(track.to_owned());
            track == "video"
        }));
        assert!(b.notify_subscribed("video"));
        assert!(!b.notify_subscribed("catalog"));
        assert_eq!(*lock(&told), ["video", "catalog"]);
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
        assert!(p(2, 0).quinn() > p(3, (1 << 27) - 1).quinn());
        assert!(p(3, -1).quinn() >= 0);
        // Group numbers as ranks, older first (-group) or newest first (group): no wrap
        // between the first groups.
        assert!(p(2, 0).quinn() > p(2, -1).quinn());
        assert!(p(2, 1).quinn() > p(2, 0).quinn());
    }

    #[test]
    fn a_removed_track_is_ended_and_gone() {
        let b = broadcast();
        let t = b.create_track("audio", TrackDelivery::default());
        b.remove_track("audio");
        assert!(b.track(b"audio").is_none());
        assert!(lock(&t.shared.state).ended);
        b.remove_track("audio");
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
