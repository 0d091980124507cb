//! What a session's tasks and handles share: the connection, the control queue and the
//! tables of requests made and served. Below [`session`](crate::session), which sets it
//! up, and the halves that work on it ([`publish`](crate::publish),
//! [`subscribe`](crate::subscribe), [`fetch`](crate::fetch)).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use moq_wire::codec::{Codec as WireCodec, Requests};
use moq_wire::message::{
    self as wire, Announcer, ControlMessage, Location, MaxRequestId, RequestKind, session_error,
};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::congestion::{SharedEstimator, estimator_of};
use crate::control::Outbound;
use crate::error::{RequestError, SessionError};
use crate::received::{RECEIVE_BUDGET, TrackEvent};
use crate::request_ids::PeerRequestIds;
use crate::send_queue::SendQueue;
use crate::track::{Broadcast, TrackShared, lock};
use crate::version::Version;

/// Requests the peer may have open at once (e.g. subscriptions being served): MAX_REQUEST_ID
/// grows only as earlier requests complete, so a peer cannot pile up state.
pub(crate) const REQUEST_WINDOW: u64 = 32;
/// Room kept free for the replies to one incoming message.
const REPLY_HEADROOM: usize = 8;
/// How long the peer may leave our replies unread before the session is closed.
const CONTROL_STALL: Duration = Duration::from_secs(10);
/// How long a request waits for its reply.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Who opened the connection: request IDs are even for the client, odd for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    pub(crate) fn first_request_id(self) -> u64 {
        match self {
            Role::Client => 0,
            Role::Server => 1,
        }
    }

    pub(crate) fn peer(self) -> Role {
        match self {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        }
    }
}

#[derive(Debug)]
pub(crate) struct State {
    // Requests we make.
    next_request_id: u64,
    pub peer_max_request_id: u64,
    pub outgoing: HashMap<u64, Outgoing>,
    /// Track alias → our request ID.
    pub aliases: HashMap<u64, u64>,
    pub namespace_replies: HashMap<u64, oneshot::Sender<Result<(), RequestError>>>,
    /// The peer sent GOAWAY, with the session URI it named (empty: none).
    pub goaway: Option<String>,
    /// The session continues a broadcast served on another one (see
    /// `Session::continue_broadcast`).
    pub continues: bool,
    // Requests the peer makes.
    peer_ids: PeerRequestIds,
    /// Subscriptions of the peer being served: request ID → track name.
    served: HashMap<u64, Vec<u8>>,
    /// SUBSCRIBEs of a track already served that wait for that subscription to end (see
    /// `publish::subscribe`); one the peer cancels meanwhile is taken out.
    pub deferred: HashSet<u64>,
    /// Served subscriptions a joining FETCH may name (filter Largest Object): their track
    /// and their first object (none: the track had no content).
    pub joinable: HashMap<u64, (Arc<TrackShared>, Option<Location>)>,
    /// FETCHes being answered: request ID → what cancels the answer.
    pub fetches: HashMap<u64, oneshot::Sender<()>>,
    /// Namespaces announced by us and by the peer, by request ID (drafts from 16 on name
    /// them by ID only). The peer's are capped.
    pub our_namespaces: HashMap<u64, wire::TrackNamespace>,
    pub peer_namespaces: BTreeMap<u64, wire::TrackNamespace>,
    next_alias: u64,
}

impl State {
    fn new(role: Role, peer_max_request_id: u64, peer_ids: PeerRequestIds) -> State {
        State {
            next_request_id: role.first_request_id(),
            peer_max_request_id,
            outgoing: HashMap::new(),
            aliases: HashMap::new(),
            namespace_replies: HashMap::new(),
            goaway: None,
            continues: false,
            peer_ids,
            served: HashMap::new(),
            deferred: HashSet::new(),
            joinable: HashMap::new(),
            fetches: HashMap::new(),
            our_namespaces: HashMap::new(),
            peer_namespaces: BTreeMap::new(),
            next_alias: 0,
        }
    }

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
    pub state: Mutex<State>,
    control: mpsc::Sender<Outbound>,
    /// Bumped whenever a track alias is registered or MAX_REQUEST_ID grows.
    pub changed: watch::Sender<u64>,
    /// Bytes of received objects held between QUIC and their consumer (see `subscribe`).
    pub receive_budget: Arc<Semaphore>,
    /// The connection's path estimator, fed by its congestion controller.
    pub estimator: Option<SharedEstimator>,
    /// How long our objects wait before QUIC takes them, as the publishing side last saw.
    pub send_queue: Mutex<SendQueue>,
    /// What the peer's SETUP named as its implementation.
    pub peer_implementation: Option<String>,
}

/// Our subscription, as the session sees it.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub events: mpsc::Sender<TrackEvent>,
    /// Groups below this are no longer wanted: their streams get STOP_SENDING.
    pub stop_before: watch::Sender<u64>,
    pub reply: Option<oneshot::Sender<Result<wire::SubscribeOk, SessionError>>>,
    pub streams_open: u64,
    pub streams_done: u64,
    pub done: Option<(u64, u64, String)>,
}

impl Inner {
    /// The state of a session just set up: `peer_max_request_id` from the peer's SETUP,
    /// control messages queued on `control`.
    pub fn new(
        conn: quinn::Connection,
        (role, version): (Role, Version),
        publish: Option<Broadcast>,
        (peer_max_request_id, peer_ids): (u64, PeerRequestIds),
        control: mpsc::Sender<Outbound>,
        peer_implementation: Option<String>,
    ) -> Inner {
        Inner {
            estimator: estimator_of(&conn),
            send_queue: Mutex::new(SendQueue::default()),
            conn,
            role,
            version,
            codec: version.codec(),
            publish,
            state: Mutex::new(State::new(role, peer_max_request_id, peer_ids)),
            control,
            changed: watch::channel(0).0,
            receive_budget: Arc::new(Semaphore::new(RECEIVE_BUDGET)),
            peer_implementation,
        }
    }

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
    pub async fn room_for_replies(&self) -> Result<(), SessionError> {
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
    pub fn accept_request_id(&self, id: u64, ordered: bool) -> Result<(), SessionError> {
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
pub(crate) struct SessionBook(pub Weak<Inner>);

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

impl Session {
    pub(crate) fn new(inner: Arc<Inner>) -> Session {
        Session {
            _closer: Arc::new(CloseOnDrop(inner.conn.clone())),
            inner,
        }
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close(quinn::VarInt::from_u32(0), b"session dropped");
    }
}
