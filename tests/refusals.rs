//! Failures a retry cannot heal end at once, through moqsrc and playbin alike, with the
//! cause and the fix in the message: an untrusted certificate, a draft the server lacks, a
//! broadcast or track that does not exist.
//! A `moqt://` URI carries the connection settings a user would otherwise set as
//! properties (`tls-insecure`, `versions`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

/// moqsrc's `media-timeout`: a failure that was retried would take this long to be reported.
const RETRY_FOR: Duration = Duration::from_secs(30);

/// Plays `pipeline` until its first error: the message and how long it took.
fn first_error(pipeline: &gst::Element) -> (String, Duration) {
    let started = Instant::now();
    pipeline.set_state(gst::State::Playing).expect("PLAYING");
    let bus = pipeline.bus().expect("a bus");
    let error = wait_bus(&bus, RETRY_FOR + WAIT, |m| match m.view() {
        gst::MessageView::Error(e) => Some(e.error().to_string()),
        _ => None,
    })
    .expect("an error");
    let took = started.elapsed();
    pipeline.set_state(gst::State::Null).expect("NULL");
    eprintln!("after {took:?}: {error}");
    (error, took)
}

fn moqsrc(properties: &str) -> gst::Element {
    launch(&format!(
        "moqsrc media-timeout={} {properties} ! fakesink",
        RETRY_FOR.as_millis()
    ))
    .upcast()
}

/// Ended well before the retries would have given up.
fn assert_at_once(took: Duration) {
    assert!(
        took < RETRY_FOR / 3,
        "took {took:?}: retried a failure that cannot heal"
    );
}

#[test]
fn an_untrusted_certificate_ends_at_once_and_says_how_to_trust_it() {
    let sender = Sender::start("");
    for pipeline in [
        moqsrc(&format!("url={}", sender.url())),
        playbin(&sender.url()),
    ] {
        let (error, took) = first_error(&pipeline);
        assert!(error.contains("certificate"), "{error}");
        assert!(
            error.contains("tls-fingerprint") && error.contains("tls-insecure"),
            "{error}"
        );
        assert_at_once(took);
    }
}

#[test]
fn a_draft_the_server_lacks_ends_at_once_naming_both_lists() {
    let sender = Sender::start("versions=22");
    let fingerprint = sender.fingerprint();
    for pipeline in [
        moqsrc(&format!(
            "url={} tls-fingerprint={fingerprint} versions=14",
            sender.url()
        )),
        // The URI's query sets the element's drafts.
        playbin(&format!(
            "{}?tls-fingerprint={fingerprint}&versions=16,14",
            sender.url()
        )),
    ] {
        let (error, took) = first_error(&pipeline);
        assert!(error.contains("we allow 1"), "{error}");
        assert!(error.contains("the server speaks 22"), "{error}");
        assert!(error.contains("versions"), "{error}");
        assert_at_once(took);
    }
}

/// A name a moqsink does not publish, or a track its catalog lacks, ends after a moment,
/// not after `media-timeout`; the broadcast it does publish plays. (A relay's "no such
/// broadcast" is waited for: see the relay suite's viewer started before its publisher.)
#[test]
fn a_broadcast_or_track_that_does_not_exist_ends_at_once_naming_it() {
    let sender = Sender::start("");
    let fingerprint = sender.fingerprint();
    let wrong = sender.url().replace("/live", "/elsewhere");
    for pipeline in [
        moqsrc(&format!("url={wrong} tls-fingerprint={fingerprint}")),
        playbin(&format!("{wrong}?tls-fingerprint={fingerprint}")),
    ] {
        let (error, took) = first_error(&pipeline);
        assert!(
            error.contains("namespace \"elsewhere\" is not published"),
            "{error}"
        );
        assert!(error.contains("check namespace"), "{error}");
        assert_at_once(took);
    }
    // A track asked for by name that the catalog lacks.
    let (error, took) = first_error(&moqsrc(&format!(
        "url={} tls-fingerprint={fingerprint} video-track=nope",
        sender.url()
    )));
    assert!(error.contains("no video track \"nope\""), "{error}");
    assert_at_once(took);
    let receiver = Receiver::of(&sender);
    receiver
        .wait_frames(24, WAIT)
        .expect("the broadcast that exists plays");
}

#[test]
fn a_moqt_uri_with_tls_insecure_plays_a_self_signed_publisher_in_playbin() {
    let sender = Sender::start("");
    let rendered = Arc::new(AtomicUsize::new(0));
    let sink = gst::ElementFactory::make("fakesink")
        .property("signal-handoffs", true)
        .build()
        .unwrap();
    let count = rendered.clone();
    sink.connect("handoff", false, move |_| {
        count.fetch_add(1, Ordering::Relaxed);
        None
    });
    let playbin = gst::ElementFactory::make("playbin")
        .property("uri", format!("{}?tls-insecure=true", sender.url()))
        .property("video-sink", &sink)
        .build()
        .unwrap();
    playbin.set_state(gst::State::Playing).unwrap();
    let bus = playbin.bus().unwrap();
    let deadline = Instant::now() + WAIT;
    while rendered.load(Ordering::Relaxed) < 24 {
        assert!(
            Instant::now() < deadline,
            "{} frames rendered",
            rendered.load(Ordering::Relaxed)
        );
        if let Some(msg) = bus.timed_pop_filtered(
            gst::ClockTime::from_mseconds(100),
            &[gst::MessageType::Error],
        ) {
            panic!("{msg:?}");
        }
    }
    playbin.set_state(gst::State::Null).unwrap();
}
