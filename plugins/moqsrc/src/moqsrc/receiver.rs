//! The network side of moqsrc: connect, read the catalog, subscribe to the video
//! track(s) and forward everything to the streaming thread. Free of GStreamer.

use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_media::catalog::{self, Catalog, TrackRole};
use moq_media::header::FrameHeader;
use moq_session::tls::Trust;
use moq_session::{
    FilterType, Location, MoqUrl, Session, SessionError, SubscribeOptions, Subscription,
    TrackEvent, TrackNamespace,
};
use moq_wire::draft14::publish_done_code;
use tokio::sync::mpsc;

/// Delay between connection attempts.
const RETRY_INTERVAL: Duration = Duration::from_millis(250);
/// A handshake that has not completed by then is restarted: QUIC backs off its Initial
/// retransmissions, so a fresh attempt finds a returning server sooner.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(1);
/// Subscriber priority of the enhancement track: below the base track (lower is higher).
const ENHANCEMENT_PRIORITY: u8 = 200;
const BASE_PRIORITY: u8 = 100;

#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub url: MoqUrl,
    /// Namespace of the tracks (by default the URL path).
    pub namespace: TrackNamespace,
    pub track: String,
    pub trust: Trust,
    /// How long to keep trying to connect and subscribe.
    pub timeout: Duration,
}

