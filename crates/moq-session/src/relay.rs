//! Publishing through a relay: connect, announce the namespace (PUBLISH_NAMESPACE) and
//! serve the relay's SUBSCRIBEs; reconnect with capped backoff whenever the session is lost,
//! trying the relay's URL and its backups in turn.
//!
//! A relay about to restart says GOAWAY and grants a drain window: the publisher then
//! announces on another session first (the URI the GOAWAY names, the same URL — which a
//! load balancer may now lead elsewhere — or a backup) and closes the old one only once the
//! new one is announced, so the relays never lose the broadcast's origin. A new
//! authorization token (the old one about to expire) is presented the same way: on a new
//! session to the same relay, announced before the old one goes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::endpoint::connect_within;
use crate::error::SessionError;
use crate::inner::Session;
use crate::session::SessionConfig;
use crate::tls::Trust;
use crate::track::lock;
use crate::url::MoqUrl;

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long one relay is tried before the next (or, with none, the same one again after
/// the backoff); attempts start every second within it ([`connect_within`]).
const CONNECT_WITHIN: Duration = Duration::from_secs(3);

/// What happened to the relay connection.
#[derive(Debug)]
pub enum RelayEvent {
    /// Connected and the namespace announced; `attempt` counts sessions, 0 for the first.
    Announced {
        peer: std::net::SocketAddr,
        attempt: u32,
    },
    /// The session was lost or could not be set up; another attempt follows.
    Disconnected(SessionError),
    /// The relay refused us for good (authorization, bad address): no more attempts.
    Refused(SessionError),
    /// The broadcast is announced on a new session at `url` (`peer`) now, because of
    /// `why`; the old one serves what the relay still routes through it until the relay
    /// closes it.
    Moved {
        from: String,
        url: String,
        peer: std::net::SocketAddr,
        why: MoveCause,
    },
}

/// Why a publisher or a player moved to a new session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MoveCause {
    /// The server said GOAWAY.
    #[default]
    Goaway,
    /// The application set a new authorization token.
    AuthToken,
}

impl MoveCause {
    /// Its name in bus messages.
    pub fn as_str(self) -> &'static str {
        match self {
            MoveCause::Goaway => "goaway",
            MoveCause::AuthToken => "auth-token",
        }
    }
}

/// A relay to publish through: its URL and how its certificate is checked.
#[derive(Debug, Clone)]
pub struct RelayTarget {
    pub url: MoqUrl,
    pub trust: Trust,
}

/// Keeps a broadcast announced on a relay until dropped.
#[derive(Debug)]
pub struct RelayPublisher {
    task: JoinHandle<()>,
    announced: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Session>>>,
    token: watch::Sender<Option<String>>,
}

impl RelayPublisher {
    /// Starts connecting with `config` (its `publish` is the broadcast to announce). Must
    /// run inside a tokio runtime. `events` is never waited on: when it is full, events
    /// are dropped.
    /// `relays`: the relay's URL first, then backups tried in turn when it fails.
    pub fn start(
        relays: Vec<RelayTarget>,
        config: SessionConfig,
        events: mpsc::Sender<RelayEvent>,
    ) -> RelayPublisher {
        let announced = Arc::new(AtomicBool::new(false));
        let current = Arc::new(Mutex::new(None));
        let (token, tokens) = watch::channel(config.auth_token.clone());
        let task = tokio::spawn(run(
            relays,
            config,
            events,
            announced.clone(),
            current.clone(),
            tokens,
        ));
        RelayPublisher {
            task,
            announced,
            current,
            token,
        }
    }

    /// Presents `token` from now on: on a new session that takes over from the one in
    /// use (a relay closes a session whose token expires), and on every later one.
    pub fn set_auth_token(&self, token: Option<String>) {
        self.token.send_if_modified(|current| {
            let changed = *current != token;
            *current = token;
            changed
        });
    }

    /// Whether the namespace is announced on the relay right now.
    pub fn is_announced(&self) -> bool {
        self.announced.load(Ordering::Relaxed)
    }

    /// The session with the relay, while there is one.
    pub fn session(&self) -> Option<Session> {
        lock(&self.current).clone()
    }
}

impl Drop for RelayPublisher {
    fn drop(&mut self) {
        // Dropping the task drops its session, which closes the connection.
        self.task.abort();
    }
}

