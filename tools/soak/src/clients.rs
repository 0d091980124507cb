//! Network clients the runner drives on its own tokio runtime: a subscriber that stalls
//! (subscribes, then never reads a data stream, so it never extends flow-control credit)
//! and short-lived subscribers that connect, take a little and drop everything.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moq_session::tls::{self, Trust};
use moq_session::{
    FilterType, Location, MoqUrl, SessionConfig, SubscribeOptions, Subscription, TrackEvent,
};
use moq_testkit::media::NAMESPACE;
use moq_testkit::peer::RawPeer;
use moq_wire::message::{ControlMessage, TrackNamespace};
use tokio::sync::watch;
use tokio::time::timeout;

/// Longest wait for any one network step.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before a stalled peer that was disconnected comes back.
const RECONNECT_DELAY: Duration = Duration::from_millis(200);

/// What the stalled peer went through; shared with the runner.
#[derive(Debug, Default)]
pub struct StallCounters {
    /// Sessions that reached the stalled state (all subscriptions acknowledged).
    pub stalls: AtomicU64,
    /// Of those, sessions the sender closed (or that otherwise died).
    pub disconnects: AtomicU64,
    /// Attempts that failed before stalling.
    pub failures: AtomicU64,
    /// Whether a stalled session is open now (1) or not (0).
    pub connected: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl StallCounters {
    fn note(&self, error: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Connects, subscribes to `tracks` and waits for every SUBSCRIBE_OK; from then on the
/// returned peer is never read: its data streams are neither accepted nor read.
async fn stall_once(url: &str, tracks: &[&str]) -> Result<RawPeer, String> {
    let mut peer = timeout(STEP_TIMEOUT, RawPeer::connect(url))
        .await
        .map_err(|_| "connect timed out".to_string())??;
    // The URL's path: the broadcast itself for moqsink, the relay's root for a relay.
    let path = MoqUrl::parse(url).map_err(|e| e.to_string())?.path;
    timeout(STEP_TIMEOUT, peer.setup(&path, 64))
        .await
        .map_err(|_| "SETUP timed out".to_string())??;
    let namespace = TrackNamespace::from_path(NAMESPACE);
    let mut pending = HashSet::new();
    for (i, track) in tracks.iter().enumerate() {
        let request_id = 2 * i as u64;
        peer.subscribe(request_id, &namespace, track).await?;
        pending.insert(request_id);
    }
    while !pending.is_empty() {
        let msg = timeout(STEP_TIMEOUT, peer.read())
            .await
            .map_err(|_| "no SUBSCRIBE_OK in time".to_string())??;
        match msg {
            ControlMessage::SubscribeOk(ok) => {
                pending.remove(&ok.request_id);
            }
            ControlMessage::SubscribeError(err) => {
                return Err(format!("SUBSCRIBE refused: {}", err.reason));
            }
            _ => {}
        }
    }
    Ok(peer)
}

/// Keeps a stalled subscriber on `url` until `stop` turns true. With `reconnect`, a peer
/// the sender disconnects comes back and stalls again; without, it stays away.
pub async fn stall(
    url: String,
    tracks: Vec<&'static str>,
    reconnect: bool,
    counters: Arc<StallCounters>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        let peer = tokio::select! {
            peer = stall_once(&url, &tracks) => peer,
            _ = stop.changed() => return,
        };
        match peer {
            Ok(peer) => {
                counters.stalls.fetch_add(1, Ordering::Relaxed);
                counters.connected.store(1, Ordering::Relaxed);
                tokio::select! {
                    reason = peer.conn.closed() => {
                        counters.connected.store(0, Ordering::Relaxed);
                        counters.disconnects.fetch_add(1, Ordering::Relaxed);
                        counters.note(reason.to_string());
                    }
                    _ = stop.changed() => {
                        counters.connected.store(0, Ordering::Relaxed);
                        return;
                    }
                }
                if !reconnect {
                    return;
                }
            }
            Err(err) => {
                counters.failures.fetch_add(1, Ordering::Relaxed);
                counters.note(err);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RECONNECT_DELAY) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Waits for the next object of a subscription.
async fn first_object(sub: &mut Subscription, what: &str) -> Result<(), String> {
    timeout(STEP_TIMEOUT, async {
        loop {
            match sub.next().await {
                Some(TrackEvent::Object(_)) => return Ok(()),
                Some(_) => {}
                None => return Err(format!("{what}: ended before an object")),
            }
        }
    })
    .await
    .map_err(|_| format!("{what}: no object in time"))?
}

/// One short-lived subscriber: connect, subscribe to the catalog and the video, take one
/// object of each, then drop everything (no UNSUBSCRIBE wait, no explicit close).
pub async fn connect_take_drop(url: &MoqUrl, trust: &Trust) -> Result<(), String> {
    let namespace = TrackNamespace::from_path(NAMESPACE);
    let session = timeout(
        STEP_TIMEOUT,
        moq_session::connect(url, trust, SessionConfig::default()),
    )
    .await
    .map_err(|_| "connect timed out".to_string())?
    .map_err(|e| format!("connect: {e}"))?;
    let catalog_options = SubscribeOptions {
        filter: FilterType::AbsoluteStart(Location {
            group: 0,
            object: 0,
        }),
        ..SubscribeOptions::default()
    };
    let mut catalog = session
        .subscribe(namespace.clone(), "catalog", catalog_options)
        .await
        .map_err(|e| format!("catalog: {e}"))?;
    first_object(&mut catalog, "catalog").await?;
    let mut video = session
        .subscribe(namespace, "video", SubscribeOptions::default())
        .await
        .map_err(|e| format!("video: {e}"))?;
    first_object(&mut video, "video").await?;
    drop(video);
    drop(catalog);
    drop(session);
    Ok(())
}

/// Progress of a churn run; shared with the runner.
#[derive(Debug, Default)]
pub struct ChurnCounters {
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl ChurnCounters {
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Runs `cycles` connect/subscribe/drop cycles, `concurrency` at a time, each worker
/// waiting `pause` after each of its cycles, until done or `stop` turns true.
pub async fn churn(
    url: String,
    fingerprint: String,
    cycles: u64,
    concurrency: usize,
    pause: Duration,
    counters: Arc<ChurnCounters>,
    stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let url = MoqUrl::parse(&url).map_err(|e| e.to_string())?;
    let trust =
        Trust::Fingerprint(tls::parse_fingerprint(&fingerprint).map_err(|e| e.to_string())?);
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (url, trust, next, counters, stop) = (
            url.clone(),
            trust.clone(),
            next.clone(),
            counters.clone(),
            stop.clone(),
        );
        workers.spawn(async move {
            while !*stop.borrow() && next.fetch_add(1, Ordering::Relaxed) < cycles {
                match connect_take_drop(&url, &trust).await {
                    Ok(()) => {}
                    Err(err) => {
                        counters.failed.fetch_add(1, Ordering::Relaxed);
                        *counters
                            .last_error
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = Some(err);
                    }
                }
                counters.done.fetch_add(1, Ordering::Relaxed);
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
    Ok(())
}
