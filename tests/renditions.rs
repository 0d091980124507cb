//! Renditions: the same video at several bitrates on moqsink's video pads, declared as
//! alternates in the catalog, with their groups started together so a receiver switching
//! between them lands on a group start.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::ladder;
use common::*;
use gst::prelude::*;
use moq_media::Catalog;
use moq_session::tls::{self, Trust};
use moq_session::{
    FilterType, Location, MoqUrl, SessionConfig, SubscribeOptions, TrackEvent, TrackNamespace,
};

/// One camera, two encoders whose own GoPs (48 and 30 frames) rarely coincide.
fn renditions_pipeline() -> String {
    let encoder = |kbit: u32, gop: u32| {
        format!(
            "queue ! x264enc bitrate={kbit} key-int-max={gop} bframes=0 speed-preset=ultrafast \
             tune=zerolatency ! h264parse"
        )
    };
    format!(
        "videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=24/1 \
         ! tee name=t t. ! {} ! m.video_0 t. ! {} ! m.video_1 \
         moqsink name=m sync=false listen=127.0.0.1:0",
        encoder(250, 48),
        encoder(600, 30)
    )
}

/// The two renditions into a moqsink that will listen on a free port, with
/// `sink_properties` added to moqsink's, not yet playing: (pipeline, moqsink).
fn launch_renditions(sink_properties: &str) -> (gst::Pipeline, gst::Element) {
    init();
    let description = format!("{} {sink_properties}", renditions_pipeline());
    let pipeline = gst::parse::launch(&description)
        .expect("pipeline")
        .downcast::<gst::Pipeline>()
        .expect("a pipeline");
    let sink = pipeline.by_name("m").expect("moqsink");
    (pipeline, sink)
}

/// Running times (µs) of the keyframes that reached each of moqsink's two video pads.
type Keyframes = Arc<Mutex<[Vec<i64>; 2]>>;

fn record_keyframes(sink: &gst::Element) -> Keyframes {
    let keyframes: Keyframes = Arc::default();
    for (i, name) in ["video_0", "video_1"].into_iter().enumerate() {
        let record = keyframes.clone();
        sink.static_pad(name).expect("requested pad").add_probe(
            gst::PadProbeType::BUFFER,
            move |_, info| {
                if let Some(b) = info.buffer()
                    && !b.flags().contains(gst::BufferFlags::DELTA_UNIT)
                    && let Some(pts) = b.pts()
                {
                    record.lock().unwrap_or_else(|e| e.into_inner())[i].push(pts.useconds() as i64);
                }
                gst::PadProbeReturn::Ok
            },
        );
    }
    keyframes
}

/// Of the keyframes of either pad after the first second, how many have one on the other
/// pad within a frame: (aligned, total).
fn aligned(keyframes: &[Vec<i64>; 2]) -> (usize, usize) {
    let start = keyframes.iter().flatten().min().copied().unwrap_or(0) + 1_000_000;
    let mut counts = (0, 0);
    for (this, other) in [(0, 1), (1, 0)] {
        for k in keyframes[this].iter().filter(|k| **k >= start) {
            counts.1 += 1;
            if keyframes[other].iter().any(|o| (o - k).abs() <= 42_000) {
                counts.0 += 1;
            }
        }
    }
    counts
}

/// Publishes the two renditions for `seconds`, in alternate group `alt_group` (0: none).
fn publish(
    alt_group: u32,
    seconds: u64,
    inspect: impl FnOnce(u16, &gst::Element),
) -> [Vec<i64>; 2] {
    let (pipeline, sink) = launch_renditions("");
    for (pad, kbit) in [("video_0", 250_000u64), ("video_1", 600_000)] {
        let pad = sink.static_pad(pad).expect("requested pad");
        pad.set_property("alt-group", alt_group);
        pad.set_property("bitrate", kbit);
    }
    let keyframes = record_keyframes(&sink);
    let port = play_listening(&pipeline, &sink);
    std::thread::sleep(Duration::from_secs(seconds));
    inspect(port, &sink);
    pipeline.set_state(gst::State::Null).unwrap();
    keyframes.lock().unwrap().clone()
}

