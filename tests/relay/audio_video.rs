//! Audio and video through the relay, uncongested and with a congested link behind it.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::*;
use crate::{NAMESPACE, ROOT, Relay, ours};

#[test]
fn audio_and_video_play_through_the_relay() {
    let relay = Relay::start();
    let sender = av::AvSender::start(
        &format!("{TEST_VIDEO} ! {TEST_ENCODER}"),
        av::AudioCodec::Opus,
        &ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={}",
            relay.url(),
            relay.fingerprint
        )),
    );
    let url = ours(format!(
        "url={} namespace={NAMESPACE} tls-fingerprint={}",
        relay.url(),
        relay.fingerprint
    ));
    let receiver = av::AvReceiver::start(&url, av::AudioCodec::Opus);
    receiver
        .wait_both(48, WAIT)
        .expect("both tracks through the relay");
    let late = av::AvReceiver::start(&url, av::AudioCodec::Opus);
    late.wait_both(48, WAIT).expect("a late joiner gets both");
    std::thread::sleep(Duration::from_secs(3));
    for (what, r) in [("first", &receiver), ("late joiner", &late)] {
        // A joiner that starts behind (a relay sends the group under way from its
        // keyframe) drains its playout delay: audio by letting single frames go.
        let a_drained = r.drained("audio");
        let (video, audio) = (r.video.lock().unwrap(), r.audio.lock().unwrap());
        let (v_got, v_span) = av::received_span(&video.outputs);
        let (a_got, a_span) = av::received_span(&audio.outputs);
        let av::Skew {
            worst_ms: worst,
            pairs,
        } = av::skew(&sender, &video, &audio);
        // From the first frame on: a late joiner's video GoP older than its audio must
        // not cut a hole into the audio when it arrives.
        let gaps = av::audio_gaps(
            &sender.audio.lock().unwrap(),
            &audio.outputs,
            Duration::from_millis(60),
        );
        eprintln!(
            "through the relay, {what}: video {v_got}/{v_span}, audio {a_got}/{a_span} \
             ({a_drained} drained), A/V skew worst {worst:.1} ms over {} pairs, \
             audio gaps > 60 ms: {gaps:?}",
            pairs
        );
        assert!(
            gaps.is_empty(),
            "{what}: audio gaps {gaps:?}; moqsrc stats {}",
            r.stats()
        );
        assert!(
            v_got * 100 >= v_span * 95 && (a_got + a_drained) * 100 >= a_span * 95,
            "{what}"
        );
        assert!(worst <= 40.0, "{what}: A/V skew {worst:.1} ms");
    }
}

/// The congested A/V run of tests/av.rs with moq-relay between moqsink and the link: the
/// relay forwards audio ahead of the video it has to thin.
#[test]
fn audio_plays_on_through_the_relay_while_congestion_makes_the_video_skip() {
    let relay = Relay::start();
    let sender = av::AvSender::start(
        av::CONGESTED_VIDEO,
        av::AudioCodec::Opus,
        &ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={}",
            relay.url(),
            relay.fingerprint
        )),
    );
    let forward = SocketAddr::from(([127, 0, 0, 1], relay.port));
    av::play_congested(&sender, forward, |link| {
        ours(format!(
            "url=moqt://{link}/{ROOT} namespace={NAMESPACE} tls-fingerprint={}",
            relay.fingerprint
        ))
    });
}
