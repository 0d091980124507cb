//! Bad input gets a clear outcome: refused caps, dropped leading AUs, errors naming the
//! URL for unreachable or vanished peers, and no hang anywhere.

mod common;

use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

fn launch(description: &str) -> gst::Pipeline {
    init();
    gst::parse::launch(description)
        .expect("pipeline parses")
        .downcast::<gst::Pipeline>()
        .expect("a pipeline")
}

/// Plays `description` and returns the first ERROR's text (panics on EOS or timeout).
fn first_error(pipeline: &gst::Pipeline, timeout: Duration) -> String {
    let _ = pipeline.set_state(gst::State::Playing);
    let bus = pipeline.bus().expect("bus");
    let err = wait_bus(&bus, timeout, |m| match m.view() {
        gst::MessageView::Eos(_) => Some(Err("unexpected EOS".to_owned())),
        _ => None,
    });
    let _ = pipeline.set_state(gst::State::Null);
    match err {
        Err(text) => text,
        Ok(Err(why)) | Ok(Ok(why)) => panic!("expected an error, got {why}"),
    }
}

#[test]
fn non_h264_caps_are_refused_at_negotiation() {
    let port = free_udp_port();
    // appsrc links to anything, so the raw caps only meet moqsink at negotiation.
    let pipeline = launch(&format!(
        "appsrc name=src format=time caps=video/x-raw,format=I420,width=64,height=64,framerate=1/1 \
         ! moqsink listen=127.0.0.1:{port}"
    ));
    let appsrc = pipeline
        .by_name("src")
        .and_downcast::<gst_app::AppSrc>()
        .expect("appsrc");
    pipeline.set_state(gst::State::Playing).expect("plays");
    let mut raw = gst::Buffer::with_size(64 * 64 * 3 / 2).unwrap();
    raw.get_mut().unwrap().set_pts(gst::ClockTime::ZERO);
    let flow = appsrc.push_buffer(raw);
    let err = first_error(&pipeline, WAIT);
    assert!(
        err.to_lowercase().contains("negotiat"),
        "{err} (push: {flow:?})"
    );
}

#[test]
fn access_units_before_the_first_keyframe_are_dropped_with_a_warning() {
    init();
    // Encode 60 AUs once, then publish them starting from the fourth (not a keyframe).
    let encoder = launch(&format!(
        "videotestsrc pattern=ball num-buffers=60 ! {TEST_CAPS} ! {TEST_ENCODER},stream-format=byte-stream ! appsink name=out sync=false"
    ));
    let encoder_sink = encoder
        .by_name("out")
        .and_downcast::<gst_app::AppSink>()
        .expect("appsink");
    encoder
        .set_state(gst::State::Playing)
        .expect("encoder plays");
    let mut samples = Vec::new();
    while let Ok(sample) = encoder_sink.pull_sample() {
        samples.push(sample);
    }
    encoder.set_state(gst::State::Null).unwrap();
    assert_eq!(samples.len(), 60, "encoder produced every frame");
    let caps = samples[0].caps().expect("caps").to_owned();

    let port = free_udp_port();
    let sender = launch(&format!(
        "appsrc name=src format=time is-live=true ! moqsink name=sink sync=false listen=127.0.0.1:{port}"
    ));
    let appsrc = sender
        .by_name("src")
        .and_downcast::<gst_app::AppSrc>()
        .expect("appsrc");
    appsrc.set_caps(Some(&caps));
    sender.set_state(gst::State::Playing).expect("sender plays");
    let fingerprint: String = sender
        .by_name("sink")
        .unwrap()
        .property::<Option<String>>("tls-fingerprint")
        .unwrap();
    let receiver = Receiver::start(&format!(
        "url=moqt://127.0.0.1:{port}/live tls-fingerprint={fingerprint}"
    ));
    // Give the receiver time to subscribe before the first keyframe goes out.
    std::thread::sleep(Duration::from_millis(1500));
    let keys: Vec<bool> = samples
        .iter()
        .map(|s| {
            !s.buffer()
                .unwrap()
                .flags()
                .contains(gst::BufferFlags::DELTA_UNIT)
        })
        .collect();
    assert!(
        keys[0] && !keys[3],
        "the stream starts with a keyframe, AU 3 is not one"
    );
    for sample in &samples[3..] {
        appsrc
            .push_buffer(sample.buffer_owned().unwrap())
            .expect("push");
        std::thread::sleep(Duration::from_millis(40));
    }
    appsrc.end_of_stream().expect("eos");
    let bus = sender.bus().unwrap();
    let warning = wait_bus(&bus, WAIT, |m| match m.view() {
        gst::MessageView::Warning(w) => Some(w.error().to_string()),
        _ => None,
    })
    .expect("moqsink warns about the leading AUs");
    assert!(warning.contains("keyframe"), "{warning}");
    wait_eos(&sender, WAIT).expect("sender EOS");
    wait_eos(&receiver.pipeline, WAIT).expect("receiver EOS");
    let frames = receiver.frames();
    let first_key = keys
        .iter()
        .skip(3)
        .position(|k| *k)
        .expect("a later keyframe") as u64;
    assert_eq!(
        frames.len() as u64,
        60 - 3 - first_key,
        "everything from the first keyframe on"
    );
    assert!(frames[0].key);
    assert_eq!(
        frames[0].decode_index, 0,
        "dropped AUs take no decode index"
    );
    assert_eq!(receiver.decoded(), frames.len());
    sender.set_state(gst::State::Null).unwrap();
}

