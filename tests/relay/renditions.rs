//! Renditions through the relay: each viewer gets what its path carries and follows the
//! link rate.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::*;
use crate::{NAMESPACE, ROOT, Relay, ours};
use gst::prelude::*;

/// The rendition ladder published through `relay`: the publishing pipeline.
fn ladder_through(relay: &Relay) -> gst::Pipeline {
    ladder::publish_ladder(&ours(format!(
        "url={} namespace={NAMESPACE} tls-fingerprint={}",
        relay.url(),
        relay.fingerprint
    )))
    .0
}

/// A viewer of the relay's broadcast behind a link shaped by `profile` (logging to `log`
/// if given, linkem's CSV): the link and the viewer.
fn viewer_behind(
    relay: &Relay,
    profile: linkem::Profile,
    log: Option<std::path::PathBuf>,
) -> (linkem::Link, Receiver) {
    let link = linkem::Link::start(linkem::LinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        forward: SocketAddr::from(([127, 0, 0, 1], relay.port)),
        downstream: Some(profile),
        upstream: None,
        seed: 1,
        log,
    })
    .expect("link starts");
    let viewer = Receiver::start(&ours(format!(
        "url=moqt://{}/{ROOT} namespace={NAMESPACE} tls-fingerprint={}",
        link.local_addr(),
        relay.fingerprint
    )));
    (link, viewer)
}

/// Frames a viewer output since `since` (Unix time), against the camera's frames in that
/// time.
fn output_share(viewer: &Receiver, since: Duration) -> (usize, usize) {
    let frames = viewer.frames();
    let got = frames.iter().filter(|f| f.output_unix >= since).count();
    let expected =
        (unix_now().saturating_sub(since).as_secs_f64() / ladder::FRAME.as_secs_f64()) as usize;
    (got, expected)
}

/// The longest time without output (wall clock) overlapping the second either side of
/// `at`.
fn stall_around(frames: &[ReceivedFrame], at: Duration) -> Duration {
    let second = Duration::from_secs(1);
    // Every gap between two outputs that overlaps the second either side of `at`, whole:
    // one that ends at the switch (the old rendition starved) counts as much as one that
    // begins there.
    let mut times: Vec<Duration> = frames.iter().map(|f| f.output_unix).collect();
    times.sort();
    times
        .windows(2)
        .filter(|w| w[1] + second >= at && w[0] <= at + second)
        .map(|w| w[1].saturating_sub(w[0]))
        .max()
        .unwrap_or(Duration::from_secs(2))
}

/// Three renditions through the relay: a viewer behind 400 kbit/s settles on the lowest, an
/// unconstrained one climbs to the highest, and the relay forwards each only what it
/// subscribed.
#[test]
fn each_viewer_of_the_relay_gets_the_rendition_its_path_carries() {
    let relay = Relay::start();
    let publisher = ladder_through(&relay);
    let (slow_link, slow) = viewer_behind(&relay, linkem::Profile::constant(400, 150_000), None);
    let (open_link, open) = viewer_behind(&relay, linkem::Profile::constant(0, 1 << 20), None);
    slow.wait_frames(24, WAIT).expect("the slow viewer plays");
    open.wait_frames(24, WAIT).expect("the open viewer plays");
    // Settling: the open viewer climbs two steps, 4 s of calm each at least.
    std::thread::sleep(Duration::from_secs(20));
    let settled = unix_now();
    let open_bytes = open_link.totals().downstream.bytes_out;
    std::thread::sleep(Duration::from_secs(15));
    let open_rate = (open_link.totals().downstream.bytes_out - open_bytes) * 8 / 15;
    let (slow_share, open_share) = (output_share(&slow, settled), output_share(&open, settled));
    let (slow_on, open_on) = (ladder::playing(&slow), ladder::playing(&open));
    let messages = (
        slow.messages.lock().unwrap().clone(),
        open.messages.lock().unwrap().clone(),
    );
    slow.pipeline.set_state(gst::State::Null).unwrap();
    open.pipeline.set_state(gst::State::Null).unwrap();
    publisher.set_state(gst::State::Null).unwrap();
    let slow_totals = slow_link.stop();
    eprintln!(
        "400 kbit/s viewer: on {slow_on:?}, {slow_share:?} frames output/expected after \
         settling, link {slow_totals:?}\nopen viewer: on {open_on:?}, {open_share:?} frames, \
         {open_rate} bit/s after settling\nmessages {messages:?}"
    );
    assert_eq!(
        slow_on.0,
        ladder::RENDITIONS[0],
        "the slow viewer stays low"
    );
    assert_eq!(open_on.0, ladder::RENDITIONS[2], "the open viewer climbs");
    for (what, (got, expected)) in [("slow", slow_share), ("open", open_share)] {
        assert!(
            got * 100 >= expected * 95,
            "{what}: {got}/{expected} frames"
        );
    }
    // All three renditions are 2.05 Mbit/s; the top one alone 1.2.
    assert!(
        open_rate < 1_600_000,
        "the relay forwards only the subscribed rendition: {open_rate} bit/s"
    );
}