#[test]
fn renditions_in_an_alternate_group_start_their_groups_together() {
    let apart = aligned(&publish(0, 8, |_, _| {}));
    let together = aligned(&publish(1, 8, |_, _| {}));
    eprintln!(
        "keyframes with one on the other rendition within a frame: {}/{} without an \
         alternate group, {}/{} with",
        apart.0, apart.1, together.0, together.1
    );
    assert!(together.1 >= 6, "keyframes seen: {together:?}");
    assert!(
        together.0 * 100 >= together.1 * 90,
        "aligned in the group: {together:?}"
    );
    assert!(
        apart.0 * 100 <= apart.1 * 50,
        "apart without a group: {apart:?}"
    );
}

/// The catalog document the listening moqsink `sink` serves on 127.0.0.1:`port`.
fn fetch_catalog(port: u16, sink: &gst::Element) -> Catalog {
    let fingerprint: String = sink
        .property::<Option<String>>("tls-cert-fingerprint")
        .expect("a fingerprint");
    runtime().block_on(async {
        let url = MoqUrl::parse(&format!("moqt://127.0.0.1:{port}/live")).expect("url");
        let trust = Trust::Fingerprint(tls::parse_fingerprint(&fingerprint).expect("fingerprint"));
        let session = tokio::time::timeout(
            WAIT,
            moq_session::connect(&url, &trust, SessionConfig::default()),
        )
        .await
        .expect("connects in time")
        .expect("connects");
        let options = SubscribeOptions {
            filter: FilterType::AbsoluteStart(Location {
                group: 0,
                object: 0,
            }),
            ..SubscribeOptions::default()
        };
        let mut catalog = session
            .subscribe(TrackNamespace::from_path("live"), "catalog", options)
            .await
            .expect("catalog subscription");
        loop {
            match tokio::time::timeout(WAIT, catalog.next()).await {
                Ok(Some(TrackEvent::Object(object))) => {
                    return Catalog::from_json(&object.payload).expect("a valid catalog");
                }
                Ok(Some(_)) => {}
                other => panic!("no catalog object: {:?}", other.is_ok()),
            }
        }
    })
}

/// Name, bitrate and alternate group of each rendition of `video` in `catalog`.
fn video_alternates(catalog: &Catalog) -> Vec<(&str, Option<u64>, Option<u32>)> {
    catalog
        .alternates("video")
        .iter()
        .map(|t| (t.name.as_str(), t.bitrate, t.alt_group))
        .collect()
}

#[test]
fn the_catalog_lists_renditions_as_alternates_with_their_bitrates() {
    publish(3, 2, |port, sink| {
        let catalog = fetch_catalog(port, sink);
        assert_eq!(
            video_alternates(&catalog),
            [
                ("video", Some(250_000), Some(3)),
                ("video-1", Some(600_000), Some(3))
            ]
        );
    });
}

#[test]
fn a_launch_line_declares_renditions_through_the_pads_properties() {
    // gst-launch syntax: the pads do not exist yet when the properties are parsed.
    let (pipeline, sink) = launch_renditions(
        "video_0::alt-group=2 video_0::bitrate=250000 video_1::alt-group=2 video_1::bitrate=600000",
    );
    let port = play_listening(&pipeline, &sink);
    // The first catalog may list one rendition (the other's keyframe not there yet).
    let mut catalog = None;
    wait_until("both renditions in the catalog", || {
        let latest = fetch_catalog(port, &sink);
        let both = video_alternates(&latest).len() == 2;
        catalog = Some(latest);
        both
    });
    let catalog = catalog.expect("a catalog");
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(
        video_alternates(&catalog),
        [
            ("video", Some(250_000), Some(2)),
            ("video-1", Some(600_000), Some(2))
        ]
    );
}

