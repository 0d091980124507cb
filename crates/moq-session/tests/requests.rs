//! Requests made at once from several tasks of one session. The peer requires request IDs
//! in increasing order and closes a session that skips one, so each request must reach
//! the control stream in the order its ID was allocated, however the tasks interleave.
//!
//! Loopback only, a port picked by the OS, a timeout on every wait.

use std::time::Duration;

use moq_session::tls::{ServerIdentity, Trust};
use moq_session::{
    Broadcast, MoqUrl, Server, ServerLimits, SessionConfig, SubscribeOptions, TrackDelivery,
    connect, parse_namespace,
};
use tokio::sync::mpsc;

const TRACKS: usize = 12;
const ROUNDS: usize = 20;
const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_subscribes_from_many_tasks_keep_the_session_open() {
    let identity = ServerIdentity::self_signed(&["localhost".to_string()]).unwrap();
    let namespace = parse_namespace("live").unwrap();
    let broadcast = Broadcast::new(namespace.clone());
    let names: Vec<String> = (0..TRACKS).map(|i| format!("track-{i}")).collect();
    let _tracks: Vec<_> = names
        .iter()
        .map(|name| broadcast.create_track(name, TrackDelivery::default()))
        .collect();
    let (events, _events_rx) = mpsc::channel(64);
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        &identity,
        broadcast,
        ServerLimits::default(),
        events,
    )
    .unwrap();
    let url = MoqUrl::parse(&format!("moqt://{}/live", server.local_addr())).unwrap();
    let trust = Trust::Fingerprint(identity.fingerprint());
    let session = tokio::time::timeout(WAIT, connect(&url, &trust, SessionConfig::default()))
        .await
        .expect("connect in time")
        .expect("connect");

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
