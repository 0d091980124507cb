//! One MoQ Transport session on one QUIC connection: setup, the control loop, request
//! IDs, and dispatch to the publishing and subscribing halves.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use moq_wire::draft16;
use moq_wire::message::{
    self as wire, ClientSetup, ControlMessage, Location, MaxRequestId, Parameters, ServerSetup,
    session_error, setup_param,
};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::congestion::{CongestionControl, SharedEstimator, estimator_of};
use crate::control::{self, Codec, ControlReader, RequestBook};
use crate::error::{RequestError, SessionError};
use crate::estimate::PathEstimate;
use crate::fetch;
use crate::publish::{self, Publisher};
use crate::scheduler::PublishLimits;
use crate::subscribe::{self, Outgoing};
use crate::track::{Broadcast, TrackShared, lock};
use crate::version::{self, Version, Versions};

/// Requests the peer may have open at once (e.g. subscriptions being served): MAX_REQUEST_ID
/// grows only as earlier requests complete, so a peer cannot pile up state.
pub(crate) const REQUEST_WINDOW: u64 = 32;
/// Completed requests granted again in one MAX_REQUEST_ID.
const GRANT_BATCH: u64 = 4;
/// Control messages waiting to be written. A peer that does not read its control stream
/// fills this and is closed, rather than buffered for.
const CONTROL_QUEUE: usize = 256;
/// Room kept free for the replies to one incoming message.
const REPLY_HEADROOM: usize = 8;
/// How long the peer may leave our replies unread before the session is closed.
const CONTROL_STALL: Duration = Duration::from_secs(10);
/// How long the peer has to complete the SETUP exchange.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request waits for its reply.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Namespaces the peer announced that are remembered for draft-16's PUBLISH_NAMESPACE_DONE;
/// older ones are forgotten (a DONE for them is then a protocol error).
const PEER_NAMESPACES: usize = 1024;

/// Who opened the connection: request IDs are even for the client, odd for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    fn first_request_id(self) -> u64 {
        match self {
            Role::Client => 0,
            Role::Server => 1,
        }
    }

    fn peer(self) -> Role {
        match self {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        }
    }
}

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

#[derive(Debug)]
pub(crate) struct State {
    // Requests we make.
    next_request_id: u64,
    peer_max_request_id: u64,
    pub outgoing: HashMap<u64, Outgoing>,
    /// Track alias → our request ID.
    pub aliases: HashMap<u64, u64>,
    namespace_replies: HashMap<u64, oneshot::Sender<Result<(), RequestError>>>,
    goaway: bool,
    // Requests the peer makes.
    next_peer_request_id: u64,
    /// Request IDs below this are allowed (the last MAX_REQUEST_ID we sent, or SETUP's).
    granted_request_id: u64,
    /// Requests of the peer completed, each freeing room for one more.
    completed_requests: u64,
    /// Subscriptions of the peer being served: request ID → track name.
    served: HashMap<u64, Vec<u8>>,
    /// Served subscriptions a joining FETCH may name (filter Largest Object): their track
    /// and the largest location their SUBSCRIBE_OK announced.
    joinable: HashMap<u64, (Arc<TrackShared>, Option<Location>)>,
    /// FETCHes being answered: request ID → what cancels the answer.
    pub fetches: HashMap<u64, oneshot::Sender<()>>,
    /// Namespaces announced by us and by the peer, by request ID (draft-16 names them by
    /// ID only in PUBLISH_NAMESPACE_DONE / _CANCEL). The peer's are capped.
    our_namespaces: HashMap<u64, wire::TrackNamespace>,
    peer_namespaces: BTreeMap<u64, wire::TrackNamespace>,
    next_alias: u64,
}

impl State {
    /// Whether the peer subscribes to `track_name` in this session already.
    pub fn serves(&self, track_name: &[u8]) -> bool {
        self.served.values().any(|t| t == track_name)
    }

