//! A moq-relay cluster: viewers on every node, and failover when a node dies.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::{Relay, assert_decodable};

/// Median latency (availability at the sender to output by moqsrc) of a viewer's frames
/// output within `window` of Unix time.
fn median_latency(receiver: &Receiver, window: std::ops::Range<Duration>) -> Duration {
    let mut latencies: Vec<Duration> = receiver
        .frames()
        .iter()
        .filter(|f| window.contains(&f.output_unix))
        .filter_map(|f| f.latency())
        .collect();
    assert!(!latencies.is_empty(), "frames in the window");
    latencies.sort();
    latencies[latencies.len() / 2]
}

/// Time from starting a viewer to its first frame.
fn first_frame(start: impl FnOnce() -> Receiver) -> (Receiver, Duration) {
    let started = Instant::now();
    let receiver = start();
    receiver.wait_frames(1, WAIT).expect("a first frame");
    (receiver, started.elapsed())
}

/// A three-node moq-relay cluster: the publisher on the root node, a viewer on each
/// node, the viewers on the two other nodes each naming the other as its backup. All
/// decode; killing one of those nodes moves its viewer to the backup while the others
/// play on. Prints the time to first frame per node, the latency a hop adds and the
/// failover time.
#[test]
fn viewers_on_any_node_of_a_cluster_play_and_fail_over_when_their_node_dies() {
    let root = Relay::start();
    let mut left = Relay::start_in_cluster(&root);
    let right = Relay::start_in_cluster(&root);
    let _sender = root.publisher("");
    // Live before the first viewer, so that every node's first frame is timed alike.
    std::thread::sleep(Duration::from_secs(2));
    let backup = |relay: &Relay| {
        format!(
            "backup-urls={}?tls-fingerprint={} media-timeout=30000",
            relay.url(),
            relay.fingerprint
        )
    };
    let (on_root, root_first) = first_frame(|| root.subscriber(""));
    let (on_left, left_first) = first_frame(|| left.subscriber(&backup(&right)));
    let (on_right, right_first) = first_frame(|| right.subscriber(&backup(&left)));
    eprintln!(
        "time to first frame: {root_first:?} on the root node, {left_first:?} and {right_first:?} on the other nodes"
    );
    let from = unix_now();
    std::thread::sleep(Duration::from_secs(4));
    let window = from..unix_now();
    let (direct, remote) = (
        median_latency(&on_root, window.clone()),
        median_latency(&on_left, window.clone()),
    );
    eprintln!(
        "median latency: {direct:?} through one relay, {remote:?} and {:?} through two: {:?} per added hop",
        median_latency(&on_right, window),
        remote.saturating_sub(direct)
    );

    let (left_before, right_before) = (on_left.frames().len(), on_right.frames().len());
    let killed = unix_now();
    left.kill();
    on_left
        .wait_frames(left_before + 50, WAIT)
        .expect("the viewer of the dead node plays on from its backup");
    let frames = on_left.frames();
    // The backup holds the groups the dead node's viewer was playing: it picks up there.
    let (skipped, repeated) = skipped_and_repeated(&frames);
    let pause = longest_pause(&frames, killed);
    eprintln!(
        "failover: the viewer of the dead node played on from its backup after a pause of \
         {pause:?}, {skipped} frames skipped, {repeated} repeated"
    );
    assert_eq!((skipped, repeated), (0, 0), "every frame once, in order");
    assert!(pause < Duration::from_secs(10), "failover took {pause:?}");
    let connected = |r: &Receiver| {
        let messages = r.messages.lock().unwrap().clone();
        messages.iter().filter(|m| *m == "moq-connected").count()
    };
    assert_eq!(
        connected(&on_left),
        2,
        "connected to its node, then its backup"
    );
    on_right
        .wait_frames(right_before + 50, WAIT)
        .expect("the other viewers play on");
    assert_eq!(connected(&on_right), 1, "the other viewers stay connected");
    for (receiver, what) in [
        (&on_root, "root node"),
        (&on_left, "node that died, then backup"),
        (&on_right, "other node"),
    ] {
        assert_decodable(receiver, what);
    }
}
