//! QUIC endpoints: a server that accepts MoQ sessions, and client connections.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use tokio::sync::mpsc;

use crate::congestion::CongestionControl;
use crate::error::SessionError;
use crate::estimate::DEFAULT_MAX_ACK_DELAY;
use crate::inner::Session;
use crate::scheduler::PublishLimits;
use crate::session::SessionConfig;
use crate::tls::{ServerIdentity, Trust};
use crate::track::{Broadcast, lock};
use crate::url::MoqUrl;
use crate::version::Versions;

/// A dead peer is noticed after this long without packets.
const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// Streams a publisher may open at once toward us. Per-frame enhancement streams that are
/// starved pile up, so grant far more than the handful a GoP-per-stream mapping needs.
const MAX_MEDIA_STREAMS: u32 = 10_000;
/// Bytes a publisher may send us ahead of what we read, over all streams: with the
/// session's reassembly budget, this bounds what a subscriber holds when its pipeline
/// stops pulling (QUIC flow control then throttles the publisher).
const MEDIA_RECEIVE_WINDOW: u32 = 8 << 20;
const MEDIA_STREAM_RECEIVE_WINDOW: u32 = 2 << 20;
/// A peer that only subscribes sends us control messages and nothing else.
const CONTROL_RECEIVE_WINDOW: u32 = 1 << 20;
const CONTROL_STREAM_RECEIVE_WINDOW: u32 = 256 << 10;
/// How long a subscriber may hold the acknowledgement of a lone packet, when the sender
/// asks for prompt acknowledgements and the peer supports the ACK_FREQUENCY extension
/// (quinn does). QUIC's default, 25 ms, would count as queueing delay in the path
/// estimate of a live stream whose frames are a packet or two each.
const MEDIA_ACK_DELAY: Duration = Duration::from_millis(2);
/// Bidirectional streams a peer may open at once: from draft-17 on each request is one, so
/// as many requests as older drafts grant with MAX_REQUEST_ID, and a control stream and a
/// draft-16 SUBSCRIBE_NAMESPACE stream beside them.
const BIDI_STREAMS: u32 = crate::inner::REQUEST_WINDOW as u32 + 2;
/// Handshakes a server has under way at once; more wait in the kernel or time out.
const MAX_INCOMING: usize = 256;

/// The QUIC transport settings of a session; `receives_media` when the peer publishes to
/// us. A sender whose path estimate drives something (rate control, the delay-aware
/// controller) sets `prompt_acks`: the estimate needs acknowledgements without QUIC's
/// delay, which otherwise cost nothing but packets on the return path and the sender's
/// burstiness. Tools that speak the protocol themselves start from these (see
/// [`connect_quic`]).
pub fn transport_config(receives_media: bool, prompt_acks: bool) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(IDLE_TIMEOUT).ok();
    t.max_idle_timeout(idle)
        .keep_alive_interval(Some(KEEP_ALIVE))
        .max_concurrent_bidi_streams(BIDI_STREAMS.into());
    if receives_media {
        t.max_concurrent_uni_streams(MAX_MEDIA_STREAMS.into())
            .receive_window(MEDIA_RECEIVE_WINDOW.into())
            .stream_receive_window(MEDIA_STREAM_RECEIVE_WINDOW.into());
    } else {
        t.max_concurrent_uni_streams(16u32.into())
            .receive_window(CONTROL_RECEIVE_WINDOW.into())
            .stream_receive_window(CONTROL_STREAM_RECEIVE_WINDOW.into());
        if prompt_acks {
            let mut acks = quinn::AckFrequencyConfig::default();
            acks.max_ack_delay(Some(MEDIA_ACK_DELAY));
            t.ack_frequency_config(Some(acks));
        }
    }
    t
}

/// The transport settings of a session ([`transport_config`]) with `congestion` driving
/// its connections. The controller's path estimate is told how long the peer holds a
/// lone packet's acknowledgement, which `prompt_acks` decides.
pub fn session_transport(
    receives_media: bool,
    prompt_acks: bool,
    congestion: CongestionControl,
) -> quinn::TransportConfig {
    let mut transport = transport_config(receives_media, prompt_acks);
    let max_ack_delay = if prompt_acks {
        MEDIA_ACK_DELAY
    } else {
        DEFAULT_MAX_ACK_DELAY
    };
    congestion.configure(&mut transport, max_ack_delay);
    transport
}

fn endpoint_error(err: impl std::fmt::Display) -> SessionError {
    SessionError::Endpoint(err.to_string())
}

/// Accepts MoQ sessions and serves a broadcast to each.
#[derive(Debug)]
pub struct Server {
    endpoint: quinn::Endpoint,
    local_addr: SocketAddr,
    sessions: Arc<Mutex<Vec<Session>>>,
}

