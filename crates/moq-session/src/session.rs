//! One MoQ Transport session on one QUIC connection: setup, the control loop, request
//! IDs, and dispatch to the publishing and subscribing halves.

use std::sync::Arc;
use std::time::Duration;

use moq_wire::codec::Codec as WireCodec;
use moq_wire::message::{
    self as wire, ClientSetup, ControlMessage, Parameters, ServerSetup, session_error, setup_param,
};
use tokio::sync::{mpsc, oneshot};

use crate::congestion::CongestionControl;
use crate::control::{self, Codec, Established, Inbound};
use crate::error::{RequestError, SessionError};
use crate::estimate::PathEstimate;
use crate::fetch;
use crate::inner::{Inner, REPLY_TIMEOUT, REQUEST_WINDOW, Role, Session, SessionBook};
use crate::publish::{self, Publisher};
use crate::request_ids::{Grants, PeerRequestIds};
use crate::scheduler::PublishLimits;
use crate::send_queue::SendQueue;
use crate::subscribe;
use crate::track::{Broadcast, lock};
use crate::version::{self, Version, Versions};

/// Completed requests granted again in one MAX_REQUEST_ID.
const GRANT_BATCH: u64 = 4;
/// Control messages waiting to be written. A peer that does not read its control stream
/// fills this and is closed, rather than buffered for.
const CONTROL_QUEUE: usize = 256;
/// Control messages read (on any stream) and not yet handled.
const INBOUND_QUEUE: usize = 64;
/// How long the peer has to complete the SETUP exchange.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Namespaces the peer announced that are remembered for the drafts that name them by
/// request ID; older ones are forgotten (a DONE for them is then a protocol error).
const PEER_NAMESPACES: usize = 1024;

/// What the local side offers in a session.
#[derive(Debug, Clone, Default)]
pub struct SessionConfig {
    /// Tracks served to the peer's SUBSCRIBEs; `None` refuses every SUBSCRIBE.
    pub publish: Option<Broadcast>,
    /// Sent in the PATH setup parameter (client only).
    pub path: Option<String>,
    /// Sent in the AUTHORIZATION TOKEN setup parameter, e.g. a JWT for moq-relay (client
    /// only).
    pub auth_token: Option<String>,
    /// Limits of what the peer's subscriptions may cost.
    pub limits: PublishLimits,
    /// The congestion controller of the connection (client side; a server sets it for
    /// all its connections).
    pub congestion: CongestionControl,
    /// A publishing session asks for prompt acknowledgements (see
    /// [`transport_config`](crate::transport_config)).
    pub prompt_acks: bool,
    /// The drafts the client offers (ALPN), preferred first.
    pub versions: Versions,
}

impl Session {
    /// Runs the client side of SETUP on a fresh connection.
    pub async fn client(
        conn: quinn::Connection,
        config: SessionConfig,
    ) -> Result<Session, SessionError> {
        let path = config.path.clone();
        let token = config
            .auth_token
            .as_deref()
            .map(|t| wire::authorization_token(0, t.as_bytes()))
            .transpose()
            .map_err(|e| SessionError::violation(format!("authorization token: {e}")))?;
        let version = negotiated_version(&conn)?;
        let codec = version.codec();
        let peer_ids = peer_request_ids(Role::Client, codec);
        let mut params = setup_params(&peer_ids);
        if let Some(path) = &path {
            params = params.with_bytes(setup_param::PATH, path.as_bytes().to_vec());
        }
        if let Some(token) = token {
            params = params.with_bytes(setup_param::AUTHORIZATION_TOKEN, token);
        }
        let hello = ControlMessage::ClientSetup(ClientSetup {
            versions: vec![codec.version()],
            params,
        });
        let control = conn.clone();
        let setup = async move {
            let established = control::client_setup(&control, &Codec::setup(codec), &hello).await?;
            match &established.peer_setup {
                ControlMessage::ServerSetup(reply) if reply.version == codec.version() => {
                    let max = peer_max_request_id(codec, &reply.params);
                    Ok((established, max))
                }
                ControlMessage::ServerSetup(_) => Err(SessionError::VersionNegotiation {
                    ours: codec.version(),
                }),
                other => Err(SessionError::violation(format!(
                    "expected SERVER_SETUP, got {}",
                    codec.message_name(other)
                ))),
            }
        };
        Self::establish(conn, Role::Client, version, peer_ids, config, setup).await
    }

