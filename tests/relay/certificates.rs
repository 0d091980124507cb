//! moq-relay's certificate replaced on disk while it serves (a rotation): it takes the new
//! one for new handshakes and keeps the sessions it has.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::{NAMESPACE, Relay, count_messages};
use gst::prelude::*;

/// The relay's files get a new certificate mid-stream. The publisher and the viewer,
/// connected under the old one, play on: no reconnect, no freeze, every frame once. A new
/// viewer needs the new certificate's fingerprint: the old one is refused.
#[test]
fn a_relay_certificate_rotated_mid_stream_keeps_its_sessions() {
    let relay = Relay::start();
    let sender = relay.publisher("");
    let reconnects = count_messages(&sender.pipeline, "moq-disconnected");
    wait_announced(&sender.sink);
    let viewer = relay.subscriber("media-timeout=30000");
    viewer.wait_frames(48, WAIT).expect("plays");

    let rotated =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let fingerprint =
        moq_session::tls::fingerprint_hex(&moq_session::tls::fingerprint(rotated.cert.der()));
    let rotated_at = unix_now();
    std::fs::write(relay.dir.join("key.pem"), rotated.key_pair.serialize_pem()).unwrap();
    std::fs::write(relay.dir.join("cert.pem"), rotated.cert.pem()).unwrap();

    // A new viewer pinned to the new certificate plays once the relay took it.
    let url = format!("url={} namespace={NAMESPACE}", relay.url());
    let deadline = Instant::now() + WAIT;
    let (newcomer, took) = loop {
        let newcomer = Receiver::start(&crate::ours(format!(
            "{url} tls-fingerprint={fingerprint} media-timeout=1000"
        )));
        if newcomer.wait_frames(1, Duration::from_secs(3)).is_ok() {
            break (newcomer, unix_now() - rotated_at);
        }
        newcomer.pipeline.set_state(gst::State::Null).unwrap();
        assert!(
            Instant::now() < deadline,
            "the relay never served the new certificate"
        );
    };
    let stale = Receiver::start(&crate::ours(format!(
        "{url} tls-fingerprint={} media-timeout=3000",
        relay.fingerprint
    )));
    let refused = wait_eos(&stale.pipeline, WAIT).expect_err("the old certificate is gone");
    let before = viewer.frames().len();
    viewer
        .wait_frames(before + 48, WAIT)
        .expect("the first viewer plays on");
    let messages = viewer.messages_where(|_| true);
    for pipeline in [&viewer.pipeline, &newcomer.pipeline, &stale.pipeline] {
        pipeline.set_state(gst::State::Null).unwrap();
    }
    sender.pipeline.set_state(gst::State::Null).unwrap();
    let frames = viewer.frames();
    let longest = longest_pause(&frames, rotated_at);
    eprintln!(
        "new certificate served {took:?} after the files changed; {} frames, longest pause \
         since {longest:?}; messages {messages:?}; a viewer pinned to the old one: {refused}",
        frames.len()
    );
    assert_eq!(
        *reconnects.lock().unwrap(),
        0,
        "the publisher kept its session"
    );
    assert_played_through(&frames, &messages, rotated_at, Duration::from_millis(250));
    assert!(
        refused.contains("tls-fingerprint"),
        "the old fingerprint is refused as a certificate mismatch: {refused}"
    );
}