/// A CASCADE-like link (1200 → 400 → 1200 kbit/s, 3 s of queue at 400): the viewer goes
/// down when the rate drops and back up when it returns; how long the output stopped
/// around each switch is printed, and none may freeze the picture for long.
#[test]
fn a_viewer_follows_the_link_rate_down_and_back_up() {
    follow_the_link_rate(false);
}

/// The same while another viewer plays the lowest rendition, so the relay holds it when
/// the viewer goes down: it must not pass on its group under way (moq-relay ignores "next
/// group start"; before the viewer asked for the largest object instead, one of two runs
/// froze for 1.68 s there).
#[test]
fn a_viewer_follows_the_link_rate_while_the_relay_holds_the_lowest_rendition() {
    follow_the_link_rate(true);
}

fn follow_the_link_rate(other_on_lowest: bool) {
    let relay = Relay::start();
    let publisher = ladder_through(&relay);
    let profile = linkem::Profile::from_json_str(
        r#"{"name": "CASCADE-like", "queue_bytes": 150000, "steps": [
            {"duration_s": 25, "rate_kbit": 1200},
            {"duration_s": 25, "rate_kbit": 400},
            {"duration_s": 600, "rate_kbit": 1200}]}"#,
    )
    .expect("a valid profile");
    let _other = other_on_lowest.then(|| {
        let other = relay.subscriber(&format!("rendition={}", ladder::RENDITIONS[0]));
        other.wait_frames(24, WAIT).expect("the other viewer plays");
        other
    });
    let scratch = Scratch::new("follow-the-link-rate");
    let log = scratch.join("link.csv");
    let (link, viewer) = viewer_behind(&relay, profile, Some(log.clone()));
    let start = unix_now();
    viewer.wait_frames(24, WAIT).expect("plays");
    std::thread::sleep(Duration::from_secs(75).saturating_sub(unix_now() - start));
    let on = ladder::playing(&viewer);
    let (got, expected) = output_share(&viewer, start + Duration::from_secs(5));
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    publisher.set_state(gst::State::Null).unwrap();
    let totals = link.stop();
    let frames = viewer.frames();
    // (seconds since start, rendition) of every switch, from moqsrc's output: a switch
    // shows as a change of the decoded size.
    let switches = viewer.messages_where(|m| m.contains(" to="));
    let mut sizes: Vec<(Duration, i32)> = Vec::new();
    let widths = viewer.widths.lock().unwrap().clone();
    for (frame, width) in frames.iter().zip(widths.iter()) {
        if sizes.last().is_none_or(|(_, w)| w != width) {
            sizes.push((frame.output_unix, *width));
        }
    }
    let stalls: Vec<(f64, i32, Duration)> = sizes
        .iter()
        .skip(1)
        .map(|(at, width)| {
            (
                at.saturating_sub(start).as_secs_f64(),
                *width,
                stall_around(&frames, *at),
            )
        })
        .collect();
    eprintln!(
        "switches {switches:?}\nat (s, width, longest output gap overlapping 1 s either side): {stalls:?}\n\
         on {on:?}; {got}/{expected} frames output; link {totals:?}"
    );
    let low = ladder::LADDER[0].1 as i32;
    let down = sizes
        .iter()
        .position(|(at, w)| *at >= start + Duration::from_secs(25) && *w == low)
        .filter(|&i| sizes[i].0 < start + Duration::from_secs(50))
        .unwrap_or_else(|| panic!("down to the lowest while the link is at 400 kbit/s: {sizes:?}"));
    assert!(
        sizes[down..]
            .iter()
            .any(|(at, w)| *at >= start + Duration::from_secs(50) && *w > low),
        "back up once the link is at 1200 kbit/s again: {sizes:?}"
    );
    // Both directions once froze the picture for a second: moq-relay, subscribing anew to
    // the rendition switched to, was sent moqsink's group under way from its keyframe and
    // passed it on in one burst that the splice could not use and the narrow link had to
    // carry first (1.17-1.29 s at the switch down over 3 runs, 57-222 ms up). moqsink now
    // starts such a subscription at the group its keyframe request brings on: 120-161 ms
    // down over 6 runs, 72-76 ms up. With another viewer on the lowest, the relay holds
    // it: our SUBSCRIBE does not reach moqsink and nothing asks it for a keyframe
    // (moq-relay ignores NEW_GROUP_REQUEST), so the lowest starts at its own next keyframe. Traced over 8 runs (the
    // receiver's decision, SUBSCRIBE_OK and first keyframe): SUBSCRIBE_OK came ~0.5 s after
    // the decision (it crosses the congested link's queue) and the keyframe 2.1-2.8 s after
    // it (the ladder's GoP is 2 s); the higher rendition played on meanwhile, late, and the
    // longest gap in the picture was 110-202 ms. When the higher rendition's frames run out
    // before that keyframe, the gap is the rest of the wait (983 ms in one earlier run of
    // about ten): the bound allows for it. A shorter wait needs a relay that asks the
    // publisher for a new group, or a player that starts the lower rendition from its group
    // under way.
    let bound = Duration::from_millis(if other_on_lowest { 1200 } else { 600 });
    for (at, width, stall) in &stalls {
        assert!(
            *stall <= bound,
            "a {stall:?} stall at the switch to width {width} at {at:.1} s; the frames around it \
             (s, decode index, width, key, discont, ms from receipt to output, ms latency):\n{}\n\
             the link toward the viewer (s since its first packet, bytes queued, ms of queue):\n{}",
            frames_around(&frames, &widths, start, *at),
            queue_around(&log, *at)
        );
    }
}