/// What a server allows its peers, and how it sends to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Sessions served at once (handshakes included); more are refused.
    pub max_sessions: usize,
    /// What each session's subscriptions may cost.
    pub publish: PublishLimits,
    /// The congestion controller of every connection.
    pub congestion: CongestionControl,
    /// Ask subscribers for prompt acknowledgements (see [`transport_config`]).
    pub prompt_acks: bool,
    /// The drafts accepted (ALPN), preferred first.
    pub versions: Versions,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_sessions: 1000,
            publish: PublishLimits::default(),
            congestion: CongestionControl::default(),
            prompt_acks: false,
            versions: Versions::default(),
        }
    }
}

/// What happened to a peer, for the element's log and messages.
#[derive(Debug)]
pub enum ServerEvent {
    Connected(SocketAddr),
    Rejected(SocketAddr, SessionError),
    Disconnected(SocketAddr, SessionError),
}

/// Events kept for a slow reader; more are dropped (they are informative only).
pub const EVENT_QUEUE: usize = 64;

impl Server {
    /// Binds `addr` and serves `broadcast` to every session. Must run inside a tokio
    /// runtime. `events` is never waited on: when it is full, events are dropped.
    pub fn bind(
        addr: SocketAddr,
        identity: &ServerIdentity,
        broadcast: Broadcast,
        limits: ServerLimits,
        events: mpsc::Sender<ServerEvent>,
    ) -> Result<Server, SessionError> {
        let tls = identity.rustls_config(limits.versions.alpns())?;
        let crypto = QuicServerConfig::try_from(tls).map_err(endpoint_error)?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let transport = session_transport(false, limits.prompt_acks, limits.congestion);
        config.transport_config(Arc::new(transport));
        config.max_incoming(MAX_INCOMING);
        let endpoint = quinn::Endpoint::server(config, addr).map_err(endpoint_error)?;
        let local_addr = endpoint.local_addr().map_err(endpoint_error)?;
        let sessions = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(accept_loop(
            endpoint.clone(),
            broadcast,
            limits,
            sessions.clone(),
            events,
        ));
        Ok(Server {
            endpoint,
            local_addr,
            sessions,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn session_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// The sessions being served now.
    pub fn sessions(&self) -> Vec<Session> {
        lock(&self.sessions).clone()
    }

    /// Closes every session and stops accepting.
    pub fn close(&self) {
        for session in lock(&self.sessions).drain(..) {
            session.close("publisher stopped");
        }
        self.endpoint
            .close(quinn::VarInt::from_u32(0), b"publisher stopped");
    }

    /// Closes the server and waits, up to `within`, until its UDP port is free: the socket
    /// stays open while closed connections drain, and a server started again on the port
    /// at once (an element set to NULL and back to PLAYING) would find it taken. Blocks:
    /// not for a thread of the network runtime.
    pub fn close_and_release(self, within: Duration) {
        let address = self.local_addr;
        drop(self);
        let deadline = std::time::Instant::now() + within;
        while std::net::UdpSocket::bind(address).is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.close();
    }
}

/// Counts a session (or handshake) against the limit while alive.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    broadcast: Broadcast,
    limits: ServerLimits,
    sessions: Arc<Mutex<Vec<Session>>>,
    events: mpsc::Sender<ServerEvent>,
) {
    let live = Arc::new(AtomicUsize::new(0));
    while let Some(incoming) = endpoint.accept().await {
        let peer = incoming.remote_address();
        if live.load(Ordering::Relaxed) >= limits.max_sessions {
            incoming.refuse();
            let _ = events.try_send(ServerEvent::Rejected(
                peer,
                SessionError::Refused(format!(
                    "already serving {} sessions (the limit)",
                    limits.max_sessions
                )),
            ));
            continue;
        }
        live.fetch_add(1, Ordering::Relaxed);
        let slot = Slot(live.clone());
        let broadcast = broadcast.clone();
        let sessions = sessions.clone();
        let events = events.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let conn = match incoming.await {
                Ok(conn) => conn,
                Err(err) => {
                    let _ = events.try_send(ServerEvent::Rejected(peer, err.into()));
                    return;
                }
            };
            let config = SessionConfig {
                publish: Some(broadcast),
                path: None,
                auth_token: None,
                limits: limits.publish,
                congestion: limits.congestion,
                prompt_acks: limits.prompt_acks,
                versions: limits.versions,
            };
            let session = match Session::server(conn, config).await {
                Ok(session) => session,
                Err(err) => {
                    let _ = events.try_send(ServerEvent::Rejected(peer, err));
                    return;
                }
            };
            lock(&sessions).push(session.clone());
            let _ = events.try_send(ServerEvent::Connected(peer));
            let reason = session.closed().await;
            lock(&sessions).retain(|s| !Arc::ptr_eq(&s.inner, &session.inner));
            let _ = events.try_send(ServerEvent::Disconnected(peer, reason));
        });
    }
}

