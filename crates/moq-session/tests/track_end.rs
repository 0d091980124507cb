//! A publisher that ends its tracks and then closes the connection: a track whose
//! PUBLISH_DONE arrived has ended, even if the connection closes before the last data
//! streams it announced were read. (A publisher finishing a broadcast closes as soon as
//! its subscriptions are done; the subscriber must see the end, not a lost connection.)
//!
//! The publisher is scripted message by message on a raw QUIC connection. Loopback only,
//! a port picked by the OS, a timeout on every wait.

use std::sync::Arc;
use std::time::Duration;

use moq_session::tls::{ServerIdentity, Trust};
use moq_session::{
    ControlReader, MoqUrl, SessionConfig, SubscribeOptions, TrackEvent, Version, connect,
    parse_namespace,
};
use moq_wire::message::{
    ControlMessage, GroupOrder, Parameters, PublishDone, ServerSetup, SubscribeOk,
    publish_done_code, setup_param,
};
use quinn::crypto::rustls::QuicServerConfig;

const WAIT: Duration = Duration::from_secs(10);

fn endpoint(identity: &ServerIdentity) -> quinn::Endpoint {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .unwrap();
    tls.alpn_protocols = vec![Version::Draft14.alpn().to_vec()];
    let crypto = QuicServerConfig::try_from(tls).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap()
}

async fn send(stream: &mut quinn::SendStream, msg: ControlMessage) {
    let mut bytes = Vec::new();
    msg.encode(&mut bytes).unwrap();
    stream.write_all(&bytes).await.unwrap();
}

/// Answers SETUP and one SUBSCRIBE, ends the track announcing `streams` data streams
/// it never opens, and closes the connection.
async fn publish_and_leave(endpoint: quinn::Endpoint, streams: u64) {
    let conn = endpoint.accept().await.unwrap().await.unwrap();
    let (mut send_stream, recv) = conn.accept_bi().await.unwrap();
    let mut control = ControlReader::new(recv);
    assert!(matches!(
        control.read().await.unwrap(),
        ControlMessage::ClientSetup(_)
    ));
    let params = Parameters::default().with_int(setup_param::MAX_REQUEST_ID, 100);
    let setup = ServerSetup {
        version: moq_wire::draft14::VERSION,
        params,
    };
    send(&mut send_stream, ControlMessage::ServerSetup(setup)).await;
    let request_id = loop {
        if let ControlMessage::Subscribe(s) = control.read().await.unwrap() {
            break s.request_id;
        }
    };
    let ok = SubscribeOk {
        request_id,
        track_alias: 1,
        expires_ms: 0,
        group_order: GroupOrder::Ascending,
        largest: None,
        params: Parameters::default(),
    };
    send(&mut send_stream, ControlMessage::SubscribeOk(ok)).await;
    let done = ControlMessage::PublishDone(PublishDone {
        request_id,
        status: publish_done_code::TRACK_ENDED,
        stream_count: streams,
        reason: "end of broadcast".into(),
    });
    send(&mut send_stream, done).await;
    // Give the message time to arrive, then leave at once, as a finished publisher does.
    tokio::time::sleep(Duration::from_millis(200)).await;
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
}

#[tokio::test]
async fn a_track_that_ended_before_the_connection_closed_ends_not_breaks() {
    let identity = ServerIdentity::self_signed(&["localhost".to_string()]).unwrap();
    let server = endpoint(&identity);
    let url = MoqUrl::parse(&format!("moqt://{}/live", server.local_addr().unwrap())).unwrap();
    let publisher = tokio::spawn(publish_and_leave(server, 3));
    let trust = Trust::Fingerprint(identity.fingerprint());
    let session = tokio::time::timeout(WAIT, connect(&url, &trust, SessionConfig::default()))
        .await
        .expect("connects in time")
        .expect("connects");
    let mut subscription = session
        .subscribe(
            parse_namespace("live").unwrap(),
            "video",
            SubscribeOptions::default(),
        )
        .await
        .expect("subscribed");
    let event = tokio::time::timeout(WAIT, subscription.next())
        .await
        .expect("an event in time");
    match event {
        Some(TrackEvent::Ended { status, .. }) => {
            assert_eq!(status, publish_done_code::TRACK_ENDED)
        }
        other => panic!("expected the track's end, got {other:?}"),
    }
    tokio::time::timeout(WAIT, publisher)
        .await
        .expect("publisher done in time")
        .unwrap();
}
