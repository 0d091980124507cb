//! GOAWAY: a viewer told to move opens a new session, hands over at a group boundary and
//! leaves the old one, without a gap, a repeated frame or a freeze.

mod common;

use std::time::Duration;

use common::*;
use gst::prelude::*;

/// moqsink drains its viewer to itself: the viewer moves to a new session of the same
/// publisher, so the frames of both sessions carry the same numbers and the handover can
/// be checked frame by frame.
#[test]
fn a_drained_viewer_moves_to_a_new_session_without_a_gap() {
    let sender = Sender::start("");
    let receiver = Receiver::of(&sender);
    receiver.wait_frames(48, WAIT).expect("plays");
    let before = receiver.frames().len();
    sender
        .sink
        .emit_by_name::<()>("drain", &[&Some(sender.url())]);
    let moved = wait_until(WAIT, || {
        receiver
            .messages
            .lock()
            .unwrap()
            .iter()
            .any(|m| m == "moq-moved")
    });
    assert!(
        moved,
        "moq-moved posted: {:?}",
        receiver.messages.lock().unwrap()
    );
    receiver
        .wait_frames(before + 96, WAIT)
        .expect("plays on after the move");
    let sessions = || {
        let stats: gst::Structure = sender.sink.property("stats");
        stats
            .get::<gst::Array>("sessions")
            .map_or(0, |a| a.as_slice().len())
    };
    let server_sessions = wait_until(WAIT, || sessions() == 1);
    receiver.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();

    let frames = receiver.frames();
    let indices: Vec<u64> = frames.iter().map(|f| f.decode_index).collect();
    for w in indices.windows(2) {
        assert_eq!(w[1], w[0] + 1, "every frame once, in order: {indices:?}");
    }
    assert!(
        frames[1..].iter().all(|f| !f.discont),
        "no jump or re-anchor at the move"
    );
    let longest = frames
        .windows(2)
        .map(|w| w[1].output_unix.saturating_sub(w[0].output_unix))
        .max()
        .unwrap_or_default();
    assert!(
        longest < Duration::from_millis(250),
        "a freeze of {longest:?}"
    );
    let messages = receiver.messages.lock().unwrap().clone();
    let connected = messages.iter().filter(|m| *m == "moq-connected").count();
    assert_eq!(connected, 1, "moved, not reconnected: {messages:?}");
    assert!(server_sessions, "the old session was closed");
    eprintln!(
        "{} frames, longest pause between outputs {longest:?}",
        frames.len()
    );
}

/// Polls `done` every 20 ms until it holds or `timeout` passes.
fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}
