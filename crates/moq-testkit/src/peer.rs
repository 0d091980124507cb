//! A MoQ Transport (draft-14) client that speaks the control protocol itself, message by
//! message: it sends what it is told, malformed or not, and reads only when asked, so it
//! can play the peer a publisher must survive (one that never reads its control stream,
//! floods requests, or breaks the framing).
//!
//! In the kit for whatever needs a peer that moqsink's own subscriber would never be: the
//! hostile-peer and FETCH integration tests drive it message by message, and the soak
//! checks' stalled subscriber and churn cycles are built on it.

use moq_session::tls::Trust;
use moq_session::{ControlReader, MoqUrl, Version, connect_quic, transport_config};
use moq_wire::draft14::VERSION;
use moq_wire::message::{
    ClientSetup, ControlMessage, FilterType, GroupOrder, Parameters, ServerSetup, Subscribe,
    TrackNamespace, setup_param,
};

/// Flow-control credit the peer grants, per stream and in all.
const PEER_RECEIVE_WINDOW: u32 = 256 << 10;

/// One QUIC connection with its control stream open and nothing else done.
pub struct RawPeer {
    pub conn: quinn::Connection,
    send: quinn::SendStream,
    recv: ControlReader,
}

impl RawPeer {
    /// Connects to `url` (`moqt://HOST:PORT/PATH`), trusting any certificate, and opens
    /// the control stream. Must run inside a tokio runtime. The peer grants the publisher
    /// little flow-control credit (256 KiB), so one that stops reading blocks it soon.
    pub async fn connect(url: &str) -> Result<RawPeer, String> {
        let url = MoqUrl::parse(url).map_err(|e| e.to_string())?;
        let mut transport = transport_config(true, false);
        transport
            .receive_window(PEER_RECEIVE_WINDOW.into())
            .stream_receive_window(PEER_RECEIVE_WINDOW.into());
        let conn = connect_quic(&url, &Trust::Insecure, transport, Version::Draft14.into())
            .await
            .map_err(|e| e.to_string())?;
        let (send, recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
        Ok(RawPeer {
            conn,
            send,
            recv: ControlReader::new(recv),
        })
    }

    /// Writes raw bytes on the control stream.
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.send.write_all(bytes).await.map_err(|e| e.to_string())
    }

    /// Encodes and writes one control message.
    pub async fn send(&mut self, msg: &ControlMessage) -> Result<(), String> {
        let mut bytes = Vec::new();
        msg.encode(&mut bytes).map_err(|e| e.to_string())?;
        self.send_bytes(&bytes).await
    }

    /// Reads the next control message.
    pub async fn read(&mut self) -> Result<ControlMessage, String> {
        self.recv.read().await.map_err(|e| e.to_string())
    }

    /// Runs SETUP: CLIENT_SETUP with `max_request_id` and PATH `path`, then SERVER_SETUP.
    pub async fn setup(&mut self, path: &str, max_request_id: u64) -> Result<ServerSetup, String> {
        let hello = ControlMessage::ClientSetup(ClientSetup {
            versions: vec![VERSION],
            params: Parameters::default()
                .with_int(setup_param::MAX_REQUEST_ID, max_request_id)
                .with_bytes(setup_param::PATH, path.as_bytes().to_vec()),
        });
        self.send(&hello).await?;
        match self.read().await? {
            ControlMessage::ServerSetup(reply) => Ok(reply),
            other => Err(format!("expected SERVER_SETUP, got {}", other.name())),
        }
    }

    /// Sends SUBSCRIBE for `track` in `namespace` from the next group on.
    pub async fn subscribe(
        &mut self,
        request_id: u64,
        namespace: &TrackNamespace,
        track: &str,
    ) -> Result<(), String> {
        self.send(&ControlMessage::Subscribe(Subscribe {
            request_id,
            namespace: namespace.clone(),
            track_name: track.as_bytes().to_vec(),
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::LargestObject,
            params: Parameters::default(),
            fill: None,
        }))
        .await
    }

    /// Accepts the publisher's next data stream, to hold it unread.
    pub async fn accept_stream(&self) -> Result<quinn::RecvStream, String> {
        self.conn.accept_uni().await.map_err(|e| e.to_string())
    }

    /// Why the connection closed, once it has.
    pub fn close_reason(&self) -> Option<quinn::ConnectionError> {
        self.conn.close_reason()
    }
}