#[test]
fn an_unreachable_publisher_is_an_error_naming_the_url_after_the_timeout() {
    let port = free_udp_port();
    let url = format!("moqt://127.0.0.1:{port}/live");
    let pipeline = launch(&format!(
        "moqsrc url={url} tls-insecure=true timeout=2 ! fakesink"
    ));
    let started = Instant::now();
    let err = first_error(&pipeline, WAIT);
    let took = started.elapsed();
    assert!(err.contains(&url), "{err}");
    assert!(
        took >= Duration::from_secs(1),
        "gave up too early: {took:?}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

#[test]
fn a_wrong_fingerprint_is_refused() {
    let sender = Sender::start("");
    let pipeline = launch(&format!(
        "moqsrc url={} tls-fingerprint={} timeout=2 ! fakesink",
        sender.url(),
        "ab".repeat(32)
    ));
    let err = first_error(&pipeline, WAIT);
    assert!(err.contains(&sender.url()), "{err}");
}

#[test]
fn a_vanished_publisher_is_an_error_not_a_hang() {
    let sender = Sender::start("");
    let receiver = Receiver::start(&format!(
        "url={} tls-fingerprint={}",
        sender.url(),
        sender.fingerprint()
    ));
    receiver.wait_frames(10, WAIT).expect("plays");
    drop(sender);
    let err = wait_eos(&receiver.pipeline, WAIT).expect_err("an error, not EOS");
    assert!(err.contains("127.0.0.1"), "{err}");
}

#[test]
fn invalid_settings_fail_at_start_with_clear_errors() {
    let cases = [
        ("moqsrc ! fakesink", "no url"),
        (
            "moqsrc url=http://x:1/live tls-insecure=true ! fakesink",
            "moqt://",
        ),
        (
            "moqsrc url=moqt://127.0.0.1:9/live ! fakesink",
            "tls-fingerprint",
        ),
        (
            "moqsrc url=moqt://127.0.0.1:9/live tls-fingerprint=xyz ! fakesink",
            "fingerprint",
        ),
        (
            "videotestsrc ! x264enc ! moqsink listen=nonsense",
            "listen address",
        ),
        (
            "videotestsrc ! x264enc ! moqsink tls-cert-file=/nonexistent.pem tls-key-file=/nonexistent.key",
            "nonexistent.pem",
        ),
    ];
    for (description, expected) in cases {
        let pipeline = launch(description);
        let err = match pipeline.set_state(gst::State::Playing) {
            Ok(_) => first_error(&pipeline, WAIT),
            Err(_) => {
                let bus = pipeline.bus().unwrap();
                let err = wait_bus(&bus, WAIT, |_| None::<()>).expect_err("an error message");
                let _ = pipeline.set_state(gst::State::Null);
                err
            }
        };
        assert!(err.contains(expected), "{description}: {err}");
    }
}
