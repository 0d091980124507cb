//! The network side of moqsrc: connect, read the catalog, subscribe to the video
//! track(s) and forward everything to the streaming thread. Free of GStreamer.
//!
//! Bounded both ways. Items wait in a bounded channel; when the streaming thread stops
//! pulling, forwarding waits, the session's streams stop being read and QUIC's flow
//! control throttles the publisher. While the element is paused the media subscriptions
//! are dropped (a live source captures nothing in PAUSED) and taken up again at the live
//! edge on resume; each subscription round has its own epoch, so the streaming thread can
//! tell stale frames from new ones.

use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_media::catalog::{self, Catalog, TrackRole};
use moq_media::header::FrameHeader;
use moq_session::tls::Trust;
use moq_session::{
    FilterType, Location, MoqUrl, Object, Session, SessionConfig, SessionError, SubscribeOptions,
    Subscription, TrackEvent, TrackNamespace,
};
use moq_wire::draft14::publish_done_code;
use tokio::sync::{mpsc, watch};

/// Delay between connection attempts.
const RETRY_INTERVAL: Duration = Duration::from_millis(250);
/// A handshake that has not completed by then is restarted: QUIC backs off its Initial
/// retransmissions, so a fresh attempt finds a returning server sooner.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(1);
/// Subscriber priority of the enhancement track: below the base track (lower is higher).
const ENHANCEMENT_PRIORITY: u8 = 200;
const BASE_PRIORITY: u8 = 100;
/// Items waiting for the streaming thread.
pub const ITEM_QUEUE: usize = 64;

#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub url: MoqUrl,
    /// Namespace of the tracks (by default the URL path).
    pub namespace: TrackNamespace,
    pub track: String,
    pub trust: Trust,
    /// How long to keep trying to get media before giving up with an error.
    pub timeout: Duration,
}

/// What the network side tells the streaming thread.
#[derive(Debug)]
pub enum Item {
    /// Media flows from a new session; `attempt` counts such sessions, 0 for the first.
    Connected {
        peer: std::net::SocketAddr,
        attempt: u32,
    },
    /// A session that delivered media was lost; the receiver keeps trying for `timeout`.
    Disconnected(String),
    Catalog(Catalog),
    /// The media subscriptions (re)started, after `resumes` resumes of the element: frames
    /// of this epoch follow.
    Subscribed {
        epoch: u64,
        resumes: u64,
    },
    Frame(Received),
    /// A base-layer group's stream ended; `complete` is false when it was reset.
    GroupEnd {
        epoch: u64,
        group: u64,
        complete: bool,
    },
    /// The publisher ended the track.
    Eos,
    /// A payload that is not a valid frame; logged and skipped.
    Malformed(String),
    /// Fatal: the element posts an error naming the URL.
    Error(String),
}

/// A frame as received. The object it came in keeps its bytes counted against the
/// session's receive budget until this is dropped.
#[derive(Debug)]
pub struct Received {
    pub epoch: u64,
    pub header: FrameHeader,
    pub layer: TrackRole,
    pub au: Bytes,
    pub received: Instant,
    pub _object: Object,
}

/// What the streaming thread wants; the latest value counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Control {
    /// Playback jumped to this base group: older ones are no longer wanted.
    pub skip_before: u64,
    /// The element is paused: no media wanted.
    pub paused: bool,
    /// Bumped on every resume, so a pause too short to be seen still restarts the media
    /// subscriptions at the live edge.
    pub resumes: u64,
}

/// Why one session ended early.
struct Lost {
    reason: String,
    /// Media had flowed in this session.
    had_media: bool,
}

/// The receiver's state across sessions.
struct Progress {
    /// Sessions that delivered media so far.
    sessions: u32,
    /// Epoch of the latest media subscriptions.
    epoch: u64,
    /// When media last arrived (or waiting for it was excused, e.g. while paused).
    last_media: Instant,
    /// The `resumes` of [`Control`] already acted on.
    resumes: u64,
}

/// What forwarding an item came to.
enum Flow {
    Sent,
    /// The element paused or resumed: the media subscriptions restart.
    Restart,
    /// The element is gone.
    Closed,
}

/// Runs until the track ends or the element drops its side. A lost or refused session is
/// retried, from the live edge, until no media has arrived for `timeout`; only then is it
/// an error naming the URL and what failed.
pub async fn run(
    config: ReceiverConfig,
    tx: mpsc::Sender<Item>,
    controls: watch::Receiver<Control>,
) {
    let mut controls = controls;
    let mut progress = Progress {
        sessions: 0,
        epoch: 0,
        last_media: Instant::now(),
        resumes: controls.borrow().resumes,
    };
    loop {
        let Err(lost) = receive(&config, &tx, &mut controls, &mut progress).await else {
            return;
        };
        if lost.had_media {
            let _ = tx.send(Item::Disconnected(lost.reason.clone())).await;
        }
        if controls.borrow().paused {
            progress.last_media = Instant::now();
        }
        if Instant::now() + RETRY_INTERVAL >= progress.last_media + config.timeout {
            let _ = tx
                .send(Item::Error(format!(
                    "{} (no media for {} s)",
                    lost.reason,
                    config.timeout.as_secs()
                )))
                .await;
            return;
        }
        tokio::time::sleep(RETRY_INTERVAL).await;
    }
}