    /// Runs the server side of SETUP on an accepted connection.
    pub async fn server(
        conn: quinn::Connection,
        config: SessionConfig,
    ) -> Result<Session, SessionError> {
        let version = negotiated_version(&conn)?;
        let codec = version.codec();
        let peer_ids = peer_request_ids(Role::Server, codec);
        let params = setup_params(&peer_ids);
        let control = conn.clone();
        let setup = async move {
            let mut max = 0;
            let established = control::server_setup(&control, &Codec::setup(codec), |hello| {
                let hello = match hello {
                    ControlMessage::ClientSetup(hello) => hello,
                    other => {
                        return Err(SessionError::violation(format!(
                            "expected CLIENT_SETUP, got {}",
                            codec.message_name(other)
                        )));
                    }
                };
                if !hello.versions.contains(&codec.version()) {
                    return Err(SessionError::VersionNegotiation {
                        ours: codec.version(),
                    });
                }
                max = peer_max_request_id(codec, &hello.params);
                Ok(ControlMessage::ServerSetup(ServerSetup {
                    version: codec.version(),
                    params,
                }))
            })
            .await?;
            Ok((established, max))
        };
        Self::establish(conn, Role::Server, version, peer_ids, config, setup).await
    }

    async fn establish(
        conn: quinn::Connection,
        role: Role,
        version: Version,
        peer_ids: PeerRequestIds,
        config: SessionConfig,
        setup: impl Future<Output = Result<(Established, u64), SessionError>>,
    ) -> Result<Session, SessionError> {
        let (established, peer_max) = match tokio::time::timeout(SETUP_TIMEOUT, setup).await {
            Ok(Ok(parts)) => parts,
            Ok(Err(err)) => {
                close_connection(&conn, &err);
                return Err(err);
            }
            Err(_) => {
                let err = SessionError::Timeout("waiting for SETUP");
                close_connection(&conn, &err);
                return Err(err);
            }
        };
        let peer_implementation = match &established.peer_setup {
            ControlMessage::ClientSetup(ClientSetup { params, .. })
            | ControlMessage::ServerSetup(ServerSetup { params, .. }) => params
                .get_bytes(setup_param::MOQT_IMPLEMENTATION)
                .map(|name| String::from_utf8_lossy(name).into_owned()),
            _ => None,
        };
        let Established {
            send, mut reader, ..
        } = established;
        let (control_tx, control_rx) = mpsc::channel(CONTROL_QUEUE);
        let inner = Arc::new(Inner::new(
            conn.clone(),
            (role, version),
            config.publish,
            (peer_max, peer_ids),
            control_tx.clone(),
            peer_implementation,
        ));
        // The scheduler serving the peer's subscriptions, when we publish.
        let publisher = inner
            .publish
            .is_some()
            .then(|| Publisher::start(&inner, config.limits));
        let codec = Codec {
            wire: version.codec(),
            book: Arc::new(SessionBook(Arc::downgrade(&inner))),
        };
        reader.set_codec(codec.clone());
        let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_QUEUE);
        let writer = control::write_control(
            conn.clone(),
            send,
            codec.clone(),
            (control_tx.downgrade(), control_rx),
            inbound_tx.clone(),
        );
        let closer = conn.clone();
        tokio::spawn(async move {
            if let Err(err) = writer.await {
                close_connection(&closer, &err);
            }
        });
        tokio::spawn(control::read_control(reader, inbound_tx.clone()));
        tokio::spawn(control::accept_request_streams(
            conn.clone(),
            codec,
            control_tx,
            inbound_tx,
        ));
        tokio::spawn(run(inner.clone(), inbound_rx, publisher));
        tokio::spawn(subscribe::accept_data_streams(inner.clone()));
        Ok(Session::new(inner))
    }

    /// What the peer's SETUP named as its implementation (MOQT_IMPLEMENTATION), if it did.
    pub fn peer_implementation(&self) -> Option<&str> {
        self.inner.peer_implementation.as_deref()
    }

    /// The peer is a moqsink or moqsrc: as a server, a moqsink publishing only its own
    /// broadcast, so what it says does not exist will not appear later (a relay's may).
    pub fn peer_is_ours(&self) -> bool {
        self.peer_implementation()
            .and_then(|name| name.split('/').next())
            .is_some_and(|name| name == IMPLEMENTATION)
    }

    /// The draft of MoQ Transport the session speaks.
    pub fn version(&self) -> Version {
        self.inner.version
    }

    pub fn role(&self) -> Role {
        self.inner.role
    }

    pub fn remote_address(&self) -> std::net::SocketAddr {
        self.inner.conn.remote_address()
    }

    /// Resolves when the connection is closed, with the reason.
    pub async fn closed(&self) -> SessionError {
        SessionError::Connection(self.inner.conn.closed().await)
    }

    /// What the connection knows of the path now: delivery rate, RTT, queue delay, loss.
    /// `None` when the connection's controller is not one of ours.
    pub fn path_estimate(&self) -> Option<PathEstimate> {
        let estimator = self.inner.estimator.as_ref()?;
        Some(lock(estimator).estimate(std::time::Instant::now()))
    }

    /// How long the objects we publish wait before QUIC takes them: the part of the
    /// queue toward the peer that is still ours (see [`crate::send_queue`]). Zero on a
    /// session that publishes nothing.
    pub fn send_queue(&self) -> SendQueue {
        *lock(&self.inner.send_queue)
    }

    /// quinn's view of the path: RTT, congestion window, packets lost.
    pub fn path_stats(&self) -> quinn::PathStats {
        self.inner.conn.stats().path
    }

    /// Bytes of UDP payload received on the connection so far: whether the path carries
    /// anything at all while no media comes.
    pub fn bytes_received(&self) -> u64 {
        self.inner.conn.stats().udp_rx.bytes
    }

    /// The reason the connection closed, if it has.
    pub fn close_reason(&self) -> Option<SessionError> {
        self.inner.conn.close_reason().map(SessionError::Connection)
    }

    /// Closes the session with NO_ERROR.
    pub fn close(&self, reason: &str) {
        self.inner
            .conn
            .close(quinn::VarInt::from_u32(0), reason.as_bytes());
    }

    /// Marks the session as continuing a broadcast served on another (a move after
    /// GOAWAY): its peer subscribes on behalf of viewers already playing, mid-group, so a
    /// subscription for the largest object starts at the start of the group before the one
    /// under way (which the viewers pick up where they were) instead of asking for a new one.
    pub fn continue_broadcast(&self) {
        lock(&self.inner.state).continues = true;
    }

    /// The session URI the peer's GOAWAY named (empty when it named none), once it sent one:
    /// it will close this session soon, and wants no new requests on it.
    pub fn going_away(&self) -> Option<String> {
        lock(&self.inner.state).goaway.clone()
    }

    /// Waits for the peer's GOAWAY (see [`Session::going_away`]); pending forever if the
    /// session ends without one.
    pub async fn goaway_received(&self) -> String {
        let mut changed = self.inner.changed.subscribe();
        loop {
            if let Some(uri) = self.going_away() {
                return uri;
            }
            if changed.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Sends GOAWAY: the peer should stop making requests and move elsewhere.
    pub fn go_away(&self, new_session_uri: &str) {
        self.inner.send(ControlMessage::Goaway(wire::Goaway {
            new_session_uri: new_session_uri.to_owned(),
        }));
    }

    /// Announces a namespace we publish (PUBLISH_NAMESPACE) and waits for the reply.
    pub async fn publish_namespace(
        &self,
        namespace: wire::TrackNamespace,
    ) -> Result<(), SessionError> {
        let (tx, rx) = oneshot::channel();
        self.inner
            .request(|request_id, state| {
                state.namespace_replies.insert(request_id, tx);
                state.our_namespaces.insert(request_id, namespace.clone());
                ControlMessage::PublishNamespace(wire::PublishNamespace {
                    request_id,
                    namespace,
                    params: Parameters::default(),
                })
            })
            .await?;
        match tokio::time::timeout(REPLY_TIMEOUT, rx).await {
            Ok(Ok(reply)) => reply.map_err(SessionError::from),
            Ok(Err(_)) => Err(SessionError::ControlClosed),
            Err(_) => Err(SessionError::Timeout("waiting for PUBLISH_NAMESPACE_OK")),
        }
    }
}

/// What our SETUP names as its implementation, before a slash and the version.
pub const IMPLEMENTATION: &str = "moqsink-moqsrc";

fn implementation() -> Vec<u8> {
    format!("{IMPLEMENTATION}/{}", env!("CARGO_PKG_VERSION")).into_bytes()
}

/// What the peer may use for its requests: a window of Request IDs granted with
/// MAX_REQUEST_ID where the draft has it.
fn peer_request_ids(role: Role, codec: &dyn WireCodec) -> PeerRequestIds {
    let grants = if codec.grants_request_ids() {
        Grants::Window {
            window: REQUEST_WINDOW,
            batch: GRANT_BATCH,
        }
    } else {
        Grants::Unlimited
    };
    PeerRequestIds::new(
        role.peer().first_request_id(),
        grants,
        !codec.has_request_streams(),
    )
}

/// The setup parameters both sides send: our implementation, and the Request IDs we grant.
fn setup_params(peer_ids: &PeerRequestIds) -> Parameters {
    let params =
        Parameters::default().with_bytes(setup_param::MOQT_IMPLEMENTATION, implementation());
    match peer_ids.initial_grant() {
        Some(grant) => params.with_int(setup_param::MAX_REQUEST_ID, grant),
        None => params,
    }
}

/// The Request IDs the peer's setup grants us: its MAX_REQUEST_ID (0 when absent), or every
/// one on a draft without grants.
fn peer_max_request_id(codec: &dyn WireCodec, params: &Parameters) -> u64 {
    if codec.grants_request_ids() {
        params.get_int(setup_param::MAX_REQUEST_ID).unwrap_or(0)
    } else {
        u64::MAX
    }
}

fn close_connection(conn: &quinn::Connection, err: &SessionError) {
    let code = match err {
        SessionError::Protocol { code, .. } => *code,
        SessionError::VersionNegotiation { .. } => session_error::VERSION_NEGOTIATION_FAILED,
        _ => session_error::INTERNAL_ERROR,
    };
    conn.close(
        quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::from_u32(1)),
        err.to_string().as_bytes(),
    );
}

