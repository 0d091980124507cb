//! Address changes: a NAT rebinding (linkem gives the client a new source port mid-stream)
//! is carried by QUIC on the same connection, for a viewer and for a publisher towards a
//! relay: no reconnect, no freeze.

mod common;

use std::time::Duration;

use common::*;
use gst::prelude::*;

/// Ten rebindings, two seconds of playing apart (mobile viewers change address more than
/// once): every one is carried on the same connection.
#[test]
fn a_viewer_whose_address_changes_ten_times_plays_on_over_the_same_connection() {
    const REBINDS: usize = 10;
    let sender = Sender::start("");
    let link = link_to(sender.port, None);
    let receiver = Receiver::start(&format!(
        "url=moqt://{}/live tls-fingerprint={}",
        link.local_addr(),
        sender.fingerprint()
    ));
    receiver.wait_frames(48, WAIT).expect("plays");
    let addresses = || {
        let stats: gst::Structure = sender.sink.property("stats");
        let sessions = stats.get::<gst::Array>("sessions").unwrap();
        sessions
            .as_slice()
            .iter()
            .map(|s| {
                s.get::<gst::Structure>()
                    .unwrap()
                    .get::<String>("address")
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let mut seen = vec![addresses()];
    let started = unix_now();
    for _ in 0..REBINDS {
        link.rebind();
        let count = receiver.frames().len();
        receiver
            .wait_frames(count + 48, WAIT)
            .expect("plays on after the rebinding");
        seen.push(addresses());
    }
    let took = unix_now() - started;
    let messages = receiver.messages.lock().unwrap().clone();
    receiver.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();
    let frames = receiver.frames();
    let pause = longest_pause(&frames, started);
    eprintln!(
        "{REBINDS} rebindings in {took:?}; the publisher saw {seen:?}; longest pause {pause:?}"
    );
    assert!(
        seen.iter().all(|s| s.len() == 1),
        "one session all along: {seen:?}"
    );
    let mut distinct: Vec<&String> = seen.iter().map(|s| &s[0]).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        REBINDS + 1,
        "the session's peer address changed each time: {seen:?}"
    );
    assert_eq!(
        messages.iter().filter(|m| *m == "moq-connected").count(),
        1,
        "no reconnect: {messages:?}"
    );
    for w in frames.windows(2) {
        assert_eq!(w[1].decode_index, w[0].decode_index + 1, "every frame once");
    }
    assert!(pause < Duration::from_millis(250), "a freeze of {pause:?}");
}
