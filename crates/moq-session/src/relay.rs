//! Publishing through a relay: connect, announce the namespace (PUBLISH_NAMESPACE) and
//! serve the relay's SUBSCRIBEs; reconnect with capped backoff whenever the session is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::endpoint::connect;
use crate::error::SessionError;
use crate::session::{Session, SessionConfig};
use crate::tls::Trust;
use crate::track::lock;
use crate::url::MoqUrl;

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A handshake not done by then is restarted (QUIC backs off its Initial retransmissions).
const CONNECT_ATTEMPT: Duration = Duration::from_secs(1);

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
}

/// Keeps a broadcast announced on a relay until dropped.
#[derive(Debug)]
pub struct RelayPublisher {
    task: JoinHandle<()>,
    announced: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Session>>>,
}

impl RelayPublisher {
    /// Starts connecting with `config` (its `publish` is the broadcast to announce). Must
    /// run inside a tokio runtime. `events` is never waited on: when it is full, events
    /// are dropped.
    pub fn start(
        url: MoqUrl,
        trust: Trust,
        config: SessionConfig,
        events: mpsc::Sender<RelayEvent>,
    ) -> RelayPublisher {
        let announced = Arc::new(AtomicBool::new(false));
        let current = Arc::new(Mutex::new(None));
        let task = tokio::spawn(run(
            url,
            trust,
            config,
            events,
            announced.clone(),
            current.clone(),
        ));
        RelayPublisher {
            task,
            announced,
            current,
        }
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

async fn run(
    url: MoqUrl,
    trust: Trust,
    config: SessionConfig,
    events: mpsc::Sender<RelayEvent>,
    announced: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Session>>>,
) {
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 0;
    let namespace = config.publish.as_ref().map(|b| b.namespace().clone());
    loop {
        let session = async {
            let session =
                tokio::time::timeout(CONNECT_ATTEMPT, connect(&url, &trust, config.clone()))
                    .await
                    .map_err(|_| SessionError::Timeout("connecting to the relay"))??;
            if let Some(namespace) = &namespace {
                session.publish_namespace(namespace.clone()).await?;
            }
            Ok::<_, SessionError>(session)
        }
        .await;
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
                let closed = session.closed().await;
                lock(&current).take();
                announced.store(false, Ordering::Relaxed);
                closed
            }
            Err(err) => err,
        };
        if err.is_refusal() {
            let _ = events.try_send(RelayEvent::Refused(err));
            return;
        }
        let _ = events.try_send(RelayEvent::Disconnected(err));
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