/// The draft the connection's ALPN chose.
fn negotiated_version(conn: &quinn::Connection) -> Result<Version, SessionError> {
    version::negotiated(conn).ok_or_else(|| SessionError::Protocol {
        code: session_error::VERSION_NEGOTIATION_FAILED,
        reason: "the handshake agreed on no MoQ Transport ALPN".into(),
    })
}

/// The control loop: handles the peer's messages in order until the session ends. It owns
/// the publisher's handle, so the scheduler's task ends with it.
async fn run(
    inner: Arc<Inner>,
    mut inbound: mpsc::Receiver<Result<Inbound, SessionError>>,
    publisher: Option<Publisher>,
) {
    let result = async {
        loop {
            let Inbound { msg, ordered } =
                inbound.recv().await.ok_or(SessionError::ControlClosed)??;
            inner.room_for_replies().await?;
            handle(&inner, publisher.as_ref(), msg, ordered)?;
        }
    }
    .await;
    let err: SessionError = match result {
        Ok(()) => return,
        Err(err) => err,
    };
    match err {
        SessionError::Connection(_) => {}
        SessionError::ControlClosed => {
            inner.close(&SessionError::violation("control stream closed"));
        }
        other => inner.close(&other),
    }
    // Pending requests fail now rather than at their timeout.
    lock(&inner.state).namespace_replies.clear();
    subscribe::session_closed(&inner);
}