/// What the network side tells the streaming thread.
#[derive(Debug)]
pub enum Item {
    /// A session is up; `attempt` counts connections, 0 for the first.
    Connected {
        peer: std::net::SocketAddr,
        attempt: u32,
    },
    /// The session was lost; the receiver keeps trying for `timeout`.
    Disconnected(String),
    Catalog(Catalog),
    Frame {
        header: FrameHeader,
        layer: TrackRole,
        au: Bytes,
        received: Instant,
    },
    /// A base-layer group's stream ended; `complete` is false when it was reset.
    GroupEnd {
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

/// Requests from the streaming thread.
#[derive(Debug)]
pub enum Control {
    /// Playback jumped to this base group: older ones are no longer wanted.
    SkipBefore(u64),
}

/// Why one session ended early.
struct Lost {
    reason: String,
    /// The session had been established (so the retry clock restarts).
    was_connected: bool,
}

/// Runs until the track ends or the receiver side is dropped. A lost or refused session
/// is retried, from the live edge, for `timeout` after the last good moment; only then is
/// it an error naming the URL.
pub async fn run(
    config: ReceiverConfig,
    tx: mpsc::UnboundedSender<Item>,
    mut controls: mpsc::UnboundedReceiver<Control>,
) {
    let mut last_good = Instant::now();
    let mut attempt = 0;
    loop {
        let deadline = last_good + config.timeout;
        let Err(lost) = receive(&config, &tx, &mut controls, attempt, deadline).await else {
            return;
        };
        if lost.was_connected {
            last_good = Instant::now();
            attempt += 1;
            let _ = tx.send(Item::Disconnected(lost.reason.clone()));
        }
        if Instant::now() + RETRY_INTERVAL >= last_good + config.timeout {
            let _ = tx.send(Item::Error(format!(
                "{} (gave up after {} s)",
                lost.reason,
                config.timeout.as_secs()
            )));
            return;
        }
        tokio::time::sleep(RETRY_INTERVAL).await;
    }
}

async fn receive(
    config: &ReceiverConfig,
    tx: &mpsc::UnboundedSender<Item>,
    controls: &mut mpsc::UnboundedReceiver<Control>,
    attempt: u32,
    deadline: Instant,
) -> Result<(), Lost> {
    let remaining = deadline
        .saturating_duration_since(Instant::now())
        .min(CONNECT_ATTEMPT);
    let connecting = moq_session::connect(&config.url, &config.trust, None);
    let session = match tokio::time::timeout(remaining, connecting).await {
        Ok(Ok(session)) => session,
        Ok(Err(err)) => return Err(not_connected(config, err)),
        Err(_) => return Err(not_connected(config, SessionError::Timeout("connecting"))),
    };
    let _ = tx.send(Item::Connected {
        peer: session.remote_address(),
        attempt,
    });
    receive_session(config, tx, controls, &session)
        .await
        .map_err(|reason| Lost {
            reason,
            was_connected: true,
        })
}

fn not_connected(config: &ReceiverConfig, err: SessionError) -> Lost {
    Lost {
        reason: format!("cannot connect to {}: {err}", config.url),
        was_connected: false,
    }
}

async fn receive_session(
    config: &ReceiverConfig,
    tx: &mpsc::UnboundedSender<Item>,
    controls: &mut mpsc::UnboundedReceiver<Control>,
    session: &Session,
) -> Result<(), String> {
    let namespace = config.namespace.clone();
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
        .map_err(|e| fail("subscribing to the catalog", e))?;
    // Subscribe to the video before the catalog arrives so no group is missed; its
    // events wait in the subscription until the catalog has been forwarded.
    let mut base = session
        .subscribe(
            namespace.clone(),
            &config.track,
            SubscribeOptions {
                priority: BASE_PRIORITY,
                ..SubscribeOptions::default()
            },
        )
        .await
        .map_err(|e| fail(&format!("subscribing to track {:?}", config.track), e))?;
    let catalog = first_catalog(&mut catalog_sub, config.timeout)
        .await
        .map_err(|e| format!("{}: {e}", config.url))?;
    let enhancement = catalog.track(TrackRole::Enhancement).map(str::to_owned);
    let _ = tx.send(Item::Catalog(catalog));

    let mut enh = match enhancement {
        Some(name) => Some(
            session
                .subscribe(
                    namespace,
                    &name,
                    SubscribeOptions {
                        priority: ENHANCEMENT_PRIORITY,
                        ..SubscribeOptions::default()
                    },
                )
                .await
                .map_err(|e| fail(&format!("subscribing to track {name:?}"), e))?,
        ),
        None => None,
    };

    let mut catalog_updates = Some(catalog_sub);
    loop {
        tokio::select! {
            event = base.next() => match event {
                // Only the publisher ending its track is the end of the stream; a relay
                // ends subscriptions with other codes when the publisher goes away, and
                // then we subscribe again.
                Some(TrackEvent::Ended { status, .. }) if status == publish_done_code::TRACK_ENDED => {
                    let _ = tx.send(Item::Eos);
                    return Ok(());
                }
                Some(TrackEvent::Ended { status, reason }) => {
                    return Err(format!(
                        "{}: the track ended abnormally (PUBLISH_DONE {status:#x} {reason:?})",
                        config.url
                    ));
                }
                Some(event) => forward(event, TrackRole::Base, tx),
                None => return Err(lost(session, config)),
            },
            event = next_or_pending(&mut enh) => match event {
                Some(TrackEvent::Ended { .. }) | None => enh = None,
                Some(event) => forward(event, TrackRole::Enhancement, tx),
            },
            event = next_or_pending(&mut catalog_updates) => match event {
                Some(TrackEvent::Object(object)) => match Catalog::from_json(&object.payload) {
                    Ok(c) => { let _ = tx.send(Item::Catalog(c)); }
                    Err(e) => { let _ = tx.send(Item::Malformed(format!("catalog update: {e}"))); }
                },
                Some(TrackEvent::Ended { .. }) | None => catalog_updates = None,
                Some(TrackEvent::GroupEnd { .. }) => {}
            },
            Some(Control::SkipBefore(group)) = controls.recv() => base.stop_groups_before(group),
        }
        if tx.is_closed() {
            return Ok(());
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

async fn first_catalog(sub: &mut Subscription, timeout: Duration) -> Result<Catalog, String> {
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
    tokio::time::timeout(timeout, wait)
        .await
        .map_err(|_| format!("no catalog within {} s", timeout.as_secs()))?
}

fn forward(event: TrackEvent, layer: TrackRole, tx: &mpsc::UnboundedSender<Item>) {
    let item = match event {
        TrackEvent::Object(object) => match FrameHeader::decode(&object.payload) {
            Ok((header, au)) => Item::Frame {
                header,
                layer,
                au: object.payload.slice_ref(au),
                received: object.received,
            },
            Err(e) => Item::Malformed(format!("group {} object {}: {e}", object.group, object.id)),
        },
        TrackEvent::GroupEnd { group, complete } if layer == TrackRole::Base => {
            Item::GroupEnd { group, complete }
        }
        TrackEvent::GroupEnd { .. } | TrackEvent::Ended { .. } => return,
    };
    let _ = tx.send(item);
}