async fn receive(
    config: &ReceiverConfig,
    tx: &mpsc::Sender<Item>,
    controls: &mut watch::Receiver<Control>,
    progress: &mut Progress,
) -> Result<(), Lost> {
    let remaining = (progress.last_media + config.timeout)
        .saturating_duration_since(Instant::now())
        .clamp(RETRY_INTERVAL, CONNECT_ATTEMPT);
    let connecting = moq_session::connect(&config.url, &config.trust, SessionConfig::default());
    let session = match tokio::time::timeout(remaining, connecting).await {
        Ok(Ok(session)) => session,
        Ok(Err(err)) => return Err(not_connected(config, err)),
        Err(_) => return Err(not_connected(config, SessionError::Timeout("connecting"))),
    };
    let mut had_media = false;
    receive_session(config, tx, controls, progress, &session, &mut had_media)
        .await
        .map_err(|reason| Lost { reason, had_media })
}

fn not_connected(config: &ReceiverConfig, err: SessionError) -> Lost {
    Lost {
        reason: format!("cannot connect to {}: {err}", config.url),
        had_media: false,
    }
}

/// The media subscriptions of one round.
struct Media {
    base: Subscription,
    enhancement: Option<Subscription>,
}

async fn receive_session(
    config: &ReceiverConfig,
    tx: &mpsc::Sender<Item>,
    controls: &mut watch::Receiver<Control>,
    progress: &mut Progress,
    session: &Session,
    had_media: &mut bool,
) -> Result<(), String> {
    let namespace = config.namespace.clone();
    let path = namespace.to_path();
    let fail = |what: &str, err: SessionError| format!("{}: {what}: {err}", config.url);

    // The catalog's latest group is retained by the publisher: start from the beginning.
    let mut catalog_sub = session
        .subscribe(
            namespace.clone(),
            catalog::CATALOG_TRACK,
            SubscribeOptions {
                priority: 0,
                filter: FilterType::AbsoluteStart(Location {
                    group: 0,
                    object: 0,
                }),
                ..SubscribeOptions::default()
            },
        )
        .await
        .map_err(|e| fail(&format!("the catalog of namespace {path:?}"), e))?;
    // Subscribe to the video before the catalog arrives so no group is missed; its
    // events wait in the subscription until the catalog has been forwarded.
    let mut base = Some(subscribe(config, session, &config.track, BASE_PRIORITY).await?);
    let deadline = progress.last_media + config.timeout;
    let mut catalog = first_catalog(&mut catalog_sub, deadline)
        .await
        .map_err(|e| format!("{}: namespace {path:?}: {e}", config.url))?;
    if tx.send(Item::Catalog(catalog.clone())).await.is_err() {
        return Ok(());
    }
    let mut catalog_updates = Some(catalog_sub);
    loop {
        // Paused: keep the session, want no media.
        while controls.borrow().paused {
            progress.last_media = Instant::now();
            if controls.changed().await.is_err() {
                return Ok(());
            }
        }
        progress.resumes = controls.borrow().resumes;
        let base = match base.take() {
            Some(base) => base,
            None => subscribe(config, session, &config.track, BASE_PRIORITY).await?,
        };
        let enhancement = match catalog.track(TrackRole::Enhancement) {
            Some(name) => Some(subscribe(config, session, name, ENHANCEMENT_PRIORITY).await?),
            None => None,
        };
        let media = Media { base, enhancement };
        progress.epoch += 1;
        let subscribed = Item::Subscribed {
            epoch: progress.epoch,
            resumes: progress.resumes,
        };
        if tx.send(subscribed).await.is_err() {
            return Ok(());
        }
        if !*had_media {
            let connected = Item::Connected {
                peer: session.remote_address(),
                attempt: progress.sessions,
            };
            if tx.send(connected).await.is_err() {
                return Ok(());
            }
            progress.sessions += 1;
            *had_media = true;
        }
        let ended = play(
            config,
            tx,
            controls,
            progress,
            session,
            media,
            &mut catalog,
            &mut catalog_updates,
        )
        .await?;
        if ended {
            return Ok(());
        }
    }
}

/// Subscribes to a media track of the namespace.
async fn subscribe(
    config: &ReceiverConfig,
    session: &Session,
    name: &str,
    priority: u8,
) -> Result<Subscription, String> {
    let options = SubscribeOptions {
        priority,
        ..SubscribeOptions::default()
    };
    session
        .subscribe(config.namespace.clone(), name, options)
        .await
        .map_err(|e| {
            format!(
                "{}: track {name:?} in namespace {:?}: {e}",
                config.url,
                config.namespace.to_path()
            )
        })
}