fn handle(
    inner: &Arc<Inner>,
    publisher: Option<&Publisher>,
    msg: ControlMessage,
    ordered: bool,
) -> Result<(), SessionError> {
    use ControlMessage as M;
    match msg {
        M::ClientSetup(_) | M::ServerSetup(_) => {
            return Err(SessionError::violation("SETUP after the session started"));
        }
        M::Goaway(g) => {
            let mut state = lock(&inner.state);
            if state.goaway.is_some() {
                return Err(SessionError::violation("a second GOAWAY"));
            }
            state.goaway = Some(g.new_session_uri);
            drop(state);
            inner.notify();
        }
        M::MaxRequestId(m) => {
            let mut state = lock(&inner.state);
            if m.request_id <= state.peer_max_request_id {
                return Err(SessionError::violation("MAX_REQUEST_ID did not increase"));
            }
            state.peer_max_request_id = m.request_id;
            drop(state);
            inner.notify();
        }
        M::RequestsBlocked(_) => {}
        // The peer subscribing to us.
        M::Subscribe(m) => {
            inner.accept_request_id(m.request_id, ordered)?;
            publish::subscribe(inner, publisher, m, ordered);
        }
        M::SubscribeUpdate(m) => {
            inner.accept_request_id(m.request_id, ordered)?;
            // A subscriber that wants a new group (NEW_GROUP_REQUEST) gets a keyframe
            // request upstream, as a new subscriber does.
            if m.params.get_int(wire::param::NEW_GROUP_REQUEST).is_some() {
                publish::new_group_requested(inner, m.subscription_request_id);
            }
            // What the draft answers an update with, if anything.
            inner.send(M::SubscribeUpdateOk(wire::SubscribeUpdateOk {
                request_id: m.request_id,
                subscription_request_id: m.subscription_request_id,
            }));
            inner.request_completed();
        }
        M::Unsubscribe(m) => publish::unsubscribe(inner, publisher, m.request_id),
        M::Fetch(m) => {
            inner.accept_request_id(m.request_id, ordered)?;
            let joined = match &m.fetch_type {
                wire::FetchType::RelativeJoining(j) | wire::FetchType::AbsoluteJoining(j) => {
                    lock(&inner.state)
                        .joinable
                        .get(&j.joining_request_id)
                        .cloned()
                }
                wire::FetchType::Standalone { .. } | wire::FetchType::Filtered { .. } => None,
            };
            fetch::fetch(inner, m, joined);
        }
        M::FetchCancel(m) => {
            // Dropping the sender stops the answer; its task completes the request.
            lock(&inner.state).fetches.remove(&m.request_id);
        }
        M::TrackStatus(m) => {
            inner.accept_request_id(m.request_id, ordered)?;
            inner.send(M::TrackStatusError(wire::TrackStatusError {
                request_id: m.request_id,
                code: wire::subscribe_error::NOT_SUPPORTED,
                reason: "TRACK_STATUS is not supported".into(),
            }));
            inner.request_completed();
        }
        M::SubscribeNamespace(m) | M::SubscribeTracks(m) => {
            inner.accept_request_id(m.request_id, ordered)?;
            inner.send(M::SubscribeNamespaceError(wire::SubscribeNamespaceError {
                request_id: m.request_id,
                code: wire::subscribe_namespace_error::NOT_SUPPORTED,
                reason: "SUBSCRIBE_NAMESPACE is not supported".into(),
            }));
            inner.request_completed();
        }
        M::UnsubscribeNamespace(_) => {}
        // Relays announce what they carry to every session; acknowledging is harmless (we
        // subscribe by name) and stops them re-announcing, which a refusal would not.
        M::PublishNamespace(m) => {
            inner.accept_request_id(m.request_id, ordered)?;
            {
                let mut state = lock(&inner.state);
                state
                    .peer_namespaces
                    .insert(m.request_id, m.namespace.clone());
                if state.peer_namespaces.len() > PEER_NAMESPACES {
                    state.peer_namespaces.pop_first();
                }
            }
            inner.send(M::PublishNamespaceOk(wire::PublishNamespaceOk {
                request_id: m.request_id,
            }));
            inner.request_completed();
        }
        M::PublishNamespaceDone(_) => {}
        M::Publish(m) => {
            inner.accept_request_id(m.request_id, ordered)?;
            inner.send(M::PublishError(wire::PublishError {
                request_id: m.request_id,
                code: wire::publish_error::NOT_SUPPORTED,
                reason: "PUBLISH is not supported; use SUBSCRIBE".into(),
            }));
            inner.request_completed();
        }
        // Replies to our requests.
        M::SubscribeOk(m) => subscribe::subscribe_ok(inner, m)?,
        M::SubscribeError(m) => subscribe::subscribe_error(inner, m),
        M::PublishDone(m) => subscribe::publish_done(inner, m),
        M::PublishNamespaceOk(m) => reply_namespace(inner, m.request_id, Ok(())),
        M::PublishNamespaceError(m) => reply_namespace(
            inner,
            m.request_id,
            Err(RequestError {
                what: "PUBLISH_NAMESPACE",
                code: m.code,
                reason: m.reason,
            }),
        ),
        M::PublishNamespaceCancel(m) => {
            let refused = lock(&inner.state)
                .our_namespaces
                .iter()
                .find(|(_, ns)| **ns == m.namespace)
                .map(|(id, _)| *id);
            if let Some(request_id) = refused {
                reply_namespace(
                    inner,
                    request_id,
                    Err(RequestError {
                        what: "PUBLISH_NAMESPACE",
                        code: m.code,
                        reason: m.reason,
                    }),
                );
            }
        }
        M::Redirect(m) => subscribe::redirect(inner, m),
        M::PublishOk(_)
        | M::PublishError(_)
        | M::FetchOk(_)
        | M::FetchError(_)
        | M::TrackStatusOk(_)
        | M::TrackStatusError(_)
        | M::SubscribeNamespaceOk(_)
        | M::SubscribeNamespaceError(_)
        | M::SubscribeUpdateOk(_) => {
            return Err(SessionError::violation(format!(
                "{} answers a request never made",
                inner.codec.message_name(&msg)
            )));
        }
    }
    Ok(())
}

fn reply_namespace(inner: &Inner, request_id: u64, reply: Result<(), RequestError>) {
    if let Some(tx) = lock(&inner.state).namespace_replies.remove(&request_id) {
        let _ = tx.send(reply);
    }
}
