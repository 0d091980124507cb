//! moqsink → moqsrc on loopback: live H.264 in, decoded pictures out.

mod common;

use common::*;

#[test]
fn every_frame_after_joining_is_decoded_in_order() {
    let sender = Sender::start("");
    let receiver = Receiver::start(&format!(
        "url={} tls-fingerprint={}",
        sender.url(),
        sender.fingerprint()
    ));
    receiver
        .wait_frames(48, WAIT)
        .expect("two seconds of frames");
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("EOS reaches the receiver");
    assert_complete_delivery(&sender.sent(), &receiver);
}

#[test]
fn two_subscribers_both_decode_everything() {
    let sender = Sender::start("");
    let props = format!(
        "url={} tls-fingerprint={}",
        sender.url(),
        sender.fingerprint()
    );
    let first = Receiver::start(&props);
    let second = Receiver::start(&props);
    first.wait_frames(30, WAIT).expect("first receiver plays");
    second.wait_frames(30, WAIT).expect("second receiver plays");
    sender.finish();
    for receiver in [&first, &second] {
        wait_eos(&receiver.pipeline, WAIT).expect("EOS reaches every receiver");
        assert_complete_delivery(&sender.sent(), receiver);
    }
}

#[test]
fn a_late_joiner_starts_at_the_next_keyframe() {
    let sender = Sender::start("");
    let props = format!(
        "url={} tls-fingerprint={}",
        sender.url(),
        sender.fingerprint()
    );
    let early = Receiver::start(&props);
    early.wait_frames(20, WAIT).expect("early receiver plays");
    let late = Receiver::start(&props);
    late.wait_frames(20, WAIT).expect("late receiver plays");
    sender.finish();
    wait_eos(&late.pipeline, WAIT).expect("EOS");
    let frames = late.frames();
    assert!(frames[0].decode_index > 0, "joined mid-stream");
    assert_complete_delivery(&sender.sent(), &late);
    wait_eos(&early.pipeline, WAIT).expect("EOS reaches the early receiver too");
}
