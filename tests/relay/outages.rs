//! Relay and publisher restarts: the subscriber resumes without an error.

use std::time::{Duration, Instant};

use crate::Relay;
use crate::common::*;
use gst::prelude::*;

/// Kills the relay for `down`, restarts it on the same port and certificate, and checks
/// that the publisher re-announces and the subscriber resumes without an error.
fn survive_relay_restart(down: Duration) {
    let mut relay = Relay::start();
    let sender = relay.publisher("");
    let receiver = relay.subscriber("media-timeout=90000");
    receiver
        .wait_frames(24, WAIT)
        .expect("plays before the restart");
    relay.kill();
    std::thread::sleep(down);
    let before = receiver.frames().len();
    relay.spawn();
    let back = Instant::now();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("plays after the restart");
    // wait_frames returned as soon as the count was reached; the first new frame came
    // about a second of frames earlier.
    let resumed = back.elapsed().saturating_sub(Duration::from_millis(1000));
    eprintln!("relay down {down:?}: receiver resumed ~{resumed:?} after the relay came back");
    let frames = receiver.frames();
    assert!(
        frames[before].key && frames[before].discont,
        "resumes at a keyframe, DISCONT"
    );
    assert!(
        back.elapsed() < Duration::from_secs(5),
        "resumed {:?} after the relay returned",
        back.elapsed()
    );
    for (what, pipeline) in [
        ("receiver", &receiver.pipeline),
        ("sender", &sender.pipeline),
    ] {
        let bus = pipeline.bus().unwrap();
        while let Some(msg) = bus.pop() {
            if let gst::MessageView::Error(e) = msg.view() {
                panic!("{what} posted an error: {} ({:?})", e.error(), e.debug());
            }
        }
    }
    let messages = receiver.messages.lock().unwrap().clone();
    assert!(
        messages.iter().filter(|m| *m == "moq-connected").count() >= 2,
        "{messages:?}"
    );
}

/// Replaces the relay's publisher with a new one `down` after the first left, and waits
/// for a second of its frames at the viewer, which resumes at a keyframe with neither an
/// error nor EOS. The messages the viewer posted.
fn restart_publisher(down: Duration) -> Vec<String> {
    let relay = Relay::start();
    let first = relay.publisher("");
    let receiver = relay.subscriber("media-timeout=30000");
    receiver.wait_frames(24, WAIT).expect("plays");
    drop(first);
    std::thread::sleep(down);
    let before = receiver.frames().len();
    let _second = relay.publisher("");
    let back = Instant::now();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("plays the new publisher");
    let messages = receiver.messages.lock().unwrap().clone();
    eprintln!(
        "publisher back {down:?} after it left: playing again {:?} after it came back; \
         messages {messages:?}",
        back.elapsed()
    );
    let frames = receiver.frames();
    assert!(
        frames[before].key && frames[before].discont,
        "the new publisher plays from a keyframe, DISCONT"
    );
    let bus = receiver.pipeline.bus().unwrap();
    while let Some(msg) = bus.pop() {
        assert!(
            !matches!(
                msg.view(),
                gst::MessageView::Error(_) | gst::MessageView::Eos(_)
            ),
            "{msg:?}"
        );
    }
    messages
}

#[test]
fn a_publisher_restart_behind_the_relay_is_resumed() {
    restart_publisher(Duration::from_secs(2));
}

/// A publisher that comes back at once (a restart, or a move between a cluster's nodes)
/// ends the viewer's subscriptions at the relay; the session to the relay is fine, and the
/// viewer subscribes again on it instead of reconnecting.
#[test]
fn a_publisher_back_at_once_is_subscribed_again_on_the_same_session() {
    let messages = restart_publisher(Duration::ZERO);
    let count = |name: &str| messages.iter().filter(|m| *m == name).count();
    assert_eq!(count("moq-connected"), 1, "{messages:?}");
    assert_eq!(count("moq-disconnected"), 0, "{messages:?}");
    assert!(count("moq-resubscribed") >= 1, "{messages:?}");
}

#[test]
fn survives_a_5_second_relay_outage() {
    survive_relay_restart(Duration::from_secs(5));
}

#[test]
fn survives_a_30_second_relay_outage() {
    survive_relay_restart(Duration::from_secs(30));
}

/// The node a publisher came through dies without a word (SIGKILL): the root keeps the
/// viewer's subscription on the dead route until it notices, while another publisher of
/// the broadcast is on the root itself. The viewer takes the route's silence for what it
/// is and subscribes again on the same session, where a new subscription takes the route
/// that works: it plays on without reconnecting, well before the root notices.
#[test]
fn a_viewer_whose_relay_route_falls_silent_subscribes_again_on_its_session() {
    let root = Relay::start();
    let mut leaf = Relay::start_in_cluster(&root);
    let first = leaf.publisher("");
    wait_announced(&first.sink);
    let viewer = root.subscriber("media-timeout=30000");
    viewer
        .wait_frames(48, WAIT)
        .expect("plays through the node");
    let _second = root.publisher("");
    // The second publisher's announcement reaches the root while the viewer plays on.
    std::thread::sleep(Duration::from_secs(1));
    let before = viewer.frames().len();
    let killed = unix_now();
    leaf.kill();
    viewer
        .wait_frames(before + 48, WAIT)
        .expect("plays the publisher on the root");
    let messages = viewer.messages.lock().unwrap().clone();
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    let longest = longest_pause(&viewer.frames(), killed);
    eprintln!("longest pause after the node died {longest:?}; messages {messages:?}");
    let count = |name: &str| messages.iter().filter(|m| *m == name).count();
    assert_eq!(count("moq-connected"), 1, "no reconnect: {messages:?}");
    assert_eq!(count("moq-disconnected"), 0, "{messages:?}");
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("moq-resubscribed")
                && m.contains("no media on the relay's route")),
        "subscribed again because the route fell silent: {messages:?}"
    );
    assert!(longest < Duration::from_secs(2), "a freeze of {longest:?}");
}