    /// Starts serving subscription `request_id`; `joinable` when a joining FETCH may name it.
    pub fn start_serving(
        &mut self,
        request_id: u64,
        track_name: Vec<u8>,
        joinable: Option<(Arc<TrackShared>, Option<Location>)>,
    ) {
        self.served.insert(request_id, track_name);
        if let Some(joinable) = joinable {
            self.joinable.insert(request_id, joinable);
        }
    }

    /// The track subscription `request_id` is served.
    pub fn served_track(&self, request_id: u64) -> Option<Vec<u8>> {
        self.served.get(&request_id).cloned()
    }

    /// Stops serving subscription `request_id`; whether it was served.
    pub fn stop_serving(&mut self, request_id: u64) -> bool {
        self.joinable.remove(&request_id);
        self.served.remove(&request_id).is_some()
    }

    /// Whether we ever issued this request ID (replies to forgotten requests are harmless).
    pub fn was_requested(&self, id: u64) -> bool {
        id < self.next_request_id
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub conn: quinn::Connection,
    pub role: Role,
    pub version: Version,
    pub publish: Option<Broadcast>,
    /// The scheduler serving the peer's subscriptions, when we publish.
    pub publisher: OnceLock<Publisher>,
    pub state: Mutex<State>,
    control: mpsc::Sender<ControlMessage>,
    /// Bumped whenever a track alias is registered or MAX_REQUEST_ID grows.
    pub changed: watch::Sender<u64>,
    /// Bytes of received objects held between QUIC and their consumer (see `subscribe`).
    pub receive_budget: Arc<Semaphore>,
    /// The connection's path estimator, fed by its congestion controller.
    pub estimator: Option<SharedEstimator>,
}

impl Inner {
    /// Queues a control message. Never waits: a peer that lets the queue fill up is not
    /// reading its control stream, and the session is closed.
    pub fn send(&self, msg: ControlMessage) {
        match self.control.try_send(msg) {
            Ok(()) => {}
            // The writer only stops when the connection is gone; nothing left to tell then.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(_)) => self.close(&SessionError::Protocol {
                code: session_error::CONTROL_MESSAGE_TIMEOUT,
                reason: "the peer does not read its control stream".into(),
            }),
        }
    }

    pub fn close(&self, err: &SessionError) {
        let (code, reason) = match err {
            SessionError::Protocol { code, reason } => (*code, reason.as_str()),
            SessionError::VersionNegotiation { .. } => (
                session_error::VERSION_NEGOTIATION_FAILED,
                "no common version",
            ),
            _ => (session_error::INTERNAL_ERROR, "internal error"),
        };
        let code = quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::from_u32(1));
        self.conn.close(code, reason.as_bytes());
    }

    pub fn notify(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// Makes a request: allocates its ID (waiting for MAX_REQUEST_ID if the peer's limit
    /// is reached), lets `make` record it and build the message, and queues the message,
    /// all under one lock. The peer requires IDs in order, so requests made at once from
    /// several tasks must be queued in the order their IDs were allocated.
    pub async fn request(
        &self,
        make: impl FnOnce(u64, &mut State) -> ControlMessage,
    ) -> Result<u64, SessionError> {
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + REPLY_TIMEOUT;
        let mut blocked_sent = false;
        loop {
            {
                let mut state = lock(&self.state);
                if state.goaway {
                    return Err(SessionError::GoingAway);
                }
                if state.next_request_id < state.peer_max_request_id {
                    let id = state.next_request_id;
                    state.next_request_id += 2;
                    let msg = make(id, &mut state);
                    self.send(msg);
                    return Ok(id);
                }
                if !blocked_sent {
                    blocked_sent = true;
                    self.send(ControlMessage::RequestsBlocked(wire::RequestsBlocked {
                        max_request_id: state.peer_max_request_id,
                    }));
                }
            }
            if tokio::time::timeout_at(deadline, changed.changed())
                .await
                .is_err()
            {
                return Err(SessionError::Timeout("waiting for MAX_REQUEST_ID"));
            }
        }
    }

    /// Waits until the control queue has room for the replies to one message, so a burst
    /// of requests is answered as fast as the peer reads them (meanwhile its further
    /// messages wait in QUIC, under flow control); a peer that reads nothing for
    /// [`CONTROL_STALL`] is closed.
    async fn room_for_replies(&self) -> Result<(), SessionError> {
        match tokio::time::timeout(CONTROL_STALL, self.control.reserve_many(REPLY_HEADROOM)).await {
            Ok(Ok(_room)) => Ok(()),
            Ok(Err(_)) => Err(SessionError::ControlClosed),
            Err(_) => Err(SessionError::Protocol {
                code: session_error::CONTROL_MESSAGE_TIMEOUT,
                reason: "the peer does not read its control stream".into(),
            }),
        }
    }

    /// Checks a new request from the peer against the IDs granted so far.
    fn accept_request_id(&self, id: u64) -> Result<(), SessionError> {
        let mut state = lock(&self.state);
        // Draft-16 requests also travel on streams of their own (SUBSCRIBE_NAMESPACE), which
        // we refuse unread: an ID may skip theirs. Draft-14 requests all come in order.
        let skipped = id
            .checked_sub(state.next_peer_request_id)
            .filter(|gap| gap % 2 == 0 && self.version == Version::Draft16)
            .map(|gap| gap / 2);
        let Some(skipped) = skipped.or((id == state.next_peer_request_id).then_some(0)) else {
            return Err(SessionError::Protocol {
                code: session_error::INVALID_REQUEST_ID,
                reason: format!("request ID {id}, expected {}", state.next_peer_request_id),
            });
        };
        if id >= state.granted_request_id {
            return Err(SessionError::Protocol {
                code: session_error::TOO_MANY_REQUESTS,
                reason: format!(
                    "request ID {id} beyond the granted {}",
                    state.granted_request_id
                ),
            });
        }
        state.next_peer_request_id = id + 2;
        drop(state);
        // The requests on refused streams are over.
        for _ in 0..skipped {
            self.request_completed();
        }
        Ok(())
    }

    /// A request of the peer is complete (refused, answered, or its subscription over):
    /// room for another one, granted with MAX_REQUEST_ID in batches.
    pub fn request_completed(&self) {
        let mut state = lock(&self.state);
        state.completed_requests += 1;
        let granted = 2 * (REQUEST_WINDOW + state.completed_requests);
        if granted >= state.granted_request_id + 2 * GRANT_BATCH {
            state.granted_request_id = granted;
            drop(state);
            self.send(ControlMessage::MaxRequestId(MaxRequestId {
                request_id: granted,
            }));
        }
    }

    pub fn allocate_alias(&self) -> u64 {
        let mut state = lock(&self.state);
        let alias = state.next_alias;
        state.next_alias += 1;
        alias
    }
}