/// Connects to `relay` and announces the namespace there; `moving`: the session takes
/// over from one the relay said GOAWAY on ([`Session::continue_broadcast`]).
async fn announce_on(
    relay: &RelayTarget,
    config: &SessionConfig,
    moving: bool,
) -> Result<Session, SessionError> {
    let session = connect_within(&relay.url, &relay.trust, config.clone(), CONNECT_WITHIN)
        .await
        .map_err(|e| match e {
            SessionError::Timeout(_) => SessionError::Timeout("connecting to the relay"),
            e => e,
        })?;
    if moving {
        session.continue_broadcast();
    }
    if let Some(namespace) = config.publish.as_ref().map(|b| b.namespace().clone()) {
        session.publish_namespace(namespace).await?;
    }
    Ok(session)
}

/// Where to go after a GOAWAY from `relays[at]`, in order: the URI it named, the same URL,
/// then the other relays.
fn move_targets(relays: &[RelayTarget], at: usize, uri: &str) -> Vec<RelayTarget> {
    let current = &relays[at];
    let named = MoqUrl::parse(uri).ok().map(|url| RelayTarget {
        trust: relays
            .iter()
            .find(|r| r.url.authority() == url.authority())
            .map_or_else(|| current.trust.clone(), |r| r.trust.clone()),
        url,
    });
    named
        .into_iter()
        .chain((0..relays.len()).map(|i| relays[(at + i) % relays.len()].clone()))
        .collect()
}

/// A session on another relay, announced, that did not say GOAWAY itself at once.
async fn announce_elsewhere(
    targets: Vec<RelayTarget>,
    config: &SessionConfig,
) -> Option<(Session, RelayTarget)> {
    for target in targets {
        if let Ok(session) = announce_on(&target, config, true).await {
            if session.going_away().is_none() {
                return Some((session, target));
            }
            session.close("going away too");
        }
    }
    None
}

/// How a publishing session came to an end: lost, or to be replaced by one elsewhere.
enum Ending {
    Closed(SessionError),
    Move(Vec<RelayTarget>, MoveCause),
}

async fn run(
    relays: Vec<RelayTarget>,
    config: SessionConfig,
    events: mpsc::Sender<RelayEvent>,
    announced: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Session>>>,
    mut tokens: watch::Receiver<Option<String>>,
) {
    let mut config = config;
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 0;
    let mut at = 0;
    // A session announced by a move, to go on with.
    let mut moved: Option<Session> = None;
    loop {
        // The newest token, also one set while no session was up.
        config.auth_token = tokens.borrow_and_update().clone();
        let session = match moved.take() {
            Some(session) => Ok(session),
            None => announce_on(&relays[at], &config, false).await,
        };
        let err = match session {
            Ok(session) => {
                let _ = events.try_send(RelayEvent::Announced {
                    peer: session.remote_address(),
                    attempt,
                });
                attempt += 1;
                backoff = FIRST_BACKOFF;
                announced.store(true, Ordering::Relaxed);
                *lock(&current) = Some(session.clone());
                let ending = tokio::select! {
                    closed = session.closed() => Ending::Closed(closed),
                    uri = session.goaway_received() => {
                        Ending::Move(move_targets(&relays, at, &uri), MoveCause::Goaway)
                    }
                    Ok(()) = tokens.changed() => {
                        config.auth_token = tokens.borrow_and_update().clone();
                        Ending::Move(vec![relays[at].clone()], MoveCause::AuthToken)
                    }
                };
                let closed = match ending {
                    Ending::Closed(closed) => closed,
                    Ending::Move(targets, why) => {
                        match announce_elsewhere(targets, &config).await {
                            Some((next, target)) => {
                                let from = relays[at].url.to_string();
                                at = relays
                                    .iter()
                                    .position(|r| r.url == target.url)
                                    .unwrap_or(at);
                                *lock(&current) = Some(next.clone());
                                // The old session serves what the relay still routes through
                                // it until the relay closes it.
                                tokio::spawn(async move {
                                    let _ = session.closed().await;
                                });
                                let _ = events.try_send(RelayEvent::Moved {
                                    from,
                                    url: target.url.to_string(),
                                    peer: next.remote_address(),
                                    why,
                                });
                                moved = Some(next);
                                continue;
                            }
                            // Nowhere to go: serve the old session until it closes.
                            None => session.closed().await,
                        }
                    }
                };
                lock(&current).take();
                announced.store(false, Ordering::Relaxed);
                closed
            }
            Err(err) => err,
        };
        // Refused with a token the application has replaced since: try the new one.
        if err.is_refusal() && !tokens.has_changed().unwrap_or(false) {
            let _ = events.try_send(RelayEvent::Refused(err));
            return;
        }
        let _ = events.try_send(RelayEvent::Disconnected(err));
        at = (at + 1) % relays.len();
        if at == 0 {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}
