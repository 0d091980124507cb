//! The network side of moqsrc: connect, read the catalog, pick the tracks to play,
//! subscribe to them and forward each one's frames to its pad. Free of GStreamer.
//!
//! Bounded both ways. Each track's items wait in a bounded channel of its own; when a
//! pad stops pulling, only that track's forwarding waits, its streams stop being read and
//! QUIC's flow control throttles the publisher, while the other tracks play on. While the
//! element is paused the media subscriptions are dropped (a live source captures nothing
//! in PAUSED) and taken up again at the live edge on resume; each subscription round has
//! its own epoch, so a pad can tell stale frames from new ones.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moq_media::catalog::{self, Catalog, MediaFormat, TrackEntry, TrackRole};
use moq_media::clock::unix_now_us_i64;
use moq_media::hang::{self, HangReader};
use moq_media::header::FrameHeader;
use moq_session::{
    FilterType, Location, MoveCause, Session, SessionConfig, SessionError, SubscribeOptions,
    Subscription, TrackEvent, TrackNamespace, Version,
};
use moq_wire::message::publish_done_code;
use moqt_common::lock;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use moq_player::handover::PlayedFrames;
use moq_player::renditions::AbrPrefs;
use moq_player::select::{self, Choice, MediaKind, Selected};
use moq_player::silence::SilenceWatch;
use moq_player::splice::Renumber;
use moq_player::switch::{Action, Switcher};

use super::moving::{self, Move, Moved, Moving};
use super::upstream::{Payload, ReceiverConfig, Server, subscribe, subscribe_from};

/// Delay between connection attempts.
const RETRY_INTERVAL: Duration = Duration::from_millis(250);
/// How long what the publisher says does not exist (its broadcast, a track named by the
/// user) is asked for again before that is an error, when nothing has played yet.
const MISSING_GRACE: Duration = Duration::from_secs(1);
/// How long one server is tried before the next (or the same one again); attempts start
/// every second within it, the earlier ones kept going ([`moq_session::connect_within`]),
/// so a returning server is found soon and a path slow to connect still connects.
const CONNECT_WITHIN: Duration = Duration::from_secs(3);
/// With backup servers, a session that delivers no media for this long is given up for
/// the next server: a dead relay sends nothing, and QUIC's idle timeout is longer.
const FAILOVER_SILENCE: Duration = Duration::from_secs(2);
/// With backup servers, a session whose relay's route went quiet is asked again for the
/// broadcast, and given up for the next server when nothing comes this long (and two round
/// trips) after: a route made again delivers the rest of its group at once, one still
/// broken (or a catalog that does not come) nothing.
const REROUTE_WAIT: Duration = Duration::from_millis(300);
/// A new session picks up where the tracks got to on the one lost when that had media this
/// recently (a failover: its silence and a handshake); after a longer loss, the live edge
/// is nearer than what was missed.
const PICK_UP_WITHIN: Duration = Duration::from_secs(5);
/// How long a broadcast whose subscriptions the server ended on a session that lives is
/// asked for again there before the session is given up: a publisher moving between a
/// cluster's nodes leaves its old route a moment before the new one is known, and the
/// session it reaches us on need not change.
const RESUBSCRIBE_WAIT: Duration = Duration::from_secs(2);
/// Between two such attempts.
const RESUBSCRIBE_INTERVAL: Duration = Duration::from_millis(100);
/// A relay's route is taken for quiet when, over this last stretch of a suspect silence
/// ([`SilenceWatch`]), the connection received less than [`QUIET_BYTES`]: a congested
/// path still delivers something, a route that carries nothing only acknowledgements.
const QUIET_WINDOW: Duration = Duration::from_millis(250);
const QUIET_BYTES: u64 = 1_200;
/// Subscriber priorities (lower is more important): audio above video, the enhancement
/// layer below the base layer.
const AUDIO_PRIORITY: u8 = 50;
pub const BASE_PRIORITY: u8 = 100;
const ENHANCEMENT_PRIORITY: u8 = 200;
/// How often ABR looks at the path, and a switch at its old rendition.
const SWITCH_TICK: Duration = Duration::from_millis(50);
/// Items waiting for one pad.
pub const ITEM_QUEUE: usize = 64;
/// Events waiting for the element.
pub const EVENT_QUEUE: usize = 64;

/// What the network side tells the element.
#[derive(Debug)]
pub enum Event {
    /// Media flows from a new session; `attempt` counts such sessions, 0 for the first.
    Connected {
        url: String,
        peer: std::net::SocketAddr,
        /// The draft the session speaks.
        version: Version,
        attempt: u32,
    },
    /// A session that delivered media was lost; the receiver keeps trying for `timeout`.
    Disconnected(String),
    /// An attempt that brought no media failed (a server not up yet, say); the next one
    /// follows. Logged, so a start that ends in a timeout shows each attempt's reason.
    Retrying(String),
    /// The server said GOAWAY: every track now plays from a new session at `url` (`peer`,
    /// draft `version`), handed over at a keyframe before the old one closed.
    Moved {
        from: String,
        url: String,
        peer: std::net::SocketAddr,
        version: Version,
        why: MoveCause,
    },
    Catalog(Catalog),
    /// A track to play: a pad for it, fed by `items`.
    Track(TrackFeed),
    /// Every track of the first catalog has been offered.
    TracksComplete,
    /// A media track whose codec moqsrc does not carry: no pad for it.
    Unplayable {
        name: String,
        codec: String,
    },
    /// The server ended the subscriptions on a session that lives (its publisher moved or
    /// restarted): they were made again there, and play on.
    Resubscribed(String),
    /// Data that is not valid; logged and skipped.
    Malformed(String),
    /// The video track `track` now plays rendition `to` instead of `from`.
    Rendition {
        track: String,
        from: String,
        to: String,
        /// `to`'s bitrate, bit/s.
        bitrate: u64,
        reason: &'static str,
    },
    /// Fatal: the element posts an error naming the URL.
    Error(String),
}

/// A track's pad-side end.
#[derive(Debug)]
pub struct TrackFeed {
    pub track: Selected,
    pub items: mpsc::Receiver<Item>,
}

/// What a pad gets.
pub type Item = moq_player::Item<Payload>;

/// A frame as received.
pub type Received = moq_player::Incoming<Payload>;

/// What the element wants; the latest value counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Control {
    /// Video playback jumped to this base group: older ones are no longer wanted.
    pub skip_before: u64,
    /// The element is paused: no media wanted.
    pub paused: bool,
    /// Bumped on every resume, so a pause too short to be seen still restarts the media
    /// subscriptions at the live edge.
    pub resumes: u64,
    /// Which rendition of the video to play.
    pub abr: AbrPrefs,
    /// The token new sessions present; a change while playing moves to a session that
    /// presents it (a relay ends sessions whose token expires).
    pub auth_token: Option<String>,
}

/// Why one session ended early.
struct Lost {
    reason: String,
    /// Media had flowed in this session.
    had_media: bool,
    /// The server refused us for good (e.g. a missing or wrong token): no retries.
    refused: bool,
    /// What was asked for does not exist: a broadcast its would-be publisher says it does
    /// not publish, or a track asked for by name that the catalog lacks.
    missing: bool,
}

/// Why a session that was set up ended early.
struct Failure {
    reason: String,
    /// What was asked for does not exist (see [`Lost::missing`]).
    missing: bool,
}

impl From<String> for Failure {
    fn from(reason: String) -> Failure {
        Failure {
            reason,
            missing: false,
        }
    }
}

/// The receiver's state across sessions.
struct Progress {
    /// Sessions that delivered media so far.
    sessions: u32,
    /// Epoch of the latest media subscriptions.
    epoch: u64,
    /// When media last arrived (or waiting for it was excused, e.g. while paused), ms since
    /// `origin`; written by every track's forwarder.
    last_media: Arc<AtomicU64>,
    origin: Instant,
    /// How media arrives, written by every track's forwarder: when a relay's route has
    /// gone quiet.
    silence: Arc<Mutex<SilenceWatch>>,
    /// The `resumes` of [`Control`] already acted on.
    resumes: u64,
    /// The tracks offered to the element.
    outputs: Vec<Output>,
    /// Media tracks already reported as unplayable.
    unplayable: Vec<String>,
    tracks_complete: bool,
    /// Timeline resets so far.
    generation: u64,
    /// The server a move (GOAWAY, a fresh token) took the session in use to: where the
    /// rotation stands once that session is lost.
    moved_to: Option<Server>,
    /// When the session in use first subscribed its tracks: the failover counts a silence
    /// from then at the earliest, not from each later round of subscriptions on it.
    session_started: Instant,
    /// When the relay's route of the session in use was last found quiet and asked again
    /// ([`REROUTE_WAIT`]).
    rerouted_at: Option<Instant>,
    /// The epoch of the catalog the tracks were last offered from: a new session of the
    /// same publisher run picks up where they got to.
    catalog_epoch: Option<u64>,
}

