//! GOAWAY: a viewer told to move opens a new session, hands over at a keyframe and leaves
//! the old one, without a gap, a repeated frame or a freeze.

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
    let before = drain(&receiver, &sender.sink, &sender.url());
    let server_sessions = wait_until(WAIT, || sessions(&sender.sink) == 1);
    receiver.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();

    assert_moved_without_a_gap(&receiver, before);
    assert!(server_sessions, "the old session was closed");
}

/// moqsink drains its viewer to another moqsink fed by the same encoder, which joined it
/// seconds later: a publisher that numbers its groups and frames on its own, so the
/// handover meets the old stream on media time and carries its numbering on.
#[test]
fn a_viewer_drained_to_another_publisher_of_the_stream_plays_on_without_a_gap() {
    let pipeline = launch(&format!(
        "{TEST_VIDEO} ! {TEST_ENCODER} ! tee name=t ! queue ! moqsink name=first listen=127.0.0.1:0"
    ));
    pipeline.set_state(gst::State::Playing).expect("plays");
    let first = pipeline.by_name("first").expect("first moqsink");
    let url = |sink: &gst::Element| format!("moqt://127.0.0.1:{}/live", listening_port(sink));
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", url(&first)));
    receiver.wait_frames(48, WAIT).expect("plays");
    // The second publisher starts 2 s into the stream, mid-group.
    let branch =
        gst::parse::bin_from_description("queue ! moqsink name=second listen=127.0.0.1:0", true)
            .expect("a branch");
    pipeline.add(&branch).unwrap();
    let tee = pipeline.by_name("t").expect("tee");
    tee.request_pad_simple("src_%u")
        .expect("a tee pad")
        .link(&branch.static_pad("sink").expect("a ghost pad"))
        .expect("links");
    branch.sync_state_with_parent().expect("branch plays");
    let second = pipeline.by_name("second").expect("second moqsink");
    let second_url = url(&second);
    // Until it has published a group of its own.
    std::thread::sleep(Duration::from_secs(1));
    let before = drain(&receiver, &first, &second_url);
    let left = wait_until(WAIT, || sessions(&first) == 0);
    let arrived = sessions(&second);
    receiver.pipeline.set_state(gst::State::Null).unwrap();
    pipeline.set_state(gst::State::Null).unwrap();

    // The handover numbers the new publisher's frames from media time (a picture missing
    // at the cut leaves a hole in the numbers), and no picture comes twice.
    assert_moved_without_a_gap(&receiver, before);
    let frames = receiver.frames();
    let mut pts: Vec<gst::ClockTime> = frames.iter().map(|f| f.pts).collect();
    pts.sort();
    pts.dedup();
    assert_eq!(pts.len(), frames.len(), "a picture came twice");
    assert!(left, "the first publisher's session was closed");
    assert_eq!(arrived, 1, "the viewer is the second publisher's");
}

/// `sink` sends GOAWAY naming `to`; waits for the viewer's move and 96 frames after it.
/// The frames the viewer had before.
fn drain(receiver: &Receiver, sink: &gst::Element, to: &str) -> usize {
    let before = receiver.frames().len();
    sink.emit_by_name::<()>("drain", &[&Some(to.to_owned())]);
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
    before
}

/// The sessions a listening moqsink serves.
fn sessions(sink: &gst::Element) -> usize {
    let stats: gst::Structure = sink.property("stats");
    stats
        .get::<gst::Array>("sessions")
        .map_or(0, |a| a.as_slice().len())
}

/// Every frame once and in order, one connection, no jump or re-anchor, no freeze.
fn assert_moved_without_a_gap(receiver: &Receiver, before: usize) {
    let frames = receiver.frames();
    let messages = receiver.messages.lock().unwrap().clone();
    let bound = Duration::from_millis(250);
    assert_played_through(&frames, &messages, Duration::ZERO, bound);
    assert!(
        frames[1..].iter().all(|f| !f.discont),
        "no jump or re-anchor at the move"
    );
    eprintln!(
        "{} frames, {} after the move, longest pause between outputs {:?}",
        frames.len(),
        frames.len() - before,
        longest_pause(&frames, Duration::ZERO)
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
