//! What the session tests share: a server publishing a broadcast on every draft, and a peer
//! of a draft-20 family session (drafts 20 and 22) scripted message by message on a raw
//! QUIC connection (each side's SETUP on a control stream of its own, each request on a
//! bidirectional stream of its own). Loopback, a port the OS picks, a timeout on every
//! wait.

use std::time::Duration;

use moq_session::tls::{ServerIdentity, Trust};
use moq_session::{
    Broadcast, MoqUrl, Server, ServerEvent, ServerLimits, TrackDelivery, TrackProducer, Versions,
    connect_quic, parse_namespace, transport_config,
};
use moq_wire::DecodeError;
use moq_wire::codec::{Channel, Codec, NoRequests, RequestKind, StreamRequest};
use moq_wire::message::{
    ClientSetup, ControlMessage, FilterType, GroupOrder, Parameters, Subscribe,
};
use tokio::sync::mpsc;

pub const WAIT: Duration = Duration::from_secs(10);

/// A server publishing tracks `names` of broadcast `live`, on every draft.
pub struct Served {
    pub url: MoqUrl,
    pub trust: Trust,
    pub tracks: Vec<TrackProducer>,
    _server: (Server, mpsc::Receiver<ServerEvent>),
}

pub fn serve(names: &[&str]) -> Served {
    let identity = ServerIdentity::self_signed(&["localhost".to_string()]).unwrap();
    let broadcast = Broadcast::new(parse_namespace("live").unwrap());
    let tracks = names
        .iter()
        .map(|name| broadcast.create_track(name, TrackDelivery::default()))
        .collect();
    let (events, events_rx) = mpsc::channel(64);
    // The default accepts every draft.
    let limits = ServerLimits::default();
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        &identity,
        broadcast,
        limits,
        events,
    )
    .unwrap();
    Served {
        url: MoqUrl::parse(&format!("moqt://{}/live", server.local_addr())).unwrap(),
        trust: Trust::Fingerprint(identity.fingerprint()),
        tracks,
        _server: (server, events_rx),
    }
}

/// A connected client whose SETUP the server answered.
pub struct Raw20 {
    pub conn: quinn::Connection,
    pub codec: &'static dyn Codec,
    /// Kept open: the control streams last as long as the session.
    _control: (quinn::SendStream, quinn::RecvStream),
}

impl Raw20 {
    /// Connects on `draft` (20 or 22) and exchanges SETUP.
    pub async fn connect(url: &MoqUrl, trust: &Trust, draft: &str) -> Raw20 {
        let versions: Versions = draft.parse().unwrap();
        let codec = versions.list()[0].codec();
        let conn = connect_quic(url, trust, transport_config(true, false), versions)
            .await
            .expect("connects");
        let mut control = conn.open_uni().await.unwrap();
        let setup = ControlMessage::ClientSetup(ClientSetup {
            versions: vec![codec.version()],
            params: Parameters::new(),
        });
        write(codec, &mut control, &setup).await;
        let mut server_control = tokio::time::timeout(WAIT, conn.accept_uni())
            .await
            .expect("the server's control stream in time")
            .unwrap();
        let from_server = Channel::Control { from_server: true };
        let reply = read(codec, &mut server_control, from_server).await;
        assert!(matches!(reply, ControlMessage::ServerSetup(_)), "{reply:?}");
        Raw20 {
            conn,
            codec,
            _control: (control, server_control),
        }
    }

    /// Opens a stream for `request` and sends it; the answers come on the stream.
    pub async fn request(
        &self,
        request: &ControlMessage,
    ) -> (quinn::SendStream, quinn::RecvStream) {
        let (mut send, recv) = self.conn.open_bi().await.unwrap();
        write(self.codec, &mut send, request).await;
        (send, recv)
    }

    /// The next answer on the stream of our request `request_id` of `kind`.
    pub async fn answer(
        &self,
        recv: &mut quinn::RecvStream,
        request_id: u64,
        kind: RequestKind,
    ) -> ControlMessage {
        let channel = Channel::Request(StreamRequest {
            request_id,
            kind,
            ours: true,
        });
        read(self.codec, recv, channel).await
    }
}

/// Reads one control message from `recv`, read on `channel`.
pub async fn read(
    codec: &dyn Codec,
    recv: &mut quinn::RecvStream,
    channel: Channel,
) -> ControlMessage {
    let mut buf = Vec::new();
    loop {
        match codec.decode_control(&buf, channel, &NoRequests) {
            Ok((msg, _)) => return msg,
            Err(DecodeError::Incomplete) => {}
            Err(err) => panic!("undecodable: {err}"),
        }
        let chunk = tokio::time::timeout(WAIT, recv.read_chunk(1024, true))
            .await
            .expect("a message in time")
            .expect("readable")
            .expect("more bytes");
        buf.extend_from_slice(&chunk.bytes);
    }
}

pub async fn write(codec: &dyn Codec, send: &mut quinn::SendStream, msg: &ControlMessage) {
    let mut bytes = Vec::new();
    codec.encode_control(msg, &NoRequests, &mut bytes).unwrap();
    send.write_all(&bytes).await.unwrap();
}

/// A SUBSCRIBE of track "video" of broadcast `live` from the next object on.
pub fn subscribe_video(request_id: u64) -> Subscribe {
    Subscribe {
        request_id,
        namespace: parse_namespace("live").unwrap(),
        track_name: b"video".to_vec(),
        subscriber_priority: 128,
        group_order: GroupOrder::Publisher,
        forward: true,
        filter: FilterType::LargestObject,
        params: Parameters::new(),
        fill: None,
    }
}