/// A track offered to the element.
struct Output {
    track: Selected,
    /// Where its items go.
    tx: mpsc::Sender<Item>,
    /// The group its latest object came in ([`NOT_REACHED`] before one), written by its
    /// forwarder: where a subscription the server ended is picked up.
    reached: Arc<AtomicU64>,
    /// The decode index of the newest frame forwarded ([`NOT_REACHED`] before one): a
    /// frame at or before it is a copy (a subscription made again delivers what came
    /// already), not media arriving.
    newest: Arc<AtomicU64>,
}

/// No object of the track came yet.
const NOT_REACHED: u64 = u64::MAX;

impl Progress {
    fn media_arrived(&self) {
        stamp(&self.last_media, self.origin);
    }

    fn last_media(&self) -> Instant {
        stamped(&self.last_media, self.origin)
    }

    /// The group of each track's latest object: where a new round picks up.
    fn reached_groups(&self) -> Vec<(String, u64)> {
        self.outputs
            .iter()
            .map(|o| (o.track.name.clone(), o.reached.load(Ordering::Relaxed)))
            .filter(|(_, g)| *g != NOT_REACHED)
            .collect()
    }

    fn output(&self, name: &str) -> Option<&Output> {
        self.outputs.iter().find(|o| o.track.name == name)
    }

    /// Tells every track to start its timeline afresh.
    async fn reset(&mut self) {
        self.generation += 1;
        for Output { tx, newest, .. } in &self.outputs {
            newest.store(NOT_REACHED, Ordering::Relaxed);
            let _ = tx
                .send(Item::Reset {
                    generation: self.generation,
                })
                .await;
        }
    }
}

/// µs since `origin`, on the monotonic clock.
fn micros_since(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// The wall clock at `instant`, µs since the UNIX epoch.
pub fn unix_us_at(instant: Instant) -> i64 {
    let ago = i64::try_from(instant.elapsed().as_micros()).unwrap_or(i64::MAX);
    unix_now_us_i64().saturating_sub(ago)
}

/// When [`stamp`] was last called.
fn stamped(last_media: &AtomicU64, origin: Instant) -> Instant {
    origin + Duration::from_millis(last_media.load(Ordering::Relaxed))
}

fn stamp(last_media: &AtomicU64, origin: Instant) {
    let ms = u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX);
    last_media.store(ms, Ordering::Relaxed);
}

/// What forwarding came to.
enum Flow {
    Sent,
    /// The element paused or resumed: the media subscriptions restart.
    Restart,
    /// The element is gone.
    Closed,
}

/// How one track's forwarding ended.
enum TrackEnd {
    /// The publisher ended the track.
    Ended,
    Restart,
    Closed,
    /// A relay ended the subscription abnormally on a session that lives: the publisher
    /// left it (moved to another node of a cluster, or restarted).
    Gone(String),
    /// The session was lost.
    Lost(String),
}

/// How a round of the selected tracks ended ([`play`]).
enum Played {
    /// Every track ended, or the element is gone.
    Ended,
    /// The element paused or resumed: the media subscriptions restart.
    Restart,
    /// The server ended the subscriptions while the session lives: subscribe again there.
    Gone(String),
    /// A relay's route went quiet and the catalog, subscribed again on the same session,
    /// came: the tracks follow it there.
    Rerouted(Box<CatalogFeed>, String),
}

/// Runs until every track ends or the element drops its side. A lost or refused session
/// is retried, from the live edge, on the next server in turn, until no media has arrived
/// for `timeout`; only then is it an error naming the URL and what failed.
pub async fn run(
    config: ReceiverConfig,
    events: mpsc::Sender<Event>,
    controls: watch::Receiver<Control>,
) {
    let mut controls = controls;
    let origin = Instant::now();
    let mut progress = Progress {
        sessions: 0,
        epoch: 0,
        last_media: Arc::new(AtomicU64::new(0)),
        origin,
        silence: Arc::default(),
        resumes: controls.borrow().resumes,
        outputs: Vec::new(),
        unplayable: Vec::new(),
        tracks_complete: false,
        generation: 0,
        moved_to: None,
        session_started: origin,
        rerouted_at: None,
        catalog_epoch: None,
    };
    let mut rotation = Rotation::new(&config);
    let mut config = config;
    loop {
        config.auth_token = controls.borrow().auth_token.clone();
        let Err(lost) = receive(&config, &events, &mut controls, &mut progress).await else {
            return;
        };
        // A token refused (expired, say) while the application set a fresh one: retried.
        let token_renewed = controls.borrow().auth_token != config.auth_token;
        if lost.had_media {
            let _ = events.send(Event::Disconnected(lost.reason.clone())).await;
        }
        if let Some(server) = progress.moved_to.take() {
            rotation.stand_at(&server);
        }
        if controls.borrow().paused {
            progress.media_arrived();
        }
        // What was never played and still is not there after a moment (a publisher
        // starting up, a catalog being completed) is a wrong name, not a restart.
        let missing_for_good =
            lost.missing && progress.sessions == 0 && origin.elapsed() >= MISSING_GRACE;
        if (lost.refused && !token_renewed) || missing_for_good {
            rotation.refuse();
        }
        let Some(next) = rotation.advance() else {
            let _ = events.send(Event::Error(lost.reason)).await;
            return;
        };
        if Instant::now() + RETRY_INTERVAL >= progress.last_media() + config.timeout {
            let _ = events
                .send(Event::Error(format!(
                    "{} (no media for {} s)",
                    lost.reason,
                    config.timeout.as_secs()
                )))
                .await;
            return;
        }
        if !lost.had_media {
            let _ = events.send(Event::Retrying(lost.reason)).await;
        }
        if next.wrapped {
            tokio::time::sleep(RETRY_INTERVAL).await;
        }
        config.server = next.server;
    }
}

/// Which server to try next: each in turn, skipping those that refused us.
struct Rotation {
    servers: Vec<Server>,
    refused: Vec<bool>,
    at: usize,
}

/// The server to try next; `wrapped` when every other one was tried since it.
struct Next {
    server: Server,
    wrapped: bool,
}

impl Rotation {
    fn new(config: &ReceiverConfig) -> Rotation {
        let servers: Vec<Server> = std::iter::once(config.server.clone())
            .chain(config.backups.iter().cloned())
            .collect();
        Rotation {
            refused: vec![false; servers.len()],
            servers,
            at: 0,
        }
    }

    /// A move took the session to `server`: the next to try is the one after it (not
    /// the server it moved to, whose route just failed). A server not in the list leaves
    /// the turn where it was.
    fn stand_at(&mut self, server: &Server) {
        let authority = server.url.authority();
        if let Some(at) = self
            .servers
            .iter()
            .position(|s| s.url.authority() == authority)
        {
            self.at = at;
        }
    }

    /// The server in use refused us for good.
    fn refuse(&mut self) {
        self.refused[self.at] = true;
    }

    /// Moves on to the next server that has not refused us; `None` when all have.
    fn advance(&mut self) -> Option<Next> {
        let count = self.servers.len();
        let mut wrapped = false;
        for step in 1..=count {
            let at = (self.at + step) % count;
            wrapped |= at == 0;
            if !self.refused[at] {
                self.at = at;
                return Some(Next {
                    server: self.servers[at].clone(),
                    wrapped,
                });
            }
        }
        None
    }
}

async fn receive(
    config: &ReceiverConfig,
    events: &mpsc::Sender<Event>,
    controls: &mut watch::Receiver<Control>,
    progress: &mut Progress,
) -> Result<(), Lost> {
    let remaining = (progress.last_media() + config.timeout)
        .saturating_duration_since(Instant::now())
        .clamp(RETRY_INTERVAL, CONNECT_WITHIN);
    let session_config = SessionConfig {
        path: Some(config.server.setup_path.clone()),
        auth_token: config.auth_token.clone(),
        versions: config.versions,
        ..SessionConfig::default()
    };
    let connecting = moq_session::connect_within(
        &config.server.url,
        &config.server.trust,
        session_config,
        remaining,
    );
    let session = connecting.await.map_err(|err| not_connected(config, err))?;
    let mut had_media = false;
    let mut session = session;
    receive_session(
        config,
        events,
        controls,
        progress,
        &mut session,
        &mut had_media,
    )
    .await
    .map_err(|failure| {
        // Refused mid-session (a relay closes a session whose token expired): say what to do.
        let closed = session.close_reason();
        let reason = match closed.as_ref().and_then(SessionError::advice) {
            Some(advice) => format!("{}; {advice}", failure.reason),
            None => failure.reason,
        };
        Lost {
            reason,
            had_media,
            refused: closed.is_some_and(|e| e.is_refusal()),
            missing: failure.missing,
        }
    })
}

fn not_connected(config: &ReceiverConfig, err: SessionError) -> Lost {
    Lost {
        reason: match err.advice() {
            Some(advice) => format!("cannot connect to {}: {err}; {advice}", config.server.url),
            None => format!("cannot connect to {}: {err}", config.server.url),
        },
        had_media: false,
        refused: err.is_refusal(),
        missing: false,
    }
}