/// The downstream rows of linkem's CSV `log` within 3 s of `at` (seconds since the
/// link's first packet, about the viewer's start), a line each: whether a stall waited
/// behind the link's queue.
fn queue_around(log: &std::path::Path, at: f64) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            let t: f64 = fields.first()?.parse().ok()?;
            let down = fields.get(1) == Some(&"downstream");
            let (queued, delay) = (fields.get(11)?, fields.get(12)?);
            (down && (t - at).abs() <= 3.0).then(|| format!("{t:.1} {queued} {delay}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The frames output within 1.5 s of `at` (seconds since `start`), a line each: what a
/// stall was made of.
fn frames_around(frames: &[ReceivedFrame], widths: &[i32], start: Duration, at: f64) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    frames
        .iter()
        .zip(widths)
        .map(|(f, w)| (f.output_unix.saturating_sub(start).as_secs_f64(), f, w))
        .filter(|(t, _, _)| (t - at).abs() <= 1.5)
        .map(|(t, f, w)| {
            let waited = f.received.map(|r| {
                ms(f.output_unix
                    .saturating_sub(Duration::from_nanos(r.nseconds())))
            });
            format!(
                "{t:.3} {} {w} {} {} {waited:.0?} {:.0?}",
                f.decode_index,
                f.key,
                f.discont,
                f.latency().map(ms)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