#[test]
fn an_alternate_without_a_bitrate_is_refused_with_a_clear_error() {
    let (pipeline, sink) = launch_renditions("");
    sink.static_pad("video_1")
        .expect("requested pad")
        .set_property("alt-group", 1u32);
    pipeline.set_state(gst::State::Playing).expect("plays");
    let error = wait_eos(&pipeline, WAIT).expect_err("an error");
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(
        error.contains("without a bitrate"),
        "the error says why: {error}"
    );
}

/// Waits until moqsrc plays `rendition`.
fn wait_rendition(receiver: &Receiver, rendition: &str, timeout: Duration) -> Result<(), String> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let (now, switches) = ladder::playing(receiver);
        if now == rendition {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "on {now:?} after {switches} switches, not {rendition:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn direct_viewer(port: u16, sink: &gst::Element, properties: &str) -> Receiver {
    let fingerprint: String = sink
        .property::<Option<String>>("tls-cert-fingerprint")
        .expect("a fingerprint");
    Receiver::start(&format!(
        "url=moqt://127.0.0.1:{port}/live tls-fingerprint={fingerprint} {properties}"
    ))
}

#[test]
fn abr_climbs_an_open_path_to_the_highest_rendition_without_a_seam() {
    let (publisher, sink) = ladder::publish_ladder("listen=127.0.0.1:0");
    let receiver = direct_viewer(listening_port(&sink), &sink, "");
    receiver.wait_frames(24, WAIT).expect("plays");
    let started = ladder::playing(&receiver).0;
    wait_rendition(&receiver, ladder::RENDITIONS[2], Duration::from_secs(40))
        .expect("climbs to the top");
    std::thread::sleep(Duration::from_secs(2));
    receiver.pipeline.set_state(gst::State::Null).unwrap();
    publisher.set_state(gst::State::Null).unwrap();
    let frames = receiver.frames();
    let seams = ladder::seams(&frames);
    let messages = receiver.messages.lock().unwrap().clone();
    let switches: Vec<&String> = messages.iter().filter(|m| m.contains(" to=")).collect();
    let widths = receiver.widths.lock().unwrap().clone();
    eprintln!(
        "started on {started}, switches {switches:?}; {} frames, {seams:?}; widths {:?}",
        frames.len(),
        {
            let mut w = widths.clone();
            w.dedup();
            w
        }
    );
    assert_eq!(started, ladder::RENDITIONS[0], "starts on the lowest");
    assert!(switches.len() >= 2, "one step at a time: {switches:?}");
    seams.assert_seamless();
    assert_eq!(widths.first(), Some(&320));
    assert_eq!(widths.last(), Some(&640), "the decoder got the new size");
}

#[test]
fn a_pinned_rendition_plays_and_pinning_another_switches_while_playing() {
    let (publisher, sink) = ladder::publish_ladder("listen=127.0.0.1:0");
    let receiver = direct_viewer(listening_port(&sink), &sink, "rendition=video-1");
    receiver.wait_frames(24, WAIT).expect("plays");
    assert_eq!(ladder::playing(&receiver).0, "video-1");
    let src = receiver.pipeline.by_name("src").expect("moqsrc");
    src.set_property("rendition", "video");
    wait_rendition(&receiver, "video", Duration::from_secs(10)).expect("switches down");
    src.set_property("rendition", None::<String>);
    src.set_property_from_str("abr", "off");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(ladder::playing(&receiver).0, "video", "abr off stays");
    receiver.pipeline.set_state(gst::State::Null).unwrap();
    publisher.set_state(gst::State::Null).unwrap();
    let seams = ladder::seams(&receiver.frames());
    let messages = receiver.messages.lock().unwrap().clone();
    eprintln!("{seams:?}; {messages:?}");
    assert!(messages.contains(&"moq-rendition to=video reason=settings".to_owned()));
    seams.assert_seamless();
}
