//! Requests made at once from several tasks of one session. The peer requires request IDs
//! in increasing order and closes a session that skips one, so each request must reach
//! the control stream in the order its ID was allocated, however the tasks interleave.
//! And a subscription cancelled and made again at once, which drafts with request streams
//! send on two streams the publisher may read in either order.
//!
//! Loopback only, a port picked by the OS, a timeout on every wait.

use common::{Raw20, Served, WAIT, serve, subscribe_video};
use moq_session::{
    Session, SessionConfig, SubscribeOptions, TrackNamespace, Versions, connect, parse_namespace,
};
use moq_wire::codec::RequestKind;
use moq_wire::message::ControlMessage;

#[allow(dead_code)] // What only other test files use.
mod common;

const TRACKS: usize = 12;
const ROUNDS: usize = 20;

/// [`serve`], and a session to the server on `versions`.
async fn serve_and_connect(
    names: &[&str],
    versions: Versions,
) -> (Session, Served, TrackNamespace) {
    let served = serve(names);
    let config = SessionConfig {
        versions,
        ..SessionConfig::default()
    };
    let session = tokio::time::timeout(WAIT, connect(&served.url, &served.trust, config))
        .await
        .expect("connect in time")
        .expect("connect");
    (session, served, parse_namespace("live").unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_subscribes_from_many_tasks_keep_the_session_open() {
    let names: Vec<String> = (0..TRACKS).map(|i| format!("track-{i}")).collect();
    let tracks: Vec<&str> = names.iter().map(String::as_str).collect();
    let (session, _server, namespace) = serve_and_connect(&tracks, Versions::default()).await;

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
    let names = ["video"];
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

/// A subscriber of a draft with request streams that cancels as moq-relay does, with
/// STOP_SENDING on the publisher's side of the request stream and a FIN on its own, then
/// subscribes to the same track again at once: the cancel ends the subscription, and the
/// new one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_cancelled_with_stop_sending_ends_and_the_track_is_served_again() {
    let served = serve(&["video"]);
    for draft in ["20", "22"] {
        let peer = Raw20::connect(&served.url, &served.trust, draft).await;
        for round in 0..ROUNDS as u64 {
            let request_id = 2 * round;
            let subscribe = subscribe_video(request_id);
            let (mut send, mut recv) = peer.request(&ControlMessage::Subscribe(subscribe)).await;
            let reply = peer
                .answer(&mut recv, request_id, RequestKind::Subscribe)
                .await;
            assert!(
                matches!(reply, ControlMessage::SubscribeOk(_)),
                "draft-{draft}, round {round}: {reply:?}"
            );
            recv.stop(quinn::VarInt::from_u32(1)).unwrap();
            send.finish().unwrap();
        }
        assert!(
            peer.conn.close_reason().is_none(),
            "draft-{draft}: {:?}",
            peer.conn.close_reason()
        );
    }
}