async fn receive_session(
    config: &ReceiverConfig,
    events: &mpsc::Sender<Event>,
    controls: &mut watch::Receiver<Control>,
    progress: &mut Progress,
    session: &mut Session,
    had_media: &mut bool,
) -> Result<(), Failure> {
    let namespace = config.server.namespace.clone();
    let path = namespace.to_path();
    let fail = |what: &str, err: SessionError| format!("{}: {what}: {err}", config.server.url);
    // The token the session in use presented.
    let mut presented = config.auth_token.clone();

    // Ours or hang's, whichever the broadcast has. The catalog's latest group is retained
    // by the publisher: start from the beginning.
    let catalog_subscription = |track: &'static str| {
        let (session, namespace) = (session.clone(), namespace.clone());
        async move { subscribe_catalog(&session, &namespace, track).await }
    };
    let (native, hang) = tokio::join!(
        catalog_subscription(CATALOG_TRACKS[0]),
        catalog_subscription(CATALOG_TRACKS[1])
    );
    let mut catalog_subs = match (native, hang) {
        (Err(native), Err(hang)) if native.is_missing() && hang.is_missing() => {
            // A moqsink publishes one broadcast for good; a relay may have it later.
            let missing = session.peer_is_ours();
            let url = &config.server.url;
            return Err(Failure {
                reason: if missing {
                    format!(
                        "{url}: namespace {path:?} is not published there ({native}): check \
                         namespace (a URI's path)"
                    )
                } else {
                    format!(
                        "{url}: namespace {path:?} is not published there yet ({native}): \
                         check namespace (a URI's path), or start its publisher"
                    )
                },
                missing,
            });
        }
        (Err(e), Err(_)) => {
            return Err(fail(&format!("the catalog of namespace {path:?}"), e).into());
        }
        (native, hang) => [native.ok(), hang.ok()],
    };
    // A session after one that lost its server (a failover) may pick up where the tracks
    // got to; they are subscribed once the catalog says from where.
    let may_pick_up = progress.sessions > 0 && !progress.reached_groups().is_empty();
    // Otherwise the tracks the catalog will most likely list are subscribed before it
    // arrives, so the group that starts along with it is not missed; the catalog decides
    // which stay.
    let mut early: Vec<EarlySubscription> = [
        (MediaKind::Video, &config.prefs.video, catalog::BASE_TRACK),
        (MediaKind::Audio, &config.prefs.audio, catalog::AUDIO_TRACK),
    ]
    .into_iter()
    .filter(|(_, choice, _)| **choice != Choice::Off && !may_pick_up)
    .map(|(kind, choice, default)| {
        let name = match choice {
            Choice::Named(name) => name.clone(),
            Choice::First | Choice::Off => default.to_owned(),
        };
        let (session, config, track) = (session.clone(), config.clone(), name.clone());
        let task =
            tokio::spawn(async move { subscribe(&config, &session, &track, priority(kind)).await });
        EarlySubscription { name, task }
    })
    .collect();
    let deadline = progress.last_media() + config.timeout;
    let (catalog, at) = first_catalog(&mut catalog_subs, deadline)
        .await
        .map_err(|e| format!("{}: namespace {path:?}: {e}", config.server.url))?;
    let mut feed = CatalogFeed::new(catalog, CATALOG_TRACKS[at], catalog_subs[at].take());
    let previous_epoch = progress.catalog_epoch;
    if !offer_tracks(config, events, progress, &feed.current).await? {
        return Ok(());
    }
    // Where the tracks got to, when this round picks up after a lost session or a server
    // that ended our subscriptions.
    let mut pick_up: Vec<(String, u64)> = Vec::new();
    if progress.sessions > 0 {
        // Soon after a session of the same publisher run was lost, the tracks go on from
        // the groups they had got to, which the relay holds: a failover misses nothing.
        // Otherwise (a restarted publisher, a long loss) at the live edge.
        let same_run = feed.current.epoch != 0 && previous_epoch == Some(feed.current.epoch);
        if may_pick_up && same_run && progress.last_media().elapsed() < PICK_UP_WITHIN {
            pick_up = progress.reached_groups();
        } else {
            progress.reset().await;
        }
    }
    // What had played when the server last ended our subscriptions.
    let mut gone_at = None;
    loop {
        // Paused: keep the session, want no media.
        while controls.borrow().paused {
            progress.media_arrived();
            if controls.changed().await.is_err() {
                return Ok(());
            }
        }
        let resumed = controls.borrow().resumes != progress.resumes;
        progress.resumes = controls.borrow().resumes;
        if resumed {
            // Resumed at the live edge: the old timeline means nothing.
            progress.reset().await;
        }
        let selection = selected(config, &feed.current)?;
        progress.epoch += 1;
        lock(&progress.silence).restart();
        let mut round = JoinSet::new();
        let mut movers = Vec::new();
        for track in selection.tracks {
            let early = early
                .iter()
                .position(|e| e.name == track.name)
                .map(|at| early.swap_remove(at).task);
            let from = pick_up
                .iter()
                .find(|(n, _)| *n == track.name)
                .map(|(_, g)| *g);
            let start = match (early, from) {
                (Some(task), _) => Start::Early(task),
                (None, Some(group)) => Start::From(group),
                (None, None) => Start::Next,
            };
            start_track(
                config,
                events,
                session,
                progress,
                controls,
                &mut round,
                &feed.current,
                track,
                start,
                &mut movers,
            )
            .await?;
        }
        pick_up.clear();
        for unused in early.drain(..) {
            unused.task.abort();
        }
        if !*had_media {
            let connected = Event::Connected {
                url: config.server.url.to_string(),
                peer: session.remote_address(),
                version: session.version(),
                attempt: progress.sessions,
            };
            if events.send(connected).await.is_err() {
                return Ok(());
            }
            progress.sessions += 1;
            progress.session_started = Instant::now();
            progress.rerouted_at = None;
            *had_media = true;
        }
        let played = play(
            config,
            events,
            controls,
            progress,
            (session, &mut presented),
            &mut round,
            &mut feed,
            &mut movers,
        )
        .await?;
        round.abort_all();
        let (again, why) = match played {
            Played::Ended => return Ok(()),
            Played::Restart => continue,
            Played::Gone(why) => {
                // Twice in a row with nothing played between: the server keeps what is
                // asked for from us; another one may not.
                if gone_at == Some(progress.last_media()) {
                    return Err(why.into());
                }
                gone_at = Some(progress.last_media());
                (resubscribe(config, session, feed.track, &why).await?, why)
            }
            Played::Rerouted(again, why) => (*again, why),
        };
        pick_up = progress.reached_groups();
        if again.current.epoch != feed.current.epoch {
            // The publisher restarted: its indices and timestamps start afresh, and its
            // groups are not where the old ones got to.
            progress.reset().await;
            pick_up.clear();
        }
        feed = again;
        if events.send(Event::Resubscribed(why)).await.is_err()
            || !offer_tracks(config, events, progress, &feed.current).await?
        {
            return Ok(());
        }
    }
}

