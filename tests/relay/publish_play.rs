//! Publishing and playing through the relay: one URL on both ends, several subscribers
//! and a late joiner, a viewer before its publisher, the hang format, the end of a stream,
//! the draft in use.

use std::time::Duration;

use crate::common::*;
use crate::{Relay, assert_decodable, ours};

#[test]
fn the_same_url_on_both_elements_addresses_the_same_broadcast() {
    let relay = Relay::start();
    // Root /anon, broadcast `show`, on both ends, with no namespace property.
    let properties = ours(format!(
        "url={}/show tls-fingerprint={}",
        relay.url(),
        relay.fingerprint
    ));
    let _sender = Sender::through_relay(&properties);
    let receiver = Receiver::start(&properties);
    receiver
        .wait_frames(24, WAIT)
        .expect("the player finds the broadcast");
    assert_decodable(&receiver, "same url");
}

#[test]
fn two_subscribers_and_a_late_joiner_through_the_relay() {
    let relay = Relay::start();
    let _sender = relay.publisher("");
    let first = relay.subscriber("");
    let second = relay.subscriber("");
    first.wait_frames(48, WAIT).expect("first subscriber plays");
    second
        .wait_frames(48, WAIT)
        .expect("second subscriber plays");
    let late = relay.subscriber("");
    late.wait_frames(48, WAIT).expect("late joiner plays");
    for (receiver, what) in [
        (&first, "first"),
        (&second, "second"),
        (&late, "late joiner"),
    ] {
        assert_decodable(receiver, what);
    }
    let late_start = late.frames()[0].decode_index;
    assert!(
        late_start > first.frames()[0].decode_index,
        "joined later in the stream"
    );
}

/// moq-dev's format through moq-relay: the relay reads our catalog.json and frames as it
/// does moq-gst's, and our moqsrc plays them to the end.
/// The relay has no such broadcast while the viewer starts: not an error, since its
/// publisher may come later (unlike a moqsink's answer for a name it does not publish).
#[test]
fn a_viewer_started_before_its_publisher_plays_once_it_comes() {
    let relay = Relay::start();
    let viewer = relay.subscriber("");
    // How late the publisher is: past the moment a missing broadcast would be an error.
    std::thread::sleep(Duration::from_secs(2));
    let _sender = relay.publisher("");
    viewer
        .wait_frames(24, WAIT)
        .expect("plays once the publisher comes");
}

#[test]
fn the_hang_format_plays_through_the_relay() {
    let relay = Relay::start();
    let sender = relay.publisher("format=hang");
    let receiver = relay.subscriber("");
    receiver.wait_frames(48, WAIT).expect("plays");
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("EOS reaches the subscriber");
    assert_complete_hang_delivery(&sender.sent(), &receiver);
}

#[test]
fn the_end_of_the_stream_reaches_subscribers_through_the_relay() {
    let relay = Relay::start();
    let sender = relay.publisher("");
    let receiver = relay.subscriber("");
    receiver.wait_frames(24, WAIT).expect("plays");
    sender.finish();
    let outcome = wait_eos(&receiver.pipeline, WAIT);
    eprintln!("after the publisher's EOS the receiver saw: {outcome:?}");
    outcome.expect("EOS, not an error");
}

/// The draft our elements negotiate with the relay: `MOQ_DRAFT`, else the default's first.
fn expected_draft() -> String {
    std::env::var("MOQ_DRAFT").unwrap_or_else(|_| {
        let default: moq_session::Versions = moq_session::DEFAULT_VERSIONS.parse().unwrap();
        default.list()[0].draft().to_string()
    })
}

/// The suite's draft through moq-relay: plays, and moqsrc reports the draft in use.
#[test]
fn the_draft_in_use_plays_through_the_relay_and_is_reported() {
    let relay = Relay::start();
    let _sender = relay.publisher("");
    let receiver = relay.subscriber("");
    let draft = expected_draft();
    receiver
        .wait_frames(48, WAIT)
        .unwrap_or_else(|e| panic!("draft-{draft}: {e}"));
    let messages = receiver.messages.lock().unwrap().clone();
    assert!(
        messages
            .iter()
            .any(|m| *m == format!("moq-connected draft={draft}")),
        "{messages:?}"
    );
    assert_decodable(&receiver, &format!("draft-{draft} through the relay"));
}
