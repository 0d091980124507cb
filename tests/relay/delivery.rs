//! Every delivery mode of moqsink through the relay.

use crate::common::*;
use crate::{Relay, assert_decodable};

#[test]
fn every_delivery_mode_plays_through_the_relay() {
    let relay = Relay::start();
    for mode in ["baseline", "deprioritize-b", "skip-gops", "combined"] {
        let sender = relay.publisher(&format!("delivery={mode}"));
        let receiver = relay.subscriber("");
        receiver
            .wait_frames(72, WAIT)
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_decodable(&receiver, mode);
        // Nothing is lost on an uncongested loopback: three seconds without a gap.
        let frames = receiver.frames();
        let gaps = frames
            .windows(2)
            .filter(|p| p[1].decode_index != p[0].decode_index + 1)
            .count();
        assert_eq!(gaps, 0, "{mode}: frames missing through the relay");
        drop(receiver);
        drop(sender);
    }
}