/// The broadcast's catalog subscribed again on `session` after the server ended its
/// subscriptions there (`why`), until one comes or [`RESUBSCRIBE_WAIT`] is over.
async fn resubscribe(
    config: &ReceiverConfig,
    session: &Session,
    track: &'static str,
    why: &str,
) -> Result<CatalogFeed, Failure> {
    let namespace = &config.server.namespace;
    let deadline = Instant::now() + RESUBSCRIBE_WAIT;
    let at = CATALOG_TRACKS.iter().position(|t| *t == track).unwrap_or(0);
    loop {
        let attempt = tokio::time::timeout_at(
            deadline.into(),
            subscribe_catalog(session, namespace, track),
        )
        .await;
        let err = match attempt {
            Ok(Ok(subscription)) => {
                let mut subs = [None, None];
                subs[at] = Some(subscription);
                let (current, _) = first_catalog(&mut subs, deadline)
                    .await
                    .map_err(|e| format!("{why}; subscribed again: {e}"))?;
                return Ok(CatalogFeed::new(current, track, subs[at].take()));
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => "no answer".to_owned(),
        };
        if Instant::now() + RESUBSCRIBE_INTERVAL >= deadline || session.close_reason().is_some() {
            return Err(format!("{why}; subscribing again: {err}").into());
        }
        tokio::time::sleep(RESUBSCRIBE_INTERVAL).await;
    }
}

/// The catalog's tracks the element's settings choose, or why there are none.
fn selected(config: &ReceiverConfig, catalog: &Catalog) -> Result<select::Selection, Failure> {
    select::select(catalog, &config.prefs).map_err(|e| Failure {
        reason: format!(
            "{}: namespace {:?}: {e}",
            config.server.url,
            config.server.namespace.to_path()
        ),
        missing: e.missing,
    })
}

/// Reports the catalog, offers its tracks that are not offered yet and warns about those
/// it cannot play. False when the element is gone.
async fn offer_tracks(
    config: &ReceiverConfig,
    events: &mpsc::Sender<Event>,
    progress: &mut Progress,
    catalog: &Catalog,
) -> Result<bool, Failure> {
    if events.send(Event::Catalog(catalog.clone())).await.is_err() {
        return Ok(false);
    }
    progress.catalog_epoch = Some(catalog.epoch);
    let selection = selected(config, catalog)?;
    for (name, codec) in selection.unplayable {
        if !progress.unplayable.contains(&name) {
            progress.unplayable.push(name.clone());
            if events
                .send(Event::Unplayable { name, codec })
                .await
                .is_err()
            {
                return Ok(false);
            }
        }
    }
    for track in selection.tracks {
        if progress.output(&track.name).is_some() {
            continue;
        }
        let (tx, items) = mpsc::channel(ITEM_QUEUE);
        progress.outputs.push(Output {
            track: track.clone(),
            tx,
            reached: Arc::new(AtomicU64::new(NOT_REACHED)),
            newest: Arc::new(AtomicU64::new(NOT_REACHED)),
        });
        if events
            .send(Event::Track(TrackFeed { track, items }))
            .await
            .is_err()
        {
            return Ok(false);
        }
    }
    if !progress.tracks_complete {
        progress.tracks_complete = true;
        if events.send(Event::TracksComplete).await.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The broadcast's catalog and where its updates come from.
struct CatalogFeed {
    current: Catalog,
    /// Which of [`CATALOG_TRACKS`] it is.
    track: &'static str,
    updates: Option<Subscription>,
    /// Moved to another session: the epoch shown until its first catalog came.
    moved_from: Option<u64>,
    /// Another publisher of the stream, moved to: (its epoch, the one it is shown as). Its
    /// catalog has an epoch of its own, but the tracks handed over to it on media time and
    /// number its frames on from the old ones, so nothing starts afresh.
    shown_as: Option<(u64, u64)>,
}

impl CatalogFeed {
    fn new(current: Catalog, track: &'static str, updates: Option<Subscription>) -> CatalogFeed {
        CatalogFeed {
            current,
            track,
            updates,
            moved_from: None,
            shown_as: None,
        }
    }

    /// A catalog update as the tracks see it: with the epoch they number frames from.
    fn shown(&mut self, mut update: Catalog) -> Catalog {
        if let Some(shown) = self.moved_from.take()
            && update.epoch != shown
        {
            self.shown_as = Some((update.epoch, shown));
        }
        if let Some((epoch, shown)) = self.shown_as
            && update.epoch == epoch
        {
            update.epoch = shown;
        }
        update
    }
}

/// A subscription made before the catalog arrived.
struct EarlySubscription {
    name: String,
    task: tokio::task::JoinHandle<Result<Subscription, String>>,
}

fn priority(kind: MediaKind) -> u8 {
    match kind {
        MediaKind::Video => BASE_PRIORITY,
        MediaKind::Audio => AUDIO_PRIORITY,
    }
}

/// Where a track's subscription starts.
enum Start {
    /// At the next group: the live edge.
    Next,
    /// Subscribed before the catalog arrived.
    Early(tokio::task::JoinHandle<Result<Subscription, String>>),
    /// At the start of this group: where a subscription the server ended had got to, so
    /// that what came meanwhile is not missed (what comes twice is dropped as a
    /// duplicate).
    From(u64),
}

/// Subscribes to a selected track where `start` says and starts forwarding it in
/// `round`.
#[allow(clippy::too_many_arguments)]
async fn start_track(
    config: &ReceiverConfig,
    events: &mpsc::Sender<Event>,
    session: &Session,
    progress: &Progress,
    controls: &watch::Receiver<Control>,
    round: &mut JoinSet<TrackEnd>,
    catalog: &Catalog,
    track: Selected,
    start: Start,
    movers: &mut Vec<mpsc::Sender<Move>>,
) -> Result<(), String> {
    let Some((tx, reached, newest)) = progress
        .output(&track.name)
        .map(|o| (o.tx.clone(), o.reached.clone(), o.newest.clone()))
    else {
        return Ok(());
    };
    let mut switcher = (track.kind == MediaKind::Video && track.enhancement.is_none())
        .then(|| {
            let prefs = controls.borrow().abr.clone();
            let now_us = micros_since(progress.origin);
            Switcher::new(
                catalog,
                &track.name,
                &prefs,
                BASE_PRIORITY,
                progress.epoch,
                now_us,
            )
        })
        .flatten();
    // The rendition to start on, when the video has several.
    let name = switcher
        .as_ref()
        .map_or(track.name.as_str(), Switcher::playing);
    // Made for the track's own name: of no use for another rendition.
    let start = match start {
        Start::Early(task) if name != track.name => {
            task.abort();
            Start::Next
        }
        Start::From(_) if name != track.name => Start::Next,
        start => start,
    };
    let main = match start {
        Start::Early(task) => match task.await {
            Ok(Ok(sub)) => sub,
            _ => subscribe(config, session, name, priority(track.kind)).await?,
        },
        Start::From(group) => {
            let filter = FilterType::AbsoluteStart(Location { group, object: 0 });
            subscribe_from(config, session, name, priority(track.kind), filter).await?
        }
        Start::Next => subscribe(config, session, name, priority(track.kind)).await?,
    };
    if let Some(switcher) = &mut switcher {
        switcher.subscribed(main.largest.map(|l| l.group));
    }
    let enhancement = match &track.enhancement {
        Some(name) => Some(subscribe(config, session, name, ENHANCEMENT_PRIORITY).await?),
        None => None,
    };
    let subscribed = Item::Subscribed {
        epoch: progress.epoch,
        resumes: progress.resumes,
    };
    if tx.send(subscribed).await.is_err() {
        return Ok(());
    }
    if let Some(switcher) = &switcher {
        let rendition = Item::Rendition {
            name: switcher.playing().to_owned(),
            from: None,
        };
        if tx.send(rendition).await.is_err() {
            return Ok(());
        }
    }
    let hang_track = (catalog.format == MediaFormat::Hang)
        .then(|| catalog.track(&track.name))
        .flatten()
        .map(|entry| (catalog.clone(), entry.clone()));
    let (move_tx, moves) = mpsc::channel(1);
    movers.push(move_tx);
    let forwarder = Forwarder {
        config: config.clone(),
        session: session.clone(),
        track: track.name.clone(),
        kind: track.kind,
        epoch: progress.epoch,
        resumes: progress.resumes,
        tx,
        events: events.clone(),
        controls: controls.clone(),
        last_media: progress.last_media.clone(),
        silence: progress.silence.clone(),
        reached,
        newest,
        origin: progress.origin,
        hang: hang_track
            .as_ref()
            .map(|(catalog, entry)| HangReader::new(catalog, entry)),
        hang_track,
        enhancement_track: track.enhancement.clone(),
        moves,
        renumber: Renumber::default(),
        played: PlayedFrames::default(),
    };
    let switching = switcher.map(|switcher| Switching {
        switcher,
        link: None,
    });
    round.spawn(forwarder.run(main, enhancement, switching));
    Ok(())
}

/// Follows the catalog while the round's tracks play, until every track ended, the
/// element pauses or resumes, the server ends a track early, or the session is lost. When
/// the server says GOAWAY, or the element has a token `session` did not present, moves
/// every track to a new session ([`moving`]) and goes on with it in `session`. When a
/// relay's route goes quiet, subscribes the catalog again on the same session while the
/// tracks wait on the old route, and ends the round for the tracks to follow it.
#[allow(clippy::too_many_arguments)]
async fn play(
    config: &ReceiverConfig,
    events: &mpsc::Sender<Event>,
    controls: &mut watch::Receiver<Control>,
    progress: &mut Progress,
    (session, presented): (&mut Session, &mut Option<String>),
    round: &mut JoinSet<TrackEnd>,
    feed: &mut CatalogFeed,
    movers: &mut Vec<mpsc::Sender<Move>>,
) -> Result<Played, String> {
    let (last_media, origin, started) = (
        progress.last_media.clone(),
        progress.origin,
        progress.session_started,
    );
    let silence = progress.silence.clone();
    let mut rerouting: Option<Rerouting> = None;
    let mut connecting: Option<(Connecting, MoveCause)> = None;
    let mut arrival = Arrival::default();
    let mut given_up = false;
    // Whether the round's session was replaced by a move.
    let mut moved = false;
    // The server the session in use reached (a move changes it).
    let mut current = progress
        .moved_to
        .clone()
        .unwrap_or_else(|| config.server.clone());
    loop {
        let can_move = connecting.is_none() && arrival.target.is_none() && !given_up;
        let fresh_token = controls.borrow().auth_token.clone();
        if can_move && fresh_token != *presented {
            // Make before break: the same server, with the new token, while this session
            // still plays.
            let config = ReceiverConfig {
                server: current.clone(),
                auth_token: fresh_token.clone(),
                ..config.clone()
            };
            *presented = fresh_token;
            let targets = vec![current.clone()];
            connecting = Some((
                tokio::spawn(async move { moving::connect_elsewhere(&config, targets).await }),
                MoveCause::AuthToken,
            ));
            continue;
        }
        let can_reroute = can_move && rerouting.is_none() && !session.peer_is_ours();
        let rerouted = progress
            .rerouted_at
            .map(|at| (at, REROUTE_WAIT + 2 * session.path_stats().rtt));
        tokio::select! {
            () = route_quiet(session, &silence, origin), if can_reroute => {
                lock(&silence).acted();
                progress.rerouted_at = Some(Instant::now());
                let why = format!(
                    "{}: no media on the relay's route while the session lives",
                    current.url
                );
                let (config, session, track) = (config.clone(), session.clone(), feed.track);
                rerouting = Some(Rerouting(tokio::spawn(async move {
                    let again = resubscribe(&config, &session, track, &why).await;
                    again.map(|feed| (feed, why)).map_err(|failure| failure.reason)
                })));
            }
            again = next_rerouted(&mut rerouting) => {
                rerouting = None;
                // Make before break: the old route had its chance meanwhile. If it came
                // back, or nothing answered (a relay that is down), the tracks stay where
                // they are, and the failover and the media timeout see to a silence that
                // lasts.
                if let Ok((feed, why)) = again
                    && lock(&silence).still_silent()
                {
                    return Ok(Played::Rerouted(Box::new(feed), why));
                }
            }
            () = failover_silence(config, &last_media, origin, started, rerouted) => {
                let silent = stamped(&last_media, origin).elapsed().as_secs_f64();
                return Err(format!("{}: no media for {silent:.1} s", current.url));
            }
            uri = session.goaway_received(), if can_move => {
                let config = ReceiverConfig {
                    server: current.clone(),
                    auth_token: presented.clone(),
                    ..config.clone()
                };
                let targets = moving::targets(&config, &uri);
                connecting = Some((
                    tokio::spawn(async move { moving::connect_elsewhere(&config, targets).await }),
                    MoveCause::Goaway,
                ));
            }
            (connected, why) = next_connected(&mut connecting) => {
                connecting = None;
                match connected {
                    Ok((next, server)) => {
                        // Every track subscribes there and hands over; the catalog follows.
                        for mover in movers.iter() {
                            let (done, waited) = tokio::sync::oneshot::channel();
                            let request = Move { session: next.clone(), done };
                            if mover.send(request).await.is_ok() {
                                arrival.waiting.push(waited);
                            }
                        }
                        arrival.target = Some((next, server));
                        arrival.why = why;
                        arrival.deadline = Some(Instant::now() + MOVE_WAIT);
                    }
                    Err(reason) => {
                        // Nowhere to go yet: the old session plays until it closes, then
                        // the receiver reconnects as after any loss.
                        given_up = true;
                        let why = why.as_str();
                        let _ = events.send(Event::Malformed(format!("{why}: cannot move: {reason}"))).await;
                    }
                }
            }
            () = arrival.handed_over() => {
                let Some((next, server)) = arrival.target.take() else {
                    continue;
                };
                if let Some(updates) = catalog_updates(&next, config, feed.track).await {
                    feed.updates = Some(updates);
                    feed.moved_from = Some(feed.current.epoch);
                }
                session.close("moved to another session");
                let from = std::mem::replace(&mut current, server.clone());
                progress.moved_to = Some(server.clone());
                let event = Event::Moved {
                    from: from.url.to_string(),
                    url: server.url.to_string(),
                    peer: next.remote_address(),
                    version: next.version(),
                    why: arrival.why,
                };
                *session = next;
                let _ = events.send(event).await;
                arrival = Arrival::default();
                moved = true;
            }
            ended = round.join_next() => match ended {
                None => return Ok(Played::Ended),
                Some(Ok(TrackEnd::Ended)) => {}
                Some(Ok(TrackEnd::Restart)) => return Ok(Played::Restart),
                Some(Ok(TrackEnd::Closed)) | Some(Err(_)) => return Ok(Played::Ended),
                Some(Ok(TrackEnd::Gone(reason))) => return Ok(Played::Gone(reason)),
                // A track whose own move failed stayed on the session left behind, and
                // loses it when that closes: it follows the others on the session in use.
                Some(Ok(TrackEnd::Lost(reason))) if moved && session.close_reason().is_none() => {
                    return Ok(Played::Gone(reason));
                }
                Some(Ok(TrackEnd::Lost(reason))) => return Err(reason),
            },
            event = next_or_pending(&mut feed.updates) => match event {
                Some(TrackEvent::Object(object)) => match Catalog::from_track(feed.track, &object.payload) {
                    Ok(update) => {
                        let update = feed.shown(update);
                        if update.epoch != feed.current.epoch {
                            // The publisher restarted behind a relay: its indices and
                            // timestamps start afresh.
                            progress.reset().await;
                        }
                        let known: Vec<String> =
                            progress.outputs.iter().map(|o| o.track.name.clone()).collect();
                        feed.current = update.clone();
                        if !offer_tracks(config, events, progress, &update)
                            .await
                            .map_err(|failure| failure.reason)?
                        {
                            return Ok(Played::Ended);
                        }
                        // Tracks the update added play from now on.
                        let added = select::select(&update, &config.prefs)
                            .map(|s| s.tracks)
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|t| !known.contains(&t.name));
                        for track in added {
                            start_track(config, events, session, progress, controls, round, &update, track, Start::Next, movers)
                                .await?;
                        }
                    }
                    Err(e) => {
                        let _ = events.send(Event::Malformed(format!("catalog update: {e}"))).await;
                    }
                },
                Some(TrackEvent::Ended { .. }) | None => feed.updates = None,
                Some(TrackEvent::GroupEnd { .. }) => {}
            },
            changed = controls.changed() => {
                if changed.is_err() {
                    return Ok(Played::Ended);
                }
                let c = controls.borrow();
                if c.paused || c.resumes != progress.resumes {
                    return Ok(Played::Restart);
                }
            }
        }
    }
}

/// Longest the tracks may take to hand over to a new session before the old one closes
/// anyway.
const MOVE_WAIT: Duration = Duration::from_secs(5);

/// Connecting to where a GOAWAY sends us.
type Connecting = tokio::task::JoinHandle<Result<(Session, Server), String>>;

/// A move to another session after GOAWAY, once connected: waiting for every track to hand
/// over.
#[derive(Default)]
struct Arrival {
    target: Option<(Session, Server)>,
    why: MoveCause,
    waiting: Vec<tokio::sync::oneshot::Receiver<()>>,
    deadline: Option<Instant>,
}

impl Arrival {
    /// Resolves once every track handed over (or gave up), or the wait is over; never
    /// while there is no target. Cancelled, it keeps what it waits for.
    async fn handed_over(&mut self) {
        let Some(deadline) = self.deadline.filter(|_| self.target.is_some()) else {
            return std::future::pending().await;
        };
        while let Some(first) = self.waiting.first_mut() {
            match tokio::time::timeout_at(deadline.into(), first).await {
                Ok(_) => {
                    self.waiting.remove(0);
                }
                Err(_) => self.waiting.clear(),
            }
        }
    }
}

async fn next_connected(
    connecting: &mut Option<(Connecting, MoveCause)>,
) -> (Result<(Session, Server), String>, MoveCause) {
    match connecting {
        Some((task, why)) => (task.await.map_err(|e| e.to_string()).and_then(|r| r), *why),
        None => std::future::pending().await,
    }
}

/// Subscribes to the broadcast's catalog track `track` on `session` from its start (the
/// publisher retains its latest group).
async fn subscribe_catalog(
    session: &Session,
    namespace: &TrackNamespace,
    track: &str,
) -> Result<Subscription, SessionError> {
    let options = SubscribeOptions {
        priority: 0,
        filter: FilterType::AbsoluteStart(Location {
            group: 0,
            object: 0,
        }),
        ..SubscribeOptions::default()
    };
    session.subscribe(namespace.clone(), track, options).await
}

/// The catalog updates on a session a move goes to.
async fn catalog_updates(
    session: &Session,
    config: &ReceiverConfig,
    track: &str,
) -> Option<Subscription> {
    subscribe_catalog(session, &config.server.namespace, track)
        .await
        .ok()
}

/// Subscribing the catalog again on a session whose relay route went quiet; given up
/// when dropped (the round ended otherwise meanwhile).
struct Rerouting(tokio::task::JoinHandle<Result<(CatalogFeed, String), String>>);

impl Drop for Rerouting {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn next_rerouted(rerouting: &mut Option<Rerouting>) -> Result<(CatalogFeed, String), String> {
    match rerouting {
        Some(Rerouting(task)) => task.await.map_err(|e| e.to_string())?,
        None => std::future::pending().await,
    }
}

/// Resolves once a relay's route looks quiet: the silence since the latest frame is
/// suspect ([`SilenceWatch`]) and over its last [`QUIET_WINDOW`] the connection received
/// less than [`QUIET_BYTES`]. Pending while there is nothing to watch (no frame yet, or
/// this silence acted on): the failover and the media timeout see to those.
async fn route_quiet(session: &Session, silence: &Mutex<SilenceWatch>, origin: Instant) {
    loop {
        let Some(suspect) = lock(silence).suspect_at() else {
            tokio::time::sleep(QUIET_WINDOW).await;
            continue;
        };
        let due = origin + Duration::from_micros(suspect);
        tokio::time::sleep_until(due.checked_sub(QUIET_WINDOW).unwrap_or(due).into()).await;
        let before = session.bytes_received();
        tokio::time::sleep_until(due.max(Instant::now() + QUIET_WINDOW).into()).await;
        let quiet = session.bytes_received().saturating_sub(before) < QUIET_BYTES;
        if quiet && lock(silence).suspect_at() == Some(suspect) {
            return;
        }
    }
}

/// Resolves once no media has arrived for [`FAILOVER_SILENCE`], counted from `started`
/// (the session's first subscriptions) at the earliest, or for the wait of `rerouted` (see
/// [`REROUTE_WAIT`]) since the route was found quiet, if there is another server to try;
/// never otherwise.
async fn failover_silence(
    config: &ReceiverConfig,
    last_media: &AtomicU64,
    origin: Instant,
    started: Instant,
    rerouted: Option<(Instant, Duration)>,
) {
    if config.backups.is_empty() {
        return std::future::pending().await;
    }
    loop {
        let due = failover_due(stamped(last_media, origin), started, rerouted);
        if Instant::now() >= due {
            return;
        }
        tokio::time::sleep_until(due.into()).await;
    }
}

/// When a silence since the media `last` arrived is given up for the next server (see
/// [`failover_silence`]).
fn failover_due(last: Instant, started: Instant, rerouted: Option<(Instant, Duration)>) -> Instant {
    let due = last.max(started) + FAILOVER_SILENCE;
    match rerouted.filter(|(at, _)| last < *at) {
        Some((at, wait)) => due.min(at + wait),
        None => due,
    }
}

/// Forwards one track's frames to its pad.
struct Forwarder {
    config: ReceiverConfig,
    session: Session,
    /// The track the pad plays.
    track: String,
    kind: MediaKind,
    epoch: u64,
    resumes: u64,
    tx: mpsc::Sender<Item>,
    events: mpsc::Sender<Event>,
    controls: watch::Receiver<Control>,
    last_media: Arc<AtomicU64>,
    silence: Arc<Mutex<SilenceWatch>>,
    /// Where this track's latest object came in ([`Output::reached`]).
    reached: Arc<AtomicU64>,
    /// The newest frame forwarded ([`Output::newest`]).
    newest: Arc<AtomicU64>,
    origin: Instant,
    /// Reads hang frames; `None` for our own.
    hang: Option<HangReader>,
    /// The catalog and track a hang reader is made from, for a move's new subscription.
    hang_track: Option<(Catalog, TrackEntry)>,
    /// The enhancement layer's track, if the track has one.
    enhancement_track: Option<String>,
    /// Moves to another session, asked for when the server says GOAWAY.
    moves: mpsc::Receiver<Move>,
    /// How the subscriptions' numbering maps onto the track's: a move to another
    /// publisher changes it (see `moq_player::handover`).
    renumber: Renumber,
    /// The base layer's latest frames, as the track numbers them: a move continues from
    /// the last (see `moq_player::handover`).
    played: PlayedFrames,
}

impl Forwarder {
    /// Forwards `main` (and its enhancement layer) until the track ends; `switching`
    /// switches the video between renditions, replacing `main`.
    async fn run(
        mut self,
        mut main: Subscription,
        mut enhancement: Option<Subscription>,
        mut switching: Option<Switching>,
    ) -> TrackEnd {
        let mut skip_before = self.controls.borrow().skip_before;
        // One event held from each layer, so that the one that arrived first goes first:
        // when the pad is behind, both layers wait in their queues, and taking them in
        // turn would starve the one whose frames come in more, smaller groups.
        let (mut held_main, mut held_enhancement) = (None, None);
        let mut control_changed = false;
        let mut next_tick = Instant::now() + SWITCH_TICK;
        // A move to another session under way (GOAWAY), whether the old main subscription
        // has ended meanwhile, and whether moves can still be asked for.
        let mut moving: Option<Moving> = None;
        let (mut main_gone, mut moves_open) = (false, true);
        loop {
            if std::mem::take(&mut control_changed) || self.controls.has_changed().unwrap_or(true) {
                let c = self.controls.borrow_and_update().clone();
                if c.paused || c.resumes != self.resumes {
                    return TrackEnd::Restart;
                }
                let now = self.now_us();
                if self.kind == MediaKind::Video && c.skip_before > skip_before {
                    skip_before = c.skip_before;
                    let group = switching
                        .as_ref()
                        .map_or(skip_before, |s| s.switcher.rendition_group(skip_before));
                    main.stop_groups_before(self.renumber.rendition_group(group));
                    if let Some(sw) = &mut switching {
                        sw.switcher.on_skip(now);
                    }
                }
                if let Some(sw) = &mut switching {
                    sw.switcher.set_prefs(&c.abr, now);
                }
            }
            if let Some(sw) = &mut switching {
                // The switch's own subscription is read whenever the main one is, so a
                // busy old rendition cannot hold the new one back.
                while let Some(linked) = tokio::select! {
                    biased;
                    linked = sw.next() => Some(linked),
                    () = std::future::ready(()) => None,
                } {
                    self.take_linked(sw, linked);
                }
                if Instant::now() >= next_tick {
                    next_tick = Instant::now() + SWITCH_TICK;
                    sw.switcher.tick(self.now_us());
                    if sw.switcher.switching() {
                        lock(&self.silence).hold_off(self.now_us());
                    }
                }
                if let Some(end) = self.apply(sw, &mut main, &mut held_main).await {
                    return end;
                }
            }
            if moving.is_some() {
                while let Some(moved) = try_moved(&mut moving).await {
                    self.take_moved(&mut moving, moved);
                }
                if let Some(mv) = &mut moving {
                    mv.handover.tick(self.now_us());
                }
                match self
                    .settle_move(&mut moving, &mut main, &mut enhancement, &mut switching)
                    .await
                {
                    Some(Settled::Cut) => {
                        (held_main, held_enhancement, main_gone) = (None, None, false);
                    }
                    Some(Settled::End(end)) => return end,
                    None => {}
                }
            }
            if held_main.is_none() && !main_gone {
                held_main = main.try_next();
            }
            if held_enhancement.is_none()
                && let Some(enhancement) = &mut enhancement
            {
                held_enhancement = enhancement.try_next();
            }
            if held_main.is_none() && held_enhancement.is_none() {
                let ticking = switching.is_some() || moving.is_some();
                tokio::select! {
                    event = main.next(), if !main_gone => held_main = Some(event),
                    request = self.moves.recv(), if moving.is_none() && moves_open => match request {
                        Some(request) => moving = Some(self.start_move(request, &mut switching)),
                        None => moves_open = false,
                    },
                    moved = next_moved(&mut moving) => self.take_moved(&mut moving, moved),
                    event = next_or_pending(&mut enhancement) => held_enhancement = Some(event),
                    linked = next_linked(&mut switching) => {
                        if let Some(sw) = &mut switching {
                            self.take_linked(sw, linked);
                            if let Some(end) = self.apply(sw, &mut main, &mut held_main).await {
                                return end;
                            }
                        }
                    }
                    () = tokio::time::sleep_until(next_tick.into()), if ticking => {}
                    changed = self.controls.changed() => {
                        if changed.is_err() {
                            return TrackEnd::Closed;
                        }
                        control_changed = true;
                    }
                }
                continue;
            }
            let enhancement_first = match (&held_main, &held_enhancement) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(Some(TrackEvent::Object(m))), Some(Some(TrackEvent::Object(e)))) => {
                    e.received < m.received
                }
                // Ends carry no time: they go at once.
                (Some(Some(TrackEvent::Object(_))), Some(_)) => true,
                (Some(_), Some(_)) => false,
            };
            let item = if enhancement_first {
                match held_enhancement.take().flatten() {
                    Some(TrackEvent::Ended { .. }) | None => {
                        enhancement = None;
                        None
                    }
                    Some(event) => self.item(event, TrackRole::Enhancement),
                }
            } else {
                match held_main.take().flatten() {
                    // Only the publisher ending its track is the end of the stream; a
                    // relay ends subscriptions with other codes when the publisher goes
                    // away, and then we subscribe again.
                    Some(TrackEvent::Ended { status, .. })
                        if status == publish_done_code::TRACK_ENDED =>
                    {
                        let _ = self.tx.send(Item::Eos).await;
                        return TrackEnd::Ended;
                    }
                    // A session being left ends its subscriptions one way or another.
                    Some(TrackEvent::Ended { .. }) | None if moving.is_some() => {
                        main_gone = true;
                        if let Some(mv) = &mut moving {
                            mv.handover.old_ended();
                        }
                        None
                    }
                    Some(TrackEvent::Ended { status, reason }) => {
                        let why = format!(
                            "{}: track {} ended abnormally (PUBLISH_DONE {status:#x} {reason:?})",
                            self.config.server.url, self.track
                        );
                        // A relay's route to the publisher went; a moqsink ending our
                        // subscription means it, and a new session starts afresh.
                        let relayed = !self.session.peer_is_ours();
                        return match self.session.close_reason() {
                            None if relayed => TrackEnd::Gone(why),
                            _ => TrackEnd::Lost(why),
                        };
                    }
                    Some(event) => {
                        // A rendition's groups are not the track's.
                        if let TrackEvent::Object(object) = &event
                            && switching.is_none()
                        {
                            self.reached.store(object.group, Ordering::Relaxed);
                        }
                        self.item(event, TrackRole::Base)
                    }
                    None => {
                        let url = &self.config.server.url;
                        return TrackEnd::Lost(match self.session.close_reason() {
                            Some(reason) => format!("connection to {url} lost: {reason}"),
                            None => format!("connection to {url} lost"),
                        });
                    }
                }
            };
            let Some(mut item) = item else {
                continue;
            };
            self.renumber.item(&mut item);
            if let Item::Frame(frame) = &item
                && frame.layer == TrackRole::Base
            {
                self.played.push(frame.header, frame.size);
            }
            // During a move the old base layer plays up to the handover's cut.
            if !enhancement_first
                && let Some(mv) = moving.as_mut().filter(|m| !m.handover.is_done())
            {
                mv.handover.old(item);
                continue;
            }
            if let Some(end) = self
                .forward(item, &mut switching, &mut main, &mut held_main)
                .await
            {
                return end;
            }
        }
    }

    /// Sends an item on: through the ABR switcher when the video has renditions, else to
    /// the pad. How the track ends if the element stops meanwhile.
    async fn forward(
        &mut self,
        item: Item,
        switching: &mut Option<Switching>,
        main: &mut Subscription,
        held_main: &mut Option<Option<TrackEvent>>,
    ) -> Option<TrackEnd> {
        if let Some(sw) = switching {
            sw.switcher.old(item, self.now_us());
            return self.apply(sw, main, held_main).await;
        }
        self.media_arrived(&item);
        match self.deliver(item).await {
            Flow::Sent => None,
            Flow::Restart => Some(TrackEnd::Restart),
            Flow::Closed => Some(TrackEnd::Closed),
        }
    }

    /// Starts moving the track to the session `request` names: the rendition playing
    /// (and the enhancement layer) is subscribed there. An ABR switch under way is given
    /// up: its subscription is on the session being left.
    fn start_move(&mut self, request: Move, switching: &mut Option<Switching>) -> Moving {
        let now = self.now_us();
        let track = match switching {
            Some(sw) => {
                if let Some(Link::Subscribing(task)) = &sw.link {
                    task.abort();
                }
                if sw.link.take().is_some() {
                    sw.switcher.give_up(now);
                }
                sw.switcher.playing().to_owned()
            }
            None => self.track.clone(),
        };
        let enhancement = self
            .enhancement_track
            .as_deref()
            .map(|name| (name, ENHANCEMENT_PRIORITY));
        Moving::start(
            &self.config,
            request,
            &track,
            enhancement,
            priority(self.kind),
            self.hang_track.as_ref(),
            self.played.clone(),
        )
    }

    /// Takes what a move's new subscriptions did. A move that fails is dropped: the track
    /// stays on the old session (and reconnects as after any loss when it closes).
    fn take_moved(&mut self, moving: &mut Option<Moving>, moved: Moved) {
        let Some(mv) = moving else {
            return;
        };
        match moved {
            Moved::Subscribed => {}
            Moved::Event(Some(TrackEvent::Ended { .. })) | Moved::Event(None) => *moving = None,
            Moved::Failed(reason) => {
                let _ = self
                    .events
                    .try_send(Event::Malformed(format!("moving {}: {reason}", self.track)));
                *moving = None;
            }
            Moved::Event(Some(event)) => {
                let mut hang = mv.hang.take();
                let item = self.item_read_by(&mut hang, event, TrackRole::Base);
                mv.hang = hang;
                if let Some(item) = item {
                    mv.handover.new_item(item, self.now_us());
                }
            }
        }
    }

    /// Sends on what a move's handover let go; once the new subscription plays, it
    /// replaces the old ones, and the session's owner is told.
    async fn settle_move(
        &mut self,
        moving: &mut Option<Moving>,
        main: &mut Subscription,
        enhancement: &mut Option<Subscription>,
        switching: &mut Option<Switching>,
    ) -> Option<Settled> {
        let mut held = None;
        while let Some(item) = moving.as_mut()?.handover.poll_item() {
            if let Some(end) = self.forward(item, switching, main, &mut held).await {
                return Some(Settled::End(end));
            }
        }
        if !moving.as_ref()?.handover.is_done() {
            return None;
        }
        let mut mv = moving.take()?;
        if let Some(renumber) = mv.handover.renumber() {
            self.renumber = renumber;
        }
        if let Some(next) = mv.next.take() {
            *main = next;
        }
        if self.enhancement_track.is_some() {
            *enhancement = mv.next_enhancement.take();
        }
        if self.hang.is_some() {
            self.hang = mv.hang.take();
        }
        self.session = mv.session.clone();
        mv.finish();
        Some(Settled::Cut)
    }

    /// µs since the receiver started: the switcher's clock.
    fn now_us(&self) -> u64 {
        micros_since(self.origin)
    }

    /// Media arrived, unless `item` is a copy of a frame forwarded already.
    fn media_arrived(&self, item: &Item) {
        let Item::Frame(frame) = item else {
            return;
        };
        let index = frame.header.decode_index;
        let newest = self.newest.load(Ordering::Relaxed);
        if newest != NOT_REACHED && index <= newest {
            return;
        }
        self.newest.store(index, Ordering::Relaxed);
        stamp(&self.last_media, self.origin);
        lock(&self.silence).arrived(self.now_us());
    }

    /// Tells the switcher what came of the subscription it asked for.
    fn take_linked(&mut self, sw: &mut Switching, linked: Linked) {
        let now = self.now_us();
        match linked {
            Linked::Up(largest) => sw.switcher.switch_subscribed(largest),
            Linked::Event(Some(TrackEvent::Ended { .. }))
            | Linked::Event(None)
            | Linked::Failed => {
                sw.link = None;
                sw.switcher.give_up(now);
            }
            Linked::Event(Some(event)) => {
                if let Some(item) = self.item(event, TrackRole::Base) {
                    sw.switcher.hold(item, now);
                }
            }
        }
    }

    /// Sends what the switcher has for the pad and does what it asks: subscribes a
    /// rendition, stops groups, or cuts over, the new rendition's subscription replacing
    /// `main`, whose event waiting in `held` goes with it. How the track ends if the
    /// element stops meanwhile.
    async fn apply(
        &mut self,
        sw: &mut Switching,
        main: &mut Subscription,
        held: &mut Option<Option<TrackEvent>>,
    ) -> Option<TrackEnd> {
        while let Some(item) = sw.switcher.poll_item() {
            self.media_arrived(&item);
            match self.deliver(item).await {
                Flow::Sent => {}
                Flow::Restart => return Some(TrackEnd::Restart),
                Flow::Closed => return Some(TrackEnd::Closed),
            }
        }
        while let Some(action) = sw.switcher.poll_action() {
            match action {
                Action::Subscribe {
                    rendition,
                    priority,
                    next_group,
                } => {
                    if let Some(Link::Subscribing(task)) = sw.link.take() {
                        task.abort();
                    }
                    let filter = match next_group {
                        true => FilterType::NextGroupStart,
                        false => FilterType::LargestObject,
                    };
                    let (config, session) = (self.config.clone(), self.session.clone());
                    sw.link = Some(Link::Subscribing(tokio::spawn(async move {
                        subscribe_from(&config, &session, &rendition, priority, filter).await
                    })));
                }
                Action::StopGroupsBefore(group) => {
                    if let Some(Link::Up(subscription)) = &sw.link {
                        subscription.stop_groups_before(group);
                    }
                }
                Action::Cut(change) => {
                    if let Some(Link::Up(subscription)) = sw.link.take() {
                        *main = subscription;
                        *held = None;
                    }
                    let event = Event::Rendition {
                        track: self.track.clone(),
                        from: change.from,
                        to: change.to,
                        bitrate: change.bitrate,
                        reason: change.reason,
                    };
                    let _ = self.events.send(event).await;
                }
            }
        }
        None
    }

    /// Sends an item to the pad, waiting while it is behind, unless the element pauses or
    /// resumes meanwhile (then the item is stale).
    async fn deliver(&mut self, item: Item) -> Flow {
        let resumes = self.resumes;
        tokio::select! {
            sent = self.tx.send(item) => if sent.is_err() { Flow::Closed } else { Flow::Sent },
            changed = self.controls.wait_for(|c| c.paused || c.resumes != resumes) => {
                if changed.is_err() { Flow::Closed } else { Flow::Restart }
            }
        }
    }

    /// The item for a media track event, if any. A payload that is not a frame is
    /// logged and skipped.
    fn item(&mut self, event: TrackEvent, layer: TrackRole) -> Option<Item> {
        let mut hang = self.hang.take();
        let item = self.item_read_by(&mut hang, event, layer);
        self.hang = hang;
        item
    }

    /// The item for a media track event, read with `hang` (for the hang format).
    fn item_read_by(
        &self,
        hang: &mut Option<HangReader>,
        event: TrackEvent,
        layer: TrackRole,
    ) -> Option<Item> {
        match event {
            TrackEvent::Object(object) => {
                let read = match hang {
                    None => FrameHeader::decode(&object.payload)
                        .map(|(header, au)| Some((header, object.payload.len() - au.len())))
                        .map_err(|e| e.to_string()),
                    Some(reader) => reader
                        .frame(object.group, object.id, &object.payload)
                        .map(|frame| frame.map(|f| (f.header, f.offset)))
                        .map_err(|e| e.to_string()),
                };
                match read {
                    Ok(Some((header, offset))) => {
                        let au = object.payload.slice(offset..);
                        Some(Item::Frame(Received {
                            epoch: self.epoch,
                            group: object.group,
                            header,
                            layer,
                            size: au.len(),
                            received_us: unix_us_at(object.received),
                            data: Payload::new(au, object),
                        }))
                    }
                    // A marker (hang), not a frame.
                    Ok(None) => None,
                    Err(e) => {
                        // Never waits: when the element is behind, one report is as good as many.
                        let what = format!("group {} object {}: {e}", object.group, object.id);
                        let _ = self.events.try_send(Event::Malformed(what));
                        None
                    }
                }
            }
            TrackEvent::GroupEnd { group, complete }
                if layer == TrackRole::Base && self.kind == MediaKind::Video =>
            {
                let last = match hang {
                    Some(reader) => reader.group_ended(group),
                    None => None,
                };
                Some(Item::GroupEnd {
                    epoch: self.epoch,
                    group,
                    complete,
                    last: last.filter(|_| complete),
                })
            }
            TrackEvent::GroupEnd { .. } | TrackEvent::Ended { .. } => None,
        }
    }
}

/// What settling a move came to.
enum Settled {
    /// The new subscription plays now.
    Cut,
    End(TrackEnd),
}

/// What a move's subscriptions did, if anything, without waiting.
async fn try_moved(moving: &mut Option<Moving>) -> Option<Moved> {
    let mv = moving.as_mut()?;
    tokio::select! {
        biased;
        moved = mv.next() => Some(moved),
        () = std::future::ready(()) => None,
    }
}

async fn next_moved(moving: &mut Option<Moving>) -> Moved {
    match moving {
        Some(mv) => mv.next().await,
        None => std::future::pending().await,
    }
}

/// The subscription a switch asked for, as it comes up.
enum Link {
    Subscribing(tokio::task::JoinHandle<Result<Subscription, String>>),
    Up(Subscription),
}

/// ABR's network side: the switcher's decisions, and the subscription it asked for.
struct Switching {
    switcher: Switcher<Payload>,
    link: Option<Link>,
}

/// What came of a switch's subscription.
enum Linked {
    /// It is up; the publisher had published up to this group.
    Up(Option<u64>),
    Failed,
    Event(Option<TrackEvent>),
}

impl Switching {
    /// The next thing a switch's subscription does; never while there is none.
    async fn next(&mut self) -> Linked {
        match &mut self.link {
            None => std::future::pending().await,
            Some(Link::Subscribing(task)) => match task.await {
                Ok(Ok(subscription)) => {
                    let largest = subscription.largest.map(|l| l.group);
                    self.link = Some(Link::Up(subscription));
                    Linked::Up(largest)
                }
                _ => {
                    self.link = None;
                    Linked::Failed
                }
            },
            Some(Link::Up(subscription)) => Linked::Event(subscription.next().await),
        }
    }
}

async fn next_linked(switching: &mut Option<Switching>) -> Linked {
    match switching {
        Some(sw) => sw.next().await,
        None => std::future::pending().await,
    }
}

async fn next_or_pending(sub: &mut Option<Subscription>) -> Option<TrackEvent> {
    match sub {
        Some(sub) => sub.next().await,
        None => std::future::pending().await,
    }
}

/// The tracks a catalog may come on: ours, then hang's.
const CATALOG_TRACKS: [&str; 2] = [catalog::CATALOG_TRACK, hang::CATALOG_TRACK];

/// The first catalog either subscription of [`CATALOG_TRACKS`] delivers that parses, and
/// which one it came on. A track whose document does not parse (e.g. a broadcast's
/// `catalog` in another schema) is given up for the other.
async fn first_catalog(
    subs: &mut [Option<Subscription>; 2],
    deadline: Instant,
) -> Result<(Catalog, usize), String> {
    let mut problems: Vec<String> = Vec::new();
    let wait = async {
        loop {
            let [native, hang] = &mut *subs;
            if native.is_none() && hang.is_none() {
                return Err(());
            }
            let (at, event) = tokio::select! {
                event = next_or_pending(native) => (0, event),
                event = next_or_pending(hang) => (1, event),
            };
            match event {
                Some(TrackEvent::Object(object)) => {
                    match Catalog::from_track(CATALOG_TRACKS[at], &object.payload) {
                        Ok(catalog) => return Ok((catalog, at)),
                        Err(e) => problems.push(format!("invalid {}: {e}", CATALOG_TRACKS[at])),
                    }
                }
                Some(TrackEvent::Ended { .. }) | None => problems.push(format!(
                    "the {} track ended before a catalog arrived",
                    CATALOG_TRACKS[at]
                )),
                Some(TrackEvent::GroupEnd { .. }) => continue,
            }
            subs[at] = None;
        }
    };
    let outcome = tokio::time::timeout_at(deadline.into(), wait).await;
    match outcome {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(())) => Err(problems.join("; ")),
        Err(_) if problems.is_empty() => Err("no catalog arrived".to_owned()),
        Err(_) => Err(format!("no catalog arrived ({})", problems.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_player::select::TrackPrefs;
    use moq_session::tls::Trust;
    use moq_session::{MoqUrl, Versions};

    fn server(port: u16) -> Server {
        let url = MoqUrl::parse(&format!("moqt://127.0.0.1:{port}/live")).unwrap();
        let located = url.locate(None).unwrap();
        Server {
            url,
            setup_path: located.setup_path,
            namespace: located.namespace,
            trust: Trust::Insecure,
        }
    }

    fn rotation(ports: &[u16]) -> Rotation {
        Rotation::new(&ReceiverConfig {
            server: server(ports[0]),
            backups: ports[1..].iter().map(|&p| server(p)).collect(),
            auth_token: None,
            versions: Versions::default(),
            prefs: TrackPrefs::default(),
            timeout: Duration::from_secs(10),
        })
    }

    fn port(next: Option<Next>) -> Option<(u16, bool)> {
        next.map(|n| (n.server.url.port, n.wrapped))
    }

    #[test]
    fn servers_are_tried_in_turn_and_a_full_turn_is_reported() {
        let mut r = rotation(&[1, 2, 3]);
        assert_eq!(port(r.advance()), Some((2, false)));
        assert_eq!(port(r.advance()), Some((3, false)));
        assert_eq!(port(r.advance()), Some((1, true)));
    }

    #[test]
    fn a_route_subscribed_again_that_stays_silent_fails_over_sooner() {
        let ms = Duration::from_millis;
        let long_before = Instant::now();
        let t0 = long_before + ms(60_000);
        // Media stopped at t0; the session's first subscriptions were long before.
        assert_eq!(failover_due(t0, long_before, None), t0 + FAILOVER_SILENCE);
        // Its route was found quiet at 400 ms and asked again: nothing by the reroute's
        // wait after that, the next server.
        let rerouted = Some((t0 + ms(400), ms(320)));
        assert_eq!(failover_due(t0, long_before, rerouted), t0 + ms(720));
        // Media came after the reroute: the reroute no longer counts.
        assert_eq!(
            failover_due(t0 + ms(500), t0, rerouted),
            t0 + ms(500) + FAILOVER_SILENCE
        );
        // A session just set up has the whole silence from its first subscriptions.
        assert_eq!(
            failover_due(t0 - ms(5_000), t0, None),
            t0 + FAILOVER_SILENCE
        );
    }

    #[test]
    fn after_a_move_the_next_server_is_the_one_after_where_the_session_went() {
        let mut r = rotation(&[1, 2, 3]);
        // A GOAWAY moved the session from 1 to 2, whose route then failed: 3 is next.
        r.stand_at(&server(2));
        assert_eq!(port(r.advance()), Some((3, false)));
        // A move to a server not in the list leaves the turn where it was.
        r.stand_at(&server(9));
        assert_eq!(port(r.advance()), Some((1, true)));
    }

    #[test]
    fn a_single_server_is_retried_after_every_failure() {
        let mut r = rotation(&[1]);
        assert_eq!(port(r.advance()), Some((1, true)));
        assert_eq!(port(r.advance()), Some((1, true)));
    }

    #[test]
    fn servers_that_refused_are_skipped_until_none_is_left() {
        let mut r = rotation(&[1, 2, 3]);
        r.refuse();
        assert_eq!(port(r.advance()), Some((2, false)));
        assert_eq!(port(r.advance()), Some((3, false)));
        r.refuse();
        assert_eq!(port(r.advance()), Some((2, true)));
        r.refuse();
        assert!(r.advance().is_none());
    }
}