/// Connects to a MoQ server and runs SETUP. Must run inside a tokio runtime. The URL's
/// path goes in the PATH setup parameter unless `config` sets one; a session that
/// publishes (`config.publish`) receives no media and grants the peer little buffer.
pub async fn connect(
    url: &MoqUrl,
    trust: &Trust,
    mut config: SessionConfig,
) -> Result<Session, SessionError> {
    let transport = session_transport(
        config.publish.is_none(),
        config.prompt_acks,
        config.congestion,
    );
    let conn = match connect_quic(url, trust, transport, config.versions).await {
        Err(SessionError::Connection(err)) if no_common_alpn(&err) => {
            return Err(no_common_draft(url, trust, config.versions).await);
        }
        conn => conn?,
    };
    config.path.get_or_insert_with(|| url.path.clone());
    Session::client(conn, config).await
}

/// How long a connection attempt runs alone before another one starts beside it: QUIC
/// backs off the retransmissions of its first packet (1 s, 2 s, 4 s...), so a fresh attempt
/// finds a server that is coming back sooner.
const ATTEMPT_INTERVAL: Duration = Duration::from_secs(1);
/// Attempts under way at once; the oldest gives way to a new one.
const ATTEMPTS_IN_FLIGHT: usize = 4;

/// [`connect`], started again every [`ATTEMPT_INTERVAL`] while no attempt has finished,
/// the earlier ones kept going (up to four at once): the first to finish, connected or
/// refused, is the answer; none within `within` is [`SessionError::Timeout`]. Restarting
/// alone finds a returning server soon but never connects over a path whose handshake
/// and SETUP take longer than the restart interval (a round trip of half a second, a
/// peer slow to answer); keeping the attempts going does both.
pub async fn connect_within(
    url: &MoqUrl,
    trust: &Trust,
    config: SessionConfig,
    within: Duration,
) -> Result<Session, SessionError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut attempts = tokio::task::JoinSet::new();
    let mut started = std::collections::VecDeque::<tokio::task::AbortHandle>::new();
    loop {
        if started.len() == ATTEMPTS_IN_FLIGHT
            && let Some(oldest) = started.pop_front()
        {
            oldest.abort();
        }
        let (url, trust, config) = (url.clone(), trust.clone(), config.clone());
        started.push_back(attempts.spawn(async move { connect(&url, &trust, config).await }));
        let next = (tokio::time::Instant::now() + ATTEMPT_INTERVAL).min(deadline);
        loop {
            tokio::select! {
                Some(done) = attempts.join_next() => match done {
                    Ok(result) => return result,
                    // The oldest, given way.
                    Err(e) if e.is_cancelled() => {}
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                },
                () = tokio::time::sleep_until(next) => break,
            }
        }
        if next >= deadline {
            return Err(SessionError::Timeout("connecting"));
        }
    }
}

/// Whether a handshake failed for want of an ALPN both sides speak (TLS alert
/// no_application_protocol, 120).
fn no_common_alpn(err: &quinn::ConnectionError) -> bool {
    const NO_APPLICATION_PROTOCOL: u8 = 120;
    matches!(err, quinn::ConnectionError::ConnectionClosed(close)
        if close.error_code == quinn_proto::TransportErrorCode::crypto(NO_APPLICATION_PROTOCOL))
}

/// How long one probe of the server's drafts may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The error for a server that speaks none of `ours`: which of the other drafts we know it
/// does speak, learnt by offering each alone.
async fn no_common_draft(url: &MoqUrl, trust: &Trust, ours: Versions) -> SessionError {
    let mut theirs = Vec::new();
    for version in ours.others() {
        let probe = connect_quic(url, trust, transport_config(true, false), version.into());
        if let Ok(Ok(conn)) = tokio::time::timeout(PROBE_TIMEOUT, probe).await {
            conn.close(quinn::VarInt::from_u32(0), b"probing drafts");
            theirs.push(version);
        }
    }
    SessionError::NoCommonDraft {
        ours: ours.to_list_string(),
        theirs: crate::version::list_string(&theirs),
    }
}

/// Opens the QUIC connection of a MoQ session (ALPN `moq-00`) without running SETUP: for
/// tools and tests that speak the protocol themselves, with transport settings of their
/// own (e.g. [`transport_config`] with a smaller receive window).
pub async fn connect_quic(
    url: &MoqUrl,
    trust: &Trust,
    transport: quinn::TransportConfig,
    versions: Versions,
) -> Result<quinn::Connection, SessionError> {
    let authority = url.authority();
    // An address literal is parsed in place; only a host name goes to the resolver.
    let resolved = tokio::net::lookup_host(authority.as_str())
        .await
        .ok()
        .and_then(|mut addrs| addrs.next());
    let addr = resolved.ok_or(SessionError::Resolve(authority))?;
    let bind = if addr.is_ipv6() {
        SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
    } else {
        SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
    };
    let mut endpoint = quinn::Endpoint::client(bind).map_err(endpoint_error)?;
    let crypto = QuicClientConfig::try_from(trust.rustls_config(versions.alpns())?)
        .map_err(endpoint_error)?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    client.transport_config(Arc::new(transport));
    endpoint.set_default_client_config(client);
    Ok(endpoint
        .connect(addr, &url.host)
        .map_err(endpoint_error)?
        .await?)
}
