//! Requests made at once from several tasks of one session. The peer requires request IDs
//! in increasing order and closes a session that skips one, so each request must reach
//! the control stream in the order its ID was allocated, however the tasks interleave.
//! And a subscription cancelled and made again at once, which drafts with request streams
//! send on two streams the publisher may read in either order.
//!
//! Loopback only, a port picked by the OS, a timeout on every wait.

use std::time::Duration;

use moq_session::tls::{ServerIdentity, Trust};
use moq_session::{
    Broadcast, FilterType, GroupOrder, MoqUrl, Server, ServerLimits, Session, SessionConfig,
    SubscribeOptions, TrackDelivery, TrackNamespace, Versions, connect, connect_quic,
    parse_namespace, transport_config,
};
use moq_wire::DecodeError;
use moq_wire::codec::{Channel, Codec, NoRequests, RequestKind, StreamRequest};
use moq_wire::draft20;
use moq_wire::message::{ClientSetup, ControlMessage, Parameters, Subscribe};
use tokio::sync::mpsc;

const TRACKS: usize = 12;
const ROUNDS: usize = 20;
const WAIT: Duration = Duration::from_secs(10);

/// A server publishing `names` under `live` on every draft: its URL, how to trust it, and
/// a guard it lives as long as.
fn serve(names: &[String]) -> (MoqUrl, Trust, impl Sized + use<>) {
    let identity = ServerIdentity::self_signed(&["localhost".to_string()]).unwrap();
    let broadcast = Broadcast::new(parse_namespace("live").unwrap());
    let tracks: Vec<_> = names
        .iter()
        .map(|name| broadcast.create_track(name, TrackDelivery::default()))
        .collect();
    let (events, events_rx) = mpsc::channel(64);
    let limits = ServerLimits {
        versions: "22,20,16,14".parse().unwrap(),
        ..ServerLimits::default()
    };
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        &identity,
        broadcast,
        limits,
        events,
    )
    .unwrap();
    let url = MoqUrl::parse(&format!("moqt://{}/live", server.local_addr())).unwrap();
    let trust = Trust::Fingerprint(identity.fingerprint());
    (url, trust, (server, tracks, events_rx))
}

/// [`serve`], and a session to the server on `versions`.
async fn serve_and_connect(
    names: &[String],
    versions: Versions,
) -> (Session, impl Sized, TrackNamespace) {
    let (url, trust, server) = serve(names);
    let config = SessionConfig {
        versions,
        ..SessionConfig::default()
    };
    let session = tokio::time::timeout(WAIT, connect(&url, &trust, config))
        .await
        .expect("connect in time")
        .expect("connect");
    (session, server, parse_namespace("live").unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_subscribes_from_many_tasks_keep_the_session_open() {
    let names: Vec<String> = (0..TRACKS).map(|i| format!("track-{i}")).collect();
    let (session, _server, namespace) = serve_and_connect(&names, Versions::default()).await;

    for round in 0..ROUNDS {
        let tasks: Vec<_> = names
            .iter()
            .map(|name| {
                let (session, namespace, name) = (session.clone(), namespace.clone(), name.clone());
                tokio::spawn(async move {
                    session
                        .subscribe(namespace, &name, SubscribeOptions::default())
                        .await
                })
            })
            .collect();
        let mut subscriptions = Vec::new();
        for task in tasks {
            let result = tokio::time::timeout(WAIT, task)
                .await
                .expect("subscribe in time")
                .expect("subscribe task");
            match result {
                Ok(subscription) => subscriptions.push(subscription),
                Err(err) => panic!(
                    "round {round}: a subscribe failed: {err} (session: {:?})",
                    session.close_reason()
                ),
            }
        }
        assert_eq!(subscriptions.len(), TRACKS);
        // Unsubscribing ends the requests, so the peer grants further IDs.
        drop(subscriptions);
    }
    assert!(
        session.close_reason().is_none(),
        "the session closed: {:?}",
        session.close_reason()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_track_unsubscribed_and_subscribed_again_at_once_is_served_on_every_draft() {
    let names = vec!["video".to_string()];
    for draft in ["14", "16", "20", "22"] {
        let (session, _server, namespace) = serve_and_connect(&names, draft.parse().unwrap()).await;
        for round in 0..ROUNDS {
            let subscription = tokio::time::timeout(
                WAIT,
                session.subscribe(namespace.clone(), "video", SubscribeOptions::default()),
            )
            .await
            .expect("subscribe in time")
            .unwrap_or_else(|err| panic!("draft-{draft}, round {round}: {err}"));
            drop(subscription);
        }
        assert!(
            session.close_reason().is_none(),
            "draft-{draft}: the session closed: {:?}",
            session.close_reason()
        );
    }
}

/// Reads one control message from `recv`, read on `channel`, with the draft-20 codec.
async fn read_draft20(recv: &mut quinn::RecvStream, channel: Channel) -> ControlMessage {
    let mut buf = Vec::new();
    loop {
        match draft20::CODEC.decode_control(&buf, channel, &NoRequests) {
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

async fn write_draft20(send: &mut quinn::SendStream, msg: &ControlMessage) {
    let mut bytes = Vec::new();
    draft20::CODEC
        .encode_control(msg, &NoRequests, &mut bytes)
        .unwrap();
    send.write_all(&bytes).await.unwrap();
}

/// A draft-20 subscriber that cancels as moq-relay does, with STOP_SENDING on the
/// publisher's side of the request stream and a FIN on its own, then subscribes to the
/// same track again at once: the cancel ends the subscription, and the new one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_cancelled_with_stop_sending_ends_and_the_track_is_served_again() {
    let (url, trust, _server) = serve(&["video".to_string()]);
    let conn = connect_quic(
        &url,
        &trust,
        transport_config(true, false),
        "20".parse().unwrap(),
    )
    .await
    .expect("connects");
    let mut control = conn.open_uni().await.unwrap();
    let setup = ControlMessage::ClientSetup(ClientSetup {
        versions: vec![draft20::VERSION],
        params: Parameters::new(),
    });
    write_draft20(&mut control, &setup).await;
    let mut server_control = tokio::time::timeout(WAIT, conn.accept_uni())
        .await
        .expect("the server's control stream in time")
        .unwrap();
    let from_server = Channel::Control { from_server: true };
    assert!(matches!(
        read_draft20(&mut server_control, from_server).await,
        ControlMessage::ServerSetup(_)
    ));
    for round in 0..ROUNDS as u64 {
        let request_id = 2 * round;
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let subscribe = Subscribe {
            request_id,
            namespace: parse_namespace("live").unwrap(),
            track_name: b"video".to_vec(),
            subscriber_priority: 128,
            group_order: GroupOrder::Publisher,
            forward: true,
            filter: FilterType::LargestObject,
            params: Parameters::new(),
            fill: None,
        };
        write_draft20(&mut send, &ControlMessage::Subscribe(subscribe)).await;
        let answer = Channel::Request(StreamRequest {
            request_id,
            kind: RequestKind::Subscribe,
            ours: true,
        });
        let reply = read_draft20(&mut recv, answer).await;
        assert!(
            matches!(reply, ControlMessage::SubscribeOk(_)),
            "round {round}: {reply:?}"
        );
        recv.stop(quinn::VarInt::from_u32(1)).unwrap();
        send.finish().unwrap();
    }
    assert!(conn.close_reason().is_none(), "{:?}", conn.close_reason());
}