/// The same death with no other publisher on the root: asked again there, the route stays
/// silent (or the catalog does not come), so a viewer with a backup moves to it within a
/// moment of finding the route quiet, instead of waiting out the 2 s failover silence.
#[test]
fn a_viewer_whose_route_stays_silent_when_asked_again_fails_over_to_its_backup_at_once() {
    let root = Relay::start();
    let mut leaf = Relay::start_in_cluster(&root);
    let backup = Relay::start();
    let first = leaf.publisher("");
    let second = backup.publisher("");
    wait_announced(&first.sink);
    wait_announced(&second.sink);
    // The root learns of the broadcast from the node a moment after the node has it: a
    // viewer asking before then would find nothing there and go to its backup at once.
    root.subscriber("media-timeout=30000")
        .wait_frames(1, WAIT)
        .expect("the root carries the broadcast");
    let viewer = root.subscriber(&format!(
        "backup-urls={}?tls-fingerprint={} media-timeout=30000",
        backup.url(),
        backup.fingerprint
    ));
    viewer
        .wait_frames(48, WAIT)
        .expect("plays through the node");
    assert_eq!(
        viewer.messages_where(|m| m.starts_with("moq-connected url=")),
        [format!("moq-connected url={}", root.url())],
        "the viewer plays through the root"
    );
    let killed = unix_now();
    leaf.kill();
    // Frames received before the kill may still be on their way out (a loaded machine):
    // what counts is the backup's, after the second connection.
    let connections = || {
        let messages = viewer.messages.lock().unwrap();
        messages.iter().filter(|m| *m == "moq-connected").count()
    };
    wait_until_explained(
        "the viewer connects to its backup",
        || connections() >= 2,
        || {
            let frames = viewer.frames();
            let after: Vec<_> = frames.iter().filter(|f| f.output_unix > killed).collect();
            let discont: Vec<u64> = after
                .iter()
                .filter(|f| f.discont)
                .map(|f| f.decode_index)
                .collect();
            format!(
                "{} frames, {} after the kill (decode indices {:?} to {:?}, DISCONT at {:?}), \
                 the latest {:?} after it; messages {:?}; ports: root {}, node {}, backup {}; \
                 moq-relay running: {:?}",
                frames.len(),
                after.len(),
                after.first().map(|f| f.decode_index),
                after.last().map(|f| f.decode_index),
                discont,
                after.last().map(|f| f.output_unix.saturating_sub(killed)),
                viewer.messages.lock().unwrap(),
                root.port,
                leaf.port,
                backup.port,
                crate::relays_running()
            )
        },
    );
    let after = viewer.frames().len();
    viewer
        .wait_frames(after + 48, WAIT)
        .expect("plays from the backup");
    let messages = viewer.messages.lock().unwrap().clone();
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    let longest = longest_pause(&viewer.frames(), killed);
    eprintln!("longest pause after the node died {longest:?}; messages {messages:?}");
    let count = |name: &str| messages.iter().filter(|m| *m == name).count();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("moq-resubscribed")
                && m.contains("no media on the relay's route")),
        "asked again on the session first: {messages:?}"
    );
    assert_eq!(
        count("moq-connected"),
        2,
        "then moved to the backup: {messages:?}"
    );
    // Found quiet within about half a second, asked again for 300 ms and two round trips,
    // then a connection and the backup's next group: well under the 2 s the failover
    // silence alone would take before connecting.
    assert!(
        longest < Duration::from_millis(1800),
        "a freeze of {longest:?}"
    );
}

/// A publisher that stops sending for a while (its pipeline paused) is not a dead route,
/// but the viewer cannot tell: it subscribes again once. What the relay then sends again
/// from its cache is not new media, so the silence goes on and is not acted on again;
/// the viewer plays on when the publisher does, every frame after the last one before
/// the pause (decode indices go on, in either format).
fn pause_publisher(sender_properties: &str) {
    let relay = Relay::start();
    let sender = relay.publisher(sender_properties);
    let viewer = relay.subscriber("media-timeout=30000");
    viewer.wait_frames(48, WAIT).expect("plays");
    sender.pipeline.set_state(gst::State::Paused).unwrap();
    std::thread::sleep(Duration::from_secs(5));
    let before = viewer.frames().len();
    sender.pipeline.set_state(gst::State::Playing).unwrap();
    viewer
        .wait_frames(before + 48, WAIT)
        .expect("plays on with the publisher");
    let messages = viewer.messages.lock().unwrap().clone();
    eprintln!("{sender_properties:?}: messages {messages:?}");
    let count = |name: &str| messages.iter().filter(|m| *m == name).count();
    assert_eq!(count("moq-connected"), 1, "no reconnect: {messages:?}");
    assert_eq!(
        count("moq-resubscribed"),
        1,
        "subscribed again once for one silence: {messages:?}"
    );
    let frames = viewer.frames();
    for pair in frames.windows(2) {
        assert!(
            pair[1].decode_index > pair[0].decode_index,
            "decode indices go on: {} then {}",
            pair[0].decode_index,
            pair[1].decode_index
        );
    }
}

#[test]
fn a_publisher_that_pauses_behind_the_relay_is_subscribed_again_once() {
    pause_publisher("");
}

#[test]
fn a_hang_publisher_that_pauses_behind_the_relay_is_subscribed_again_once() {
    pause_publisher("format=hang");
}
