//! Connection migration: a publisher whose address changes keeps its relay session. A
//! publisher far from its relay connects at all.

use std::time::Duration;

use crate::common::*;
use crate::{NAMESPACE, ROOT, Relay, count_messages, ours};
use gst::prelude::*;

/// NAT rebindings between the publisher and the relay (linkem gives moqsink a new source
/// port), ten of them two seconds of playing apart: moq-relay follows the connection to
/// each new address, and the viewer plays on.
#[test]
fn a_publisher_whose_address_changes_keeps_its_relay_session() {
    const REBINDS: usize = 10;
    let relay = Relay::start();
    let link = link_to(relay.port, None);
    let sender = publisher_through(&relay, &link);
    let announced = count_messages(&sender.pipeline, "moq-connected");
    wait_announced(&sender.sink);
    let viewer = relay.subscriber("media-timeout=30000");
    viewer.wait_frames(48, WAIT).expect("plays");
    let rebound = unix_now();
    for _ in 0..REBINDS {
        link.rebind();
        let before = viewer.frames().len();
        viewer
            .wait_frames(before + 48, WAIT)
            .expect("plays on after the publisher's rebinding");
    }
    let took = unix_now() - rebound;
    let messages = viewer.messages.lock().unwrap().clone();
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();
    let frames = viewer.frames();
    let pause = longest_pause(&frames, rebound);
    eprintln!(
        "{REBINDS} rebindings in {took:?}; longest pause {pause:?}; viewer messages {messages:?}"
    );
    assert_eq!(
        *announced.lock().unwrap(),
        1,
        "the publisher never reconnected"
    );
    assert!(pause < Duration::from_millis(250), "a freeze of {pause:?}");
}

/// 700 ms from the relay to the publisher: the handshake and SETUP take about 1.4 s,
/// longer than a connection attempt runs before the next one starts. The attempts kept
/// going connect (restarted alone, none would ever finish): the publisher announces on
/// one session and a viewer plays.
#[test]
fn a_publisher_slower_to_reach_than_the_attempt_interval_announces() {
    let relay = Relay::start();
    let link = link_to(relay.port, Some(delay_only(700)));
    let sender = publisher_through(&relay, &link);
    let announced = count_messages(&sender.pipeline, "moq-connected");
    wait_announced(&sender.sink);
    let viewer = relay.subscriber("media-timeout=30000");
    viewer.wait_frames(48, WAIT).expect("plays");
    assert_eq!(*announced.lock().unwrap(), 1, "announced on one session");
}

/// A publisher to `relay` through `link`.
fn publisher_through(relay: &Relay, link: &linkem::Link) -> Sender {
    Sender::through_relay(&ours(format!(
        "url=moqt://{}/{ROOT} namespace={NAMESPACE} tls-fingerprint={}",
        link.local_addr(),
        relay.fingerprint
    )))
}