/// Forwards one round of media until the track ends (`Ok(true)`), the element pauses or
/// resumes (`Ok(false)`), or the session is lost.
#[allow(clippy::too_many_arguments)]
async fn play(
    config: &ReceiverConfig,
    tx: &mpsc::Sender<Item>,
    controls: &mut watch::Receiver<Control>,
    progress: &mut Progress,
    session: &Session,
    mut media: Media,
    catalog: &mut Catalog,
    catalog_updates: &mut Option<Subscription>,
) -> Result<bool, String> {
    let epoch = progress.epoch;
    let mut skip_before = controls.borrow().skip_before;
    loop {
        let item = tokio::select! {
            event = media.base.next() => match event {
                // Only the publisher ending its track is the end of the stream; a relay
                // ends subscriptions with other codes when the publisher goes away, and
                // then we subscribe again.
                Some(TrackEvent::Ended { status, .. }) if status == publish_done_code::TRACK_ENDED => {
                    let _ = tx.send(Item::Eos).await;
                    return Ok(true);
                }
                Some(TrackEvent::Ended { status, reason }) => {
                    return Err(format!(
                        "{}: the track ended abnormally (PUBLISH_DONE {status:#x} {reason:?})",
                        config.url
                    ));
                }
                Some(event) => media_item(event, TrackRole::Base, epoch),
                None => return Err(lost(session, config)),
            },
            event = next_or_pending(&mut media.enhancement) => match event {
                Some(TrackEvent::Ended { .. }) | None => {
                    media.enhancement = None;
                    None
                }
                Some(event) => media_item(event, TrackRole::Enhancement, epoch),
            },
            event = next_or_pending(catalog_updates) => match event {
                Some(TrackEvent::Object(object)) => match Catalog::from_json(&object.payload) {
                    Ok(c) => {
                        *catalog = c.clone();
                        Some(Item::Catalog(c))
                    }
                    Err(e) => Some(Item::Malformed(format!("catalog update: {e}"))),
                },
                Some(TrackEvent::Ended { .. }) | None => {
                    *catalog_updates = None;
                    None
                }
                Some(TrackEvent::GroupEnd { .. }) => None,
            },
            changed = controls.changed() => {
                if changed.is_err() {
                    return Ok(true);
                }
                let c = *controls.borrow();
                if c.paused || c.resumes != progress.resumes {
                    return Ok(false);
                }
                if c.skip_before > skip_before {
                    skip_before = c.skip_before;
                    media.base.stop_groups_before(skip_before);
                }
                None
            }
        };
        let Some(item) = item else {
            continue;
        };
        if matches!(item, Item::Frame(_)) {
            progress.last_media = Instant::now();
        }
        match deliver(tx, controls, progress, item).await {
            Flow::Sent => {}
            Flow::Restart => return Ok(false),
            Flow::Closed => return Ok(true),
        }
    }
}

/// Sends an item to the streaming thread, waiting while it is behind, unless the element
/// pauses or resumes meanwhile (then the item is stale).
async fn deliver(
    tx: &mpsc::Sender<Item>,
    controls: &mut watch::Receiver<Control>,
    progress: &Progress,
    item: Item,
) -> Flow {
    let resumes = progress.resumes;
    tokio::select! {
        sent = tx.send(item) => if sent.is_err() { Flow::Closed } else { Flow::Sent },
        changed = controls.wait_for(|c| c.paused || c.resumes != resumes) => {
            if changed.is_err() { Flow::Closed } else { Flow::Restart }
        }
    }
}

fn lost(session: &Session, config: &ReceiverConfig) -> String {
    match session.close_reason() {
        Some(reason) => format!("connection to {} lost: {reason}", config.url),
        None => format!("connection to {} lost", config.url),
    }
}

async fn next_or_pending(sub: &mut Option<Subscription>) -> Option<TrackEvent> {
    match sub {
        Some(sub) => sub.next().await,
        None => std::future::pending().await,
    }
}

async fn first_catalog(sub: &mut Subscription, deadline: Instant) -> Result<Catalog, String> {
    let wait = async {
        loop {
            match sub.next().await {
                Some(TrackEvent::Object(object)) => {
                    return Catalog::from_json(&object.payload)
                        .map_err(|e| format!("invalid catalog: {e}"));
                }
                Some(TrackEvent::Ended { .. }) | None => {
                    return Err("the catalog track ended before a catalog arrived".to_owned());
                }
                Some(_) => {}
            }
        }
    };
    tokio::time::timeout_at(deadline.into(), wait)
        .await
        .map_err(|_| "no catalog arrived".to_owned())?
}

/// The item for a media track event, if any.
fn media_item(event: TrackEvent, layer: TrackRole, epoch: u64) -> Option<Item> {
    match event {
        TrackEvent::Object(object) => Some(match FrameHeader::decode(&object.payload) {
            Ok((header, au)) => Item::Frame(Received {
                epoch,
                header,
                layer,
                au: object.payload.slice_ref(au),
                received: object.received,
                _object: object,
            }),
            Err(e) => Item::Malformed(format!("group {} object {}: {e}", object.group, object.id)),
        }),
        TrackEvent::GroupEnd { group, complete } if layer == TrackRole::Base => {
            Some(Item::GroupEnd {
                epoch,
                group,
                complete,
            })
        }
        TrackEvent::GroupEnd { .. } | TrackEvent::Ended { .. } => None,
    }
}
