//! The network side of moving to another session when the server says GOAWAY (a relay
//! about to restart grants a drain window for exactly this): connect elsewhere while the
//! old session still plays, subscribe every track there, hand each over at a keyframe
//! (`moq_player::handover`), then close the old session. Free of GStreamer.

use std::time::Duration;

use moq_media::catalog::{Catalog, TrackEntry};
use moq_media::hang::HangReader;
use moq_player::handover::{Handover, PlayedFrames};
use moq_session::{FilterType, MoqUrl, Session, SessionConfig, Subscription, TrackEvent};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::upstream::{Payload, ReceiverConfig, Server, subscribe, subscribe_from};

/// How long a move target is tried before the next ([`moq_session::connect_within`]).
const CONNECT_WITHIN: Duration = Duration::from_secs(2);
/// How long after connecting a target may still say GOAWAY itself (a relay that is
/// draining sends it at once): then the next target is tried.
const SETTLE: Duration = Duration::from_millis(150);

/// A move a track's forwarder is asked to make: subscribe on `session`, hand over, and say
/// so on `done`.
pub struct Move {
    pub session: Session,
    pub done: oneshot::Sender<()>,
}

/// Where to go after a GOAWAY, in order: the URI it named (if any), the same URL (a load
/// balancer or DNS may now lead elsewhere), then the backups.
pub fn targets(config: &ReceiverConfig, uri: &str) -> Vec<Server> {
    let current = &config.server;
    let mut targets = Vec::new();
    if let Ok(url) = MoqUrl::parse(uri) {
        // The same broadcast under the relay root the URI names; trusted as the backup
        // with that address if there is one, else as the server in use.
        let trust = config
            .backups
            .iter()
            .find(|b| b.url.authority() == url.authority())
            .map_or_else(|| current.trust.clone(), |b| b.trust.clone());
        let setup_path = url.path.trim_matches('/').to_owned();
        targets.push(Server {
            url,
            setup_path,
            namespace: current.namespace.clone(),
            trust,
        });
    }
    targets.push(current.clone());
    targets.extend(
        config
            .backups
            .iter()
            .filter(|b| b.url.authority() != current.url.authority())
            .cloned(),
    );
    targets
}

/// The first target that connects and does not itself say GOAWAY at once.
pub async fn connect_elsewhere(
    config: &ReceiverConfig,
    targets: Vec<Server>,
) -> Result<(Session, Server), String> {
    let mut problems = Vec::new();
    for server in targets {
        let session_config = SessionConfig {
            path: Some(server.setup_path.clone()),
            auth_token: config.auth_token.clone(),
            versions: config.versions,
            ..SessionConfig::default()
        };
        let connecting =
            moq_session::connect_within(&server.url, &server.trust, session_config, CONNECT_WITHIN);
        match connecting.await {
            Ok(session) => {
                tokio::time::sleep(SETTLE).await;
                if session.going_away().is_none() {
                    return Ok((session, server));
                }
                session.close("going away too");
                problems.push(format!("{} is going away too", server.url));
            }
            Err(e) => problems.push(format!("{}: {e}", server.url)),
        }
    }
    Err(problems.join("; "))
}

/// Where a move's subscription starts: the group under way, from its start, which the
/// server has whole in most cases, so the new subscription repeats the frames played last
/// and the track goes on without waiting for the next keyframe (drafts before 20 have no
/// such filter: the next group; moq-relay serves the group under way to them anyway).
fn under_way(session: &Session) -> FilterType {
    match session.version().draft() {
        ..20 => FilterType::NextGroupStart,
        _ => FilterType::GroupsBack(0),
    }
}

/// The subscriptions of a move (the track, and its enhancement layer), as they come up.
type Subscribing = JoinHandle<Result<(Subscription, Option<Subscription>), String>>;

/// A track's move under way: its subscriptions on the new session as they come up, and
/// the handover between the old ones and them.
pub struct Moving {
    pub session: Session,
    done: Option<oneshot::Sender<()>>,
    subscribing: Option<Subscribing>,
    pub next: Option<Subscription>,
    pub next_enhancement: Option<Subscription>,
    /// Reads the new subscription's hang frames; `None` for our own format.
    pub hang: Option<HangReader>,
    pub handover: Handover<Payload>,
}

/// What came of a move's subscriptions.
pub enum Moved {
    Subscribed,
    Failed(String),
    Event(Option<TrackEvent>),
}

impl Moving {
    /// Subscribes `track` (and its enhancement layer) on the move's session with `priority`,
    /// from the group under way; `played`: the track's last frames, which the new
    /// subscription continues.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        config: &ReceiverConfig,
        request: Move,
        track: &str,
        enhancement: Option<(&str, u8)>,
        priority: u8,
        hang: Option<&(Catalog, TrackEntry)>,
        played: PlayedFrames,
    ) -> Moving {
        let (config, session) = (config.clone(), request.session.clone());
        let (track, enhancement) = (
            track.to_owned(),
            enhancement.map(|(name, p)| (name.to_owned(), p)),
        );
        let subscribing = tokio::spawn(async move {
            let main =
                subscribe_from(&config, &session, &track, priority, under_way(&session)).await?;
            let enhancement = match enhancement {
                Some((name, p)) => Some(subscribe(&config, &session, &name, p).await?),
                None => None,
            };
            Ok((main, enhancement))
        });
        Moving {
            session: request.session,
            done: Some(request.done),
            subscribing: Some(subscribing),
            next: None,
            next_enhancement: None,
            hang: hang.map(|(catalog, entry)| HangReader::new(catalog, entry)),
            handover: Handover::new(played),
        }
    }

    /// The next thing the move's subscriptions do.
    pub async fn next(&mut self) -> Moved {
        if let Some(task) = &mut self.subscribing {
            let subscribed = task.await;
            self.subscribing = None;
            return match subscribed {
                Ok(Ok((main, enhancement))) => {
                    self.next = Some(main);
                    self.next_enhancement = enhancement;
                    Moved::Subscribed
                }
                Ok(Err(e)) => Moved::Failed(e),
                Err(e) => Moved::Failed(e.to_string()),
            };
        }
        match &mut self.next {
            Some(next) => Moved::Event(next.next().await),
            None => std::future::pending().await,
        }
    }

    /// The move is done: tells whoever asked.
    pub fn finish(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

impl Drop for Moving {
    fn drop(&mut self) {
        if let Some(task) = &self.subscribing {
            task.abort();
        }
    }
}
