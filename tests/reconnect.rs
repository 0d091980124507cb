//! moqsrc survives its publisher going away: it reconnects, resubscribes at the live
//! edge and resumes with a DISCONT, without an error on the bus. It connects over a path
//! slower to answer than its attempts are restarted.

mod common;

use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

#[test]
fn a_restarted_publisher_is_resumed_at_the_live_edge() {
    let first = Sender::start("");
    let port = first.port;
    let receiver = Receiver::start(&format!(
        "url={} tls-insecure=true media-timeout=20000",
        first.url()
    ));
    receiver
        .wait_frames(24, WAIT)
        .expect("plays before the restart");
    drop(first);
    let stopped = Instant::now();
    let held = hold_udp_port(port);
    std::thread::sleep(Duration::from_secs(2));
    let before = receiver.frames().len();

    drop(held);
    let second = Sender::start_on(port, "");
    let restarted = Instant::now();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("plays again after the restart");
    let resumed = restarted.elapsed();
    let frames = receiver.frames();
    let first_new = &frames[before];
    eprintln!(
        "down {:?}, resumed {resumed:?} after the publisher returned",
        restarted - stopped
    );
    assert!(
        first_new.key && first_new.discont,
        "resumes at a keyframe, DISCONT"
    );
    assert!(resumed < Duration::from_secs(5), "took {resumed:?}");

    let messages = receiver.messages.lock().unwrap().clone();
    assert!(
        messages.iter().any(|m| m == "moq-disconnected"),
        "{messages:?}"
    );
    assert_eq!(
        messages.iter().filter(|m| *m == "moq-connected").count(),
        2,
        "{messages:?}"
    );
    second.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("EOS after the restart");
}

/// A listening moqsink set to NULL while a viewer plays, and to PLAYING again at once on
/// the same port, listens there: its stop waits until the closed connections have freed
/// the port.
#[test]
fn a_listening_moqsink_started_again_at_once_listens_on_its_port() {
    let sender = Sender::start("");
    let port = sender.port;
    let receiver = Receiver::start(&format!(
        "url={} tls-insecure=true media-timeout=20000",
        sender.url()
    ));
    receiver.wait_frames(24, WAIT).expect("plays");
    let stopping = Instant::now();
    sender.pipeline.set_state(gst::State::Null).unwrap();
    eprintln!("stopped in {:?}", stopping.elapsed());
    sender
        .sink
        .set_property("listen", format!("127.0.0.1:{port}"));
    sender
        .pipeline
        .set_state(gst::State::Playing)
        .expect("listens on its port again");
    assert_eq!(listening_port(&sender.sink), port);
    let before = receiver.frames().len();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("the viewer plays on from the restarted publisher");
}

/// 700 ms from the publisher to the player: the handshake and SETUP take about 1.4 s,
/// longer than a connection attempt runs before the next one starts. The attempts kept
/// going connect (restarted alone, none would ever finish).
#[test]
fn a_player_connects_over_a_path_slower_to_answer_than_the_attempt_interval() {
    let sender = Sender::start("");
    let link = link_to(sender.port, Some(delay_only(700)));
    let started = Instant::now();
    let receiver = Receiver::start(&format!(
        "url=moqt://{}/live tls-fingerprint={} media-timeout=15000",
        link.local_addr(),
        sender.fingerprint()
    ));
    receiver
        .wait_frames(24, WAIT)
        .expect("plays over the slow path");
    eprintln!("24 frames after {:?}", started.elapsed());
    let messages = receiver.messages.lock().unwrap().clone();
    assert_eq!(
        messages.iter().filter(|m| *m == "moq-connected").count(),
        1,
        "one session: {messages:?}"
    );
}
