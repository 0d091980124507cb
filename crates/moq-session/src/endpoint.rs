//! QUIC endpoints: a server that accepts MoQ sessions, and client connections.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moq_wire::draft14::ALPN;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use tokio::sync::mpsc;

use crate::error::SessionError;
use crate::session::{Session, SessionConfig};
use crate::tls::{ServerIdentity, Trust};
use crate::track::{Broadcast, lock};
use crate::url::MoqUrl;

/// A dead peer is noticed after this long without packets.
const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// Streams the peer may open at once. Per-frame enhancement streams that are starved
/// pile up, so grant far more than the handful a GoP-per-stream mapping needs.
const MAX_UNI_STREAMS: u32 = 10_000;

fn transport() -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.max_idle_timeout(Some(IDLE_TIMEOUT.try_into().expect("valid idle timeout")))
        .keep_alive_interval(Some(KEEP_ALIVE))
        .max_concurrent_uni_streams(MAX_UNI_STREAMS.into())
        .max_concurrent_bidi_streams(4u32.into());
    Arc::new(t)
}

fn endpoint_error(err: impl std::fmt::Display) -> SessionError {
    SessionError::Endpoint(err.to_string())
}

/// Accepts MoQ sessions and serves a broadcast to each.
#[derive(Debug)]
pub struct Server {
    endpoint: quinn::Endpoint,
    sessions: Arc<Mutex<Vec<Session>>>,
}

/// What happened to a peer, for the element's log and messages.
#[derive(Debug)]
pub enum ServerEvent {
    Connected(SocketAddr),
    Rejected(SocketAddr, SessionError),
    Disconnected(SocketAddr, SessionError),
}

impl Server {
    /// Binds `addr` and serves `broadcast` to every session. Must run inside a tokio runtime.
    pub fn bind(
        addr: SocketAddr,
        identity: &ServerIdentity,
        broadcast: Broadcast,
        events: mpsc::UnboundedSender<ServerEvent>,
    ) -> Result<Server, SessionError> {
        let tls = identity.rustls_config(ALPN)?;
        let crypto = QuicServerConfig::try_from(tls).map_err(endpoint_error)?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(transport());
        let endpoint = quinn::Endpoint::server(config, addr).map_err(endpoint_error)?;
        let sessions = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(accept_loop(
            endpoint.clone(),
            broadcast,
            sessions.clone(),
            events,
        ));
        Ok(Server { endpoint, sessions })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint
            .local_addr()
            .expect("a bound endpoint has an address")
    }

    pub fn session_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// Closes every session and stops accepting.
    pub fn close(&self) {
        for session in lock(&self.sessions).drain(..) {
            session.close("publisher stopped");
        }
        self.endpoint
            .close(quinn::VarInt::from_u32(0), b"publisher stopped");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.close();
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    broadcast: Broadcast,
    sessions: Arc<Mutex<Vec<Session>>>,
    events: mpsc::UnboundedSender<ServerEvent>,
) {
    while let Some(incoming) = endpoint.accept().await {
        let broadcast = broadcast.clone();
        let sessions = sessions.clone();
        let events = events.clone();
        tokio::spawn(async move {
            let peer = incoming.remote_address();
            let conn = match incoming.await {
                Ok(conn) => conn,
                Err(err) => {
                    let _ = events.send(ServerEvent::Rejected(peer, err.into()));
                    return;
                }
            };
            let config = SessionConfig {
                publish: Some(broadcast),
                path: None,
            };
            let session = match Session::server(conn, config).await {
                Ok(session) => session,
                Err(err) => {
                    let _ = events.send(ServerEvent::Rejected(peer, err));
                    return;
                }
            };
            lock(&sessions).push(session.clone());
            let _ = events.send(ServerEvent::Connected(peer));
            let reason = session.closed().await;
            lock(&sessions).retain(|s| !Arc::ptr_eq(&s.inner, &session.inner));
            let _ = events.send(ServerEvent::Disconnected(peer, reason));
        });
    }
}

/// Connects to a MoQ server and runs SETUP. Must run inside a tokio runtime.
pub async fn connect(
    url: &MoqUrl,
    trust: &Trust,
    publish: Option<Broadcast>,
) -> Result<Session, SessionError> {
    let authority = url.authority();
    let addr = tokio::task::spawn_blocking({
        let authority = authority.clone();
        move || authority.to_socket_addrs().map(|mut a| a.next())
    })
    .await
    .map_err(endpoint_error)?
    .map_err(|_| SessionError::Resolve(authority.clone()))?
    .ok_or(SessionError::Resolve(authority))?;
    let bind: SocketAddr = if addr.is_ipv6() {
        "[::]:0".parse().expect("valid address")
    } else {
        "0.0.0.0:0".parse().expect("valid address")
    };
    let mut endpoint = quinn::Endpoint::client(bind).map_err(endpoint_error)?;
    let crypto = QuicClientConfig::try_from(trust.rustls_config(ALPN)?).map_err(endpoint_error)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport());
    endpoint.set_default_client_config(config);
    let conn = endpoint
        .connect(addr, &url.host)
        .map_err(endpoint_error)?
        .await?;
    Session::client(
        conn,
        SessionConfig {
            publish,
            path: Some(url.path.clone()),
        },
    )
    .await
}
