//! What the receiver reads from: the servers that carry the broadcast, how it subscribes
//! to a track there, and the frames' bytes as they arrive. Shared by the receiver and a
//! move to another session ([`super::moving`]).

use std::time::Duration;

use bytes::Bytes;
use moq_player::select::TrackPrefs;
use moq_session::tls::Trust;
use moq_session::{
    FilterType, MoqUrl, Object, Session, SubscribeOptions, Subscription, TrackNamespace, Versions,
};

/// One server that carries the broadcast.
#[derive(Debug, Clone)]
pub struct Server {
    pub url: MoqUrl,
    /// The PATH setup parameter: the session's root (and the URL's query).
    pub setup_path: String,
    /// Namespace of the tracks (the broadcast).
    pub namespace: TrackNamespace,
    pub trust: Trust,
}

#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// The server tried first.
    pub server: Server,
    /// Servers carrying the same broadcast (e.g. other relays of a cluster), tried in turn
    /// after the one in use fails.
    pub backups: Vec<Server>,
    /// The AUTHORIZATION TOKEN setup parameter.
    pub auth_token: Option<String>,
    /// The drafts offered.
    pub versions: Versions,
    pub prefs: TrackPrefs,
    /// How long to keep trying to get media before giving up with an error.
    pub timeout: Duration,
}

/// A frame's bytes. The object they came in stays counted against the session's receive
/// budget until this is dropped.
#[derive(Debug)]
pub struct Payload {
    pub au: Bytes,
    _object: Object,
}

impl Payload {
    pub fn new(au: Bytes, object: Object) -> Payload {
        Payload {
            au,
            _object: object,
        }
    }
}

/// Subscribes to a media track of the namespace.
pub async fn subscribe(
    config: &ReceiverConfig,
    session: &Session,
    name: &str,
    priority: u8,
) -> Result<Subscription, String> {
    subscribe_from(config, session, name, priority, FilterType::NextGroupStart).await
}

/// Subscribes to a media track of the namespace from where `filter` says.
pub async fn subscribe_from(
    config: &ReceiverConfig,
    session: &Session,
    name: &str,
    priority: u8,
    filter: FilterType,
) -> Result<Subscription, String> {
    let options = SubscribeOptions {
        priority,
        filter,
        ..SubscribeOptions::default()
    };
    session
        .subscribe(config.server.namespace.clone(), name, options)
        .await
        .map_err(|e| {
            format!(
                "{}: track {name:?} in namespace {:?}: {e}",
                config.server.url,
                config.server.namespace.to_path()
            )
        })
}
