//! One MoQ Transport session on one QUIC connection: setup, the control loop, request
//! IDs, and dispatch to the publishing and subscribing halves.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use moq_wire::codec::{Codec as WireCodec, Requests};
use moq_wire::message::{
    self as wire, Announcer, ClientSetup, ControlMessage, Location, MaxRequestId, Parameters,
    RequestKind, ServerSetup, session_error, setup_param,
};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::congestion::{CongestionControl, SharedEstimator, estimator_of};
use crate::control::{self, Codec, Established, Inbound, Outbound};
use crate::error::{RequestError, SessionError};
use crate::estimate::PathEstimate;
use crate::fetch;
use crate::publish::{self, Publisher};
use crate::request_ids::{Grants, PeerRequestIds};
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
/// Control messages read (on any stream) and not yet handled.
const INBOUND_QUEUE: usize = 64;
/// How long the peer may leave our replies unread before the session is closed.
const CONTROL_STALL: Duration = Duration::from_secs(10);
/// How long the peer has to complete the SETUP exchange.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request waits for its reply.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Namespaces the peer announced that are remembered for the drafts that name them by
/// request ID; older ones are forgotten (a DONE for them is then a protocol error).
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
    /// The peer sent GOAWAY, with the session URI it named (empty: none).
    goaway: Option<String>,
    // Requests the peer makes.
    peer_ids: PeerRequestIds,
    /// Subscriptions of the peer being served: request ID → track name.
    served: HashMap<u64, Vec<u8>>,
    /// SUBSCRIBEs of a track already served that wait for that subscription to end (see
    /// [`publish::subscribe`]); one the peer cancels meanwhile is taken out.
    pub deferred: HashSet<u64>,
    /// Served subscriptions a joining FETCH may name (filter Largest Object): their track
    /// and the largest location their SUBSCRIBE_OK announced.
    joinable: HashMap<u64, (Arc<TrackShared>, Option<Location>)>,
    /// FETCHes being answered: request ID → what cancels the answer.
    pub fetches: HashMap<u64, oneshot::Sender<()>>,
    /// Namespaces announced by us and by the peer, by request ID (drafts from 16 on name
    /// them by ID only). The peer's are capped.
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
    /// The draft's wire form.
    pub codec: &'static dyn WireCodec,
    pub publish: Option<Broadcast>,
    /// The scheduler serving the peer's subscriptions, when we publish.
    pub publisher: OnceLock<Publisher>,
    pub state: Mutex<State>,
    control: mpsc::Sender<Outbound>,
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
        match self.control.try_send(Outbound::Message(msg)) {
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
                if state.goaway.is_some() {
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

    /// Checks a new request from the peer against the IDs granted so far; `ordered`: it
    /// came on the control stream.
    fn accept_request_id(&self, id: u64, ordered: bool) -> Result<(), SessionError> {
        lock(&self.state).peer_ids.accept(id, ordered)
    }

    /// A request of the peer is complete (refused, answered, or its subscription over):
    /// room for another one, granted with MAX_REQUEST_ID in batches.
    pub fn request_completed(&self) {
        let grant = lock(&self.state).peer_ids.completed();
        if let Some(request_id) = grant {
            self.send(ControlMessage::MaxRequestId(MaxRequestId { request_id }));
        }
    }

    pub fn allocate_alias(&self) -> u64 {
        let mut state = lock(&self.state);
        let alias = state.next_alias;
        state.next_alias += 1;
        alias
    }
}

/// The session's requests as the codec looks them up. Weak: the codec lives in the control
/// tasks, which must not keep the session (and its connection) alive.
struct SessionBook(Weak<Inner>);

impl Requests for SessionBook {
    fn kind_of(&self, request_id: u64) -> Option<RequestKind> {
        self.0.upgrade()?.kind_of(request_id)
    }

    fn namespace_of(&self, request_id: u64) -> Option<wire::TrackNamespace> {
        self.0.upgrade()?.namespace_of(request_id)
    }

    fn request_id_of(&self, namespace: &wire::TrackNamespace, announcer: Announcer) -> Option<u64> {
        self.0.upgrade()?.request_id_of(namespace, announcer)
    }
}

impl Inner {
    fn kind_of(&self, request_id: u64) -> Option<RequestKind> {
        let state = lock(&self.state);
        if state.our_namespaces.contains_key(&request_id) {
            Some(RequestKind::PublishNamespace)
        } else if state.was_requested(request_id) && request_id % 2 == self.role.first_request_id()
        {
            // We make no other kind of request.
            Some(RequestKind::Subscribe)
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

    fn request_id_of(&self, namespace: &wire::TrackNamespace, announcer: Announcer) -> Option<u64> {
        let state = lock(&self.state);
        let mut by_id: Box<dyn Iterator<Item = (&u64, &wire::TrackNamespace)>> = match announcer {
            Announcer::Local => Box::new(state.our_namespaces.iter()),
            Announcer::Peer => Box::new(state.peer_namespaces.iter()),
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
        let Established {
            send, mut reader, ..
        } = established;
        let (control_tx, control_rx) = mpsc::channel(CONTROL_QUEUE);
        let inner = Arc::new(Inner {
            conn: conn.clone(),
            role,
            version,
            codec: version.codec(),
            publish: config.publish,
            publisher: OnceLock::new(),
            state: Mutex::new(State {
                next_request_id: role.first_request_id(),
                peer_max_request_id: peer_max,
                outgoing: HashMap::new(),
                aliases: HashMap::new(),
                namespace_replies: HashMap::new(),
                goaway: None,
                peer_ids,
                served: HashMap::new(),
                deferred: HashSet::new(),
                joinable: HashMap::new(),
                fetches: HashMap::new(),
                our_namespaces: HashMap::new(),
                peer_namespaces: BTreeMap::new(),
                next_alias: 0,
            }),
            control: control_tx.clone(),
            changed: watch::channel(0).0,
            receive_budget: Arc::new(Semaphore::new(subscribe::RECEIVE_BUDGET)),
            estimator: estimator_of(&conn),
        });
        if inner.publish.is_some() {
            let _ = inner.publisher.set(Publisher::start(&inner, config.limits));
        }
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
        tokio::spawn(run(inner.clone(), inbound_rx));
        tokio::spawn(subscribe::accept_data_streams(inner.clone()));
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

fn implementation() -> Vec<u8> {
    format!("moqsink-moqsrc/{}", env!("CARGO_PKG_VERSION")).into_bytes()
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

async fn run(inner: Arc<Inner>, mut inbound: mpsc::Receiver<Result<Inbound, SessionError>>) {
    let result = async {
        loop {
            let Inbound { msg, ordered } =
                inbound.recv().await.ok_or(SessionError::ControlClosed)??;
            inner.room_for_replies().await?;
            handle(&inner, msg, ordered)?;
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

fn handle(inner: &Arc<Inner>, msg: ControlMessage, ordered: bool) -> Result<(), SessionError> {
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
            publish::subscribe(inner, m, ordered);
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
        M::Unsubscribe(m) => publish::unsubscribe(inner, m.request_id),
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