/// The session's requests as the control codec looks them up. Weak: the codec lives in
/// the control tasks, which must not keep the session (and its connection) alive.
struct SessionBook(Weak<Inner>);

impl RequestBook for SessionBook {
    fn kind_of(&self, request_id: u64) -> Option<draft16::RequestKind> {
        self.0.upgrade()?.kind_of(request_id)
    }

    fn namespace_of(&self, request_id: u64) -> Option<wire::TrackNamespace> {
        self.0.upgrade()?.namespace_of(request_id)
    }

    fn request_id_of(
        &self,
        namespace: &wire::TrackNamespace,
        announcer: draft16::Announcer,
    ) -> Option<u64> {
        self.0.upgrade()?.request_id_of(namespace, announcer)
    }
}

impl Inner {
    fn kind_of(&self, request_id: u64) -> Option<draft16::RequestKind> {
        let state = lock(&self.state);
        if state.our_namespaces.contains_key(&request_id) {
            Some(draft16::RequestKind::PublishNamespace)
        } else if state.was_requested(request_id) && request_id % 2 == self.role.first_request_id()
        {
            // We make no other kind of request.
            Some(draft16::RequestKind::Subscribe)
        } else {
            None
        }
    }

    fn namespace_of(&self, request_id: u64) -> Option<wire::TrackNamespace> {
        let state = lock(&self.state);
        state
            .our_namespaces
            .get(&request_id)
            .or_else(|| state.peer_namespaces.get(&request_id))
            .cloned()
    }

