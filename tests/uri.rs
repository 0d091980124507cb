//! `moqt://` URIs: playbin (through uridecodebin) and gst-play-1.0 find moqsrc by its URI
//! handler and play both tracks; the pin can ride in the URI's query.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::av::{AudioCodec, AvSender};
use common::*;
use gst::prelude::*;

fn av_sender() -> (AvSender, String) {
    let sender = AvSender::start(
        &format!("{TEST_VIDEO} ! {TEST_ENCODER}"),
        AudioCodec::Opus,
        "listen=127.0.0.1:0",
    );
    let uri = format!(
        "moqt://127.0.0.1:{}/live?tls-fingerprint={}",
        sender.port(),
        sender.fingerprint()
    );
    (sender, uri)
}

fn counting_sink(count: &Arc<AtomicUsize>) -> gst::Element {
    let sink = gst::ElementFactory::make("fakesink")
        .property("sync", true)
        .property("signal-handoffs", true)
        .build()
        .unwrap();
    let count = count.clone();
    sink.connect("handoff", false, move |_| {
        count.fetch_add(1, Ordering::Relaxed);
        None
    });
    sink
}

#[test]
fn playbin_plays_both_tracks_of_a_moqt_uri() {
    let (_sender, uri) = av_sender();
    let (video, audio) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let playbin = gst::ElementFactory::make("playbin")
        .property("uri", &uri)
        .property("video-sink", counting_sink(&video))
        .property("audio-sink", counting_sink(&audio))
        .build()
        .unwrap();
    playbin.set_state(gst::State::Playing).unwrap();
    let bus = playbin.bus().unwrap();
    let deadline = Instant::now() + WAIT;
    while video.load(Ordering::Relaxed) < 48 || audio.load(Ordering::Relaxed) < 100 {
        assert!(
            Instant::now() < deadline,
            "{} video, {} audio buffers rendered",
            video.load(Ordering::Relaxed),
            audio.load(Ordering::Relaxed)
        );
        if let Some(msg) = bus.timed_pop_filtered(
            gst::ClockTime::from_mseconds(100),
            &[gst::MessageType::Error],
        ) {
            panic!("{msg:?}");
        }
    }
    let source = playbin.property::<gst::Element>("source");
    assert_eq!(source.factory().unwrap().name(), "moqsrc");
    playbin.set_state(gst::State::Null).unwrap();
}

#[test]
fn gst_play_plays_a_moqt_uri() {
    let (_sender, uri) = av_sender();
    let text = run_for(
        Command::new("gst-play-1.0")
            .args([
                "--no-interactive",
                "--videosink=fakesink",
                "--audiosink=fakesink",
                &uri,
            ])
            .env("GST_PLUGIN_PATH", plugin_dir())
            .env("GST_DEBUG", "basesink:5")
            .env("GST_DEBUG_NO_COLOR", "1"),
        Duration::from_secs(6),
    );
    let rendered = text
        .lines()
        .filter(|l| l.contains("gst_base_sink_chain_unlocked") && l.contains("got times"))
        .count();
    let stdout: String = text.lines().filter(|l| !l.contains("basesink")).collect();
    eprintln!("gst-play-1.0: {rendered} buffers reached its sinks in 6 s");
    assert!(!stdout.contains("ERROR"), "{stdout}");
    assert!(rendered >= 100, "{rendered} buffers\n{stdout}");
}

#[test]
fn a_moqt_uri_sets_the_url_and_bad_ones_are_refused() {
    init();
    for factory in ["moqsrc", "moqsink"] {
        let element = gst::ElementFactory::make(factory).build().unwrap();
        let handler = element.dynamic_cast_ref::<gst::URIHandler>().unwrap();
        assert_eq!(handler.protocols(), ["moqt"]);
        handler.set_uri("moqt://relay.example/anon/show").unwrap();
        assert_eq!(
            element.property::<Option<String>>("url").as_deref(),
            Some("moqt://relay.example/anon/show")
        );
        assert!(handler.set_uri("https://relay.example/anon").is_err());
    }
    let made = gst::Element::make_from_uri(gst::URIType::Src, "moqt://h:1/live", None).unwrap();
    assert_eq!(made.factory().unwrap().name(), "moqsrc");
}