    fn request_id_of(
        &self,
        namespace: &wire::TrackNamespace,
        announcer: draft16::Announcer,
    ) -> Option<u64> {
        let state = lock(&self.state);
        let mut by_id: Box<dyn Iterator<Item = (&u64, &wire::TrackNamespace)>> = match announcer {
            draft16::Announcer::Local => Box::new(state.our_namespaces.iter()),
            draft16::Announcer::Peer => Box::new(state.peer_namespaces.iter()),
        };
        by_id.find(|(_, ns)| *ns == namespace).map(|(id, _)| *id)
    }
}

/// A MoQ Transport session. Cheap to clone; when the last clone (or subscription) is
/// dropped the connection is closed, so an abandoned session does not live on through its
/// background tasks and keep-alives.
#[derive(Debug, Clone)]
pub struct Session {
    pub(crate) inner: Arc<Inner>,
    _closer: Arc<CloseOnDrop>,
}

#[derive(Debug)]
struct CloseOnDrop(quinn::Connection);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close(quinn::VarInt::from_u32(0), b"session dropped");
    }
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
        let codec = Codec::setup(version);
        let control = conn.clone();
        let setup = async move {
            let (mut send, recv) = control.open_bi().await?;
            let mut params = Parameters::default()
                .with_int(setup_param::MAX_REQUEST_ID, 2 * REQUEST_WINDOW)
                .with_bytes(setup_param::MOQT_IMPLEMENTATION, implementation());
            if let Some(path) = &path {
                params = params.with_bytes(setup_param::PATH, path.as_bytes().to_vec());
            }
            if let Some(token) = token {
                params = params.with_bytes(setup_param::AUTHORIZATION_TOKEN, token);
            }
            let hello = ControlMessage::ClientSetup(ClientSetup {
                versions: vec![version.code()],
                params,
            });
            control::write(&mut send, &codec, &hello).await?;
            let mut reader = ControlReader::with_codec(recv, codec);
            match reader.read().await? {
                ControlMessage::ServerSetup(reply) if reply.version == version.code() => {
                    let max = reply
                        .params
                        .get_int(setup_param::MAX_REQUEST_ID)
                        .unwrap_or(0);
                    Ok((send, reader, max))
                }
                ControlMessage::ServerSetup(_) => Err(SessionError::VersionNegotiation {
                    ours: version.code(),
                }),
                other => Err(SessionError::violation(format!(
                    "expected SERVER_SETUP, got {}",
                    other.name()
                ))),
            }
        };
        Self::establish(conn, Role::Client, version, config, setup).await
    }

    /// Runs the server side of SETUP on an accepted connection.
    pub async fn server(
        conn: quinn::Connection,
        config: SessionConfig,
    ) -> Result<Session, SessionError> {
        let version = negotiated_version(&conn)?;
        let codec = Codec::setup(version);
        let control = conn.clone();
        let setup = async move {
            let (mut send, recv) = control.accept_bi().await?;
            let mut reader = ControlReader::with_codec(recv, codec.clone());
            let hello = match reader.read().await? {
                ControlMessage::ClientSetup(hello) => hello,
                other => {
                    return Err(SessionError::violation(format!(
                        "expected CLIENT_SETUP, got {}",
                        other.name()
                    )));
                }
            };
            if !hello.versions.contains(&version.code()) {
                return Err(SessionError::VersionNegotiation {
                    ours: version.code(),
                });
            }
            let reply = ControlMessage::ServerSetup(ServerSetup {
                version: version.code(),
                params: Parameters::default()
                    .with_int(setup_param::MAX_REQUEST_ID, 2 * REQUEST_WINDOW)
                    .with_bytes(setup_param::MOQT_IMPLEMENTATION, implementation()),
            });
            control::write(&mut send, &codec, &reply).await?;
            let max = hello
                .params
                .get_int(setup_param::MAX_REQUEST_ID)
                .unwrap_or(0);
            Ok((send, reader, max))
        };
        Self::establish(conn, Role::Server, version, config, setup).await
    }

    async fn establish(
        conn: quinn::Connection,
        role: Role,
        version: Version,
        config: SessionConfig,
        setup: impl Future<Output = Result<(quinn::SendStream, ControlReader, u64), SessionError>>,
    ) -> Result<Session, SessionError> {
        let (send, mut reader, peer_max) = match tokio::time::timeout(SETUP_TIMEOUT, setup).await {
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
        let (control_tx, control_rx) = mpsc::channel(CONTROL_QUEUE);
        let inner = Arc::new(Inner {
            conn: conn.clone(),
            role,
            version,
            publish: config.publish,
            publisher: OnceLock::new(),
            state: Mutex::new(State {
                next_request_id: role.first_request_id(),
                peer_max_request_id: peer_max,
                outgoing: HashMap::new(),
                aliases: HashMap::new(),
                namespace_replies: HashMap::new(),
                goaway: false,
                next_peer_request_id: role.peer().first_request_id(),
                granted_request_id: 2 * REQUEST_WINDOW,
                completed_requests: 0,
                served: HashMap::new(),
                joinable: HashMap::new(),
                fetches: HashMap::new(),
                our_namespaces: HashMap::new(),
                peer_namespaces: BTreeMap::new(),
                next_alias: 0,
            }),
            control: control_tx,
            changed: watch::channel(0).0,
            receive_budget: Arc::new(Semaphore::new(subscribe::RECEIVE_BUDGET)),
            estimator: estimator_of(&conn),
        });
        if inner.publish.is_some() {
            let _ = inner.publisher.set(Publisher::start(&inner, config.limits));
        }
        let codec = Codec::with_book(version, Arc::new(SessionBook(Arc::downgrade(&inner))));
        reader.set_codec(codec.clone());
        tokio::spawn(write_control(conn.clone(), send, codec, control_rx));
        tokio::spawn(run(inner.clone(), reader));
        tokio::spawn(subscribe::accept_data_streams(inner.clone()));
        tokio::spawn(refuse_extra_bidi_streams(inner.clone()));
        Ok(Session {
            _closer: Arc::new(CloseOnDrop(inner.conn.clone())),
            inner,
        })
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

    /// quinn's view of the path: RTT, congestion window, packets lost.
    pub fn path_stats(&self) -> quinn::PathStats {
        self.inner.conn.stats().path
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

fn implementation() -> Vec<u8> {
    format!("moqsink-moqsrc/{}", env!("CARGO_PKG_VERSION")).into_bytes()
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

async fn write_control(
    conn: quinn::Connection,
    mut send: quinn::SendStream,
    codec: Codec,
    mut rx: mpsc::Receiver<ControlMessage>,
) {
    // Control messages go before any object data.
    let _ = send.set_priority(i32::MAX);
    while let Some(msg) = rx.recv().await {
        if let Err(err) = control::write(&mut send, &codec, &msg).await {
            close_connection(&conn, &err);
            return;
        }
    }
}

/// Draft-14 allows one bidirectional stream per session: the control stream. Draft-16
/// opens one per SUBSCRIBE_NAMESPACE (moq-relay sends one to every session that may
/// publish); we subscribe and publish by name only, so each is refused by resetting it,
/// which its sender takes as "not supported".
async fn refuse_extra_bidi_streams(inner: Arc<Inner>) {
    while let Ok((mut send, mut recv)) = inner.conn.accept_bi().await {
        if inner.version == Version::Draft14 {
            inner.close(&SessionError::violation("a second bidirectional stream"));
            return;
        }
        let not_supported = quinn::VarInt::from_u32(draft16::reset_code::INTERNAL_ERROR as u32);
        let _ = send.reset(not_supported);
        let _ = recv.stop(not_supported);
    }
}

/// The draft the connection's ALPN chose.
fn negotiated_version(conn: &quinn::Connection) -> Result<Version, SessionError> {
    version::negotiated(conn).ok_or_else(|| SessionError::Protocol {
        code: session_error::VERSION_NEGOTIATION_FAILED,
        reason: "the handshake agreed on no MoQ Transport ALPN".into(),
    })
}

async fn run(inner: Arc<Inner>, mut reader: ControlReader) {
    let result = async {
        loop {
            let msg = reader.read().await?;
            inner.room_for_replies().await?;
            handle(&inner, msg)?;
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

fn handle(inner: &Arc<Inner>, msg: ControlMessage) -> Result<(), SessionError> {
    use ControlMessage as M;
    match msg {
        M::ClientSetup(_) | M::ServerSetup(_) => {
            return Err(SessionError::violation("SETUP after the session started"));
        }
        M::Goaway(_) => {
            let mut state = lock(&inner.state);
            if state.goaway {
                return Err(SessionError::violation("a second GOAWAY"));
            }
            state.goaway = true;
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
            inner.accept_request_id(m.request_id)?;
            publish::subscribe(inner, m);
        }
        M::SubscribeUpdate(m) => {
            inner.accept_request_id(m.request_id)?;
            // A subscriber that wants a new group (draft-16 NEW_GROUP_REQUEST) gets a
            // keyframe request upstream, as a new subscriber does.
            if m.params
                .get_int(draft16::param::NEW_GROUP_REQUEST)
                .is_some()
            {
                publish::new_group_requested(inner, m.subscription_request_id);
            }
            // Draft-16 answers every REQUEST_UPDATE with REQUEST_OK (any *_OK of the
            // model with only a request ID encodes as one); draft-14 has no reply.
            if inner.version == Version::Draft16 {
                inner.send(M::PublishNamespaceOk(wire::PublishNamespaceOk {
                    request_id: m.request_id,
                }));
            }
            inner.request_completed();
        }
        M::Unsubscribe(m) => publish::unsubscribe(inner, m.request_id),
        M::Fetch(m) => {
            inner.accept_request_id(m.request_id)?;
            let joined = match &m.fetch_type {
                wire::FetchType::RelativeJoining(j) | wire::FetchType::AbsoluteJoining(j) => {
                    lock(&inner.state)
                        .joinable
                        .get(&j.joining_request_id)
                        .cloned()
                }
                wire::FetchType::Standalone { .. } => None,
            };
            fetch::fetch(inner, m, joined);
        }
        M::FetchCancel(m) => {
            // Dropping the sender stops the answer; its task completes the request.
            lock(&inner.state).fetches.remove(&m.request_id);
        }
        M::TrackStatus(m) => {
            inner.accept_request_id(m.request_id)?;
            inner.send(M::TrackStatusError(wire::TrackStatusError {
                request_id: m.request_id,
                code: wire::subscribe_error::NOT_SUPPORTED,
                reason: "TRACK_STATUS is not supported".into(),
            }));
            inner.request_completed();
        }
        M::SubscribeNamespace(m) => {
            inner.accept_request_id(m.request_id)?;
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
            inner.accept_request_id(m.request_id)?;
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
            inner.accept_request_id(m.request_id)?;
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
        M::PublishNamespaceCancel(_) => {}
        M::PublishOk(_)
        | M::PublishError(_)
        | M::FetchOk(_)
        | M::FetchError(_)
        | M::TrackStatusOk(_)
        | M::TrackStatusError(_)
        | M::SubscribeNamespaceOk(_)
        | M::SubscribeNamespaceError(_) => {
            return Err(SessionError::violation(format!(
                "{} answers a request never made",
                msg.name()
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
