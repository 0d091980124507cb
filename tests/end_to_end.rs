//! moqsink → moqsrc on loopback: live H.264 in, decoded pictures out.

mod common;

use common::*;
use gst::prelude::*;

/// Sends two seconds with moqsink `sink_props` to one receiver and ends the stream: the
/// sender and the receiver, which has reached EOS.
fn play_two_seconds(sink_props: &str) -> (Sender, Receiver) {
    let sender = Sender::start(sink_props);
    let receiver = Receiver::of(&sender);
    receiver
        .wait_frames(48, WAIT)
        .expect("two seconds of frames");
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("EOS reaches the receiver");
    (sender, receiver)
}

#[test]
fn every_frame_after_joining_is_decoded_in_order() {
    let (sender, receiver) = play_two_seconds("");
    assert_complete_delivery(&sender.sent(), &receiver);
}

/// moq-dev's format between our elements: every frame, B-frames included (their decode
/// times derived per group from the order they come in), and the availability meta from the
/// catalog's clock.
#[test]
fn the_hang_format_plays_every_frame_on_our_moqsrc() {
    let (sender, receiver) = play_two_seconds("format=hang");
    assert_complete_hang_delivery(&sender.sent(), &receiver);
    let frames = receiver.frames();
    assert!(frames.iter().all(|f| f.availability.is_some()));
    let latency = frames.last().and_then(|f| f.latency()).unwrap();
    assert!(latency.as_secs() < 2, "latency {latency:?}");
}

/// The three stages of a frame's delay are each visible: moqsink's `object-handoff` says
/// when QUIC took it, moqsrc's `timestamp/x-moq-received` meta when it arrived whole, and
/// the buffer leaves moqsrc after that; in that order, after the frame was available.
#[test]
fn a_frames_delay_splits_into_handoff_flight_and_reorder_stages() {
    let sender = Sender::start("signal-object-handoffs=true");
    let handoffs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = handoffs.clone();
    sender.sink.connect("object-handoff", false, move |values| {
        let track = values[1].get::<String>().unwrap();
        let times = (
            values[4].get::<u64>().unwrap(),
            values[5].get::<u64>().unwrap(),
        );
        record.lock().unwrap().push((track, times));
        None
    });
    let receiver = Receiver::of(&sender);
    receiver
        .wait_frames(48, WAIT)
        .expect("two seconds of frames");
    let handoffs = handoffs.lock().unwrap().clone();
    let video: Vec<(u64, u64)> = handoffs
        .iter()
        .filter(|(track, _)| track == "video")
        .map(|(_, times)| *times)
        .collect();
    assert!(video.len() >= 48, "{} video hand-offs", video.len());
    assert!(handoffs.iter().any(|(track, _)| track == "catalog"));
    let us = |t: gst::ClockTime| t.useconds();
    let mut matched = 0;
    for frame in receiver.frames() {
        let availability = us(frame.availability.expect("availability meta"));
        let received = us(frame.received.expect("received meta"));
        let output = frame.output_unix.as_micros() as u64;
        assert!(availability <= received && received <= output, "{frame:?}");
        // Its hand-off: the one written nearest to when the frame became available (same
        // clock), within 20 ms, under half the 41 ms between frames: on a busy machine
        // moqsink may write it several ms late.
        if let Some(&(written, taken)) = video
            .iter()
            .filter(|(written, _)| written.abs_diff(availability) < 20_000)
            .min_by_key(|(written, _)| written.abs_diff(availability))
        {
            assert!(
                written <= taken && taken <= received,
                "{frame:?} {written} {taken}"
            );
            matched += 1;
        }
    }
    assert!(matched >= 48, "{matched} frames matched to their hand-off");
}

#[test]
fn two_subscribers_both_decode_everything() {
    let sender = Sender::start("");
    let props = format!(
        "url={} tls-fingerprint={}",
        sender.url(),
        sender.fingerprint()
    );
    let first = Receiver::start(&props);
    let second = Receiver::start(&props);
    first.wait_frames(30, WAIT).expect("first receiver plays");
    second.wait_frames(30, WAIT).expect("second receiver plays");
    sender.finish();
    for receiver in [&first, &second] {
        wait_eos(&receiver.pipeline, WAIT).expect("EOS reaches every receiver");
        assert_complete_delivery(&sender.sent(), receiver);
    }
}

#[test]
fn a_late_joiner_starts_at_the_next_keyframe() {
    let sender = Sender::start("");
    let props = format!(
        "url={} tls-fingerprint={}",
        sender.url(),
        sender.fingerprint()
    );
    let early = Receiver::start(&props);
    early.wait_frames(20, WAIT).expect("early receiver plays");
    let late = Receiver::start(&props);
    late.wait_frames(20, WAIT).expect("late receiver plays");
    sender.finish();
    wait_eos(&late.pipeline, WAIT).expect("EOS");
    let frames = late.frames();
    assert!(frames[0].decode_index > 0, "joined mid-stream");
    assert_complete_delivery(&sender.sent(), &late);
    wait_eos(&early.pipeline, WAIT).expect("EOS reaches the early receiver too");
}

#[test]
fn after_a_pause_playback_resumes_at_the_live_edge() {
    let sender = Sender::start("");
    let receiver = Receiver::of(&sender);
    receiver.wait_frames(24, WAIT).expect("plays");
    receiver.pipeline.set_state(gst::State::Paused).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(5));
    let before = receiver.frames().len();
    let resumed_at = unix_now();
    receiver.pipeline.set_state(gst::State::Playing).unwrap();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("plays again");
    let frames = receiver.frames();
    let first = &frames[before];
    let captured = std::time::Duration::from_nanos(first.availability.unwrap().nseconds());
    let age = resumed_at.as_secs_f64() - captured.as_secs_f64();
    eprintln!("first frame after the pause was captured {age:.3} s before the resume");
    assert!(first.key && first.discont, "resumes at a keyframe, DISCONT");
    // Stale media from before the pause would be over 5 s old.
    assert!(age < 1.0, "resumed with media {age:.3} s old");
    // Then plays on at 1×: the frames after it follow in order.
    for (i, f) in frames[before..].iter().enumerate().skip(1) {
        assert_eq!(f.decode_index, first.decode_index + i as u64);
    }
}

/// Draft-16 and draft-14 both play; the server's choice among what the client offers is the
/// one used, and moqsrc reports it in `moq-connected`.
#[test]
fn every_draft_plays_and_moqsrc_reports_the_one_in_use() {
    for (sink_versions, src_versions, expected) in [
        ("16,14", "16,14", 16),
        ("14", "16,14", 14),
        ("16,14", "14", 14),
        ("14,16", "16,14", 14),
        ("20", "20", 20),
        ("22", "22", 22),
        ("22,20,16,14", "20,14", 20),
        ("20,22", "22,20,16", 20),
    ] {
        let sender = Sender::start(&format!("versions={sink_versions}"));
        let receiver = Receiver::start(&format!(
            "url={} tls-insecure=true versions={src_versions}",
            sender.url()
        ));
        receiver
            .wait_frames(24, WAIT)
            .unwrap_or_else(|e| panic!("sink {sink_versions}, src {src_versions}: {e}"));
        let messages = receiver.messages.lock().unwrap().clone();
        assert!(
            messages.contains(&format!("moq-connected draft={expected}")),
            "sink {sink_versions}, src {src_versions}: {messages:?}"
        );
    }
}

/// One library registers both elements, and however many of them a process runs, their
/// network tasks share one runtime: its worker threads, no more (two runtimes, one per
/// element, would show twice as many).
#[test]
fn one_plugin_registers_both_elements_on_one_shared_runtime() {
    init();
    let features: Vec<String> = gst::Registry::get()
        .features_by_plugin("moqt")
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    assert!(
        features.contains(&"moqsink".to_owned()) && features.contains(&"moqsrc".to_owned()),
        "plugin moqt registers {features:?}"
    );
    let senders = [Sender::start(""), Sender::start("")];
    let receivers: Vec<Receiver> = senders.iter().map(Receiver::of).collect();
    for receiver in &receivers {
        receiver.wait_frames(24, WAIT).expect("plays");
    }
    let runtime_threads = std::fs::read_dir("/proc/self/task")
        .expect("the process's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == moq_session::blocking::RUNTIME_THREAD_NAME)
        .count();
    assert_eq!(
        runtime_threads,
        moq_session::blocking::RUNTIME_WORKERS,
        "threads named {:?} with two moqsinks and two moqsrcs playing",
        moq_session::blocking::RUNTIME_THREAD_NAME
    );
}

/// A launch line with the old property names still works: each sets its new property,
/// converted (seconds to ms, guint to guint64), reads back as before, and each instance
/// warns once per old name on the bus when it starts.
#[test]
fn old_property_names_still_work_and_warn_once() {
    init();
    let pipeline = launch(
        "videotestsrc is-live=true ! x264enc ! h264parse ! moqsink name=sink listen=127.0.0.1:0 \
         subscriber-timeout=3 target-max-bitrate=900000 \
         moqsrc name=src url=moqt://127.0.0.1:9/live timeout=5 max-bitrate=700000 ! fakesink",
    );
    let sink = pipeline.by_name("sink").unwrap();
    let src = pipeline.by_name("src").unwrap();
    assert_eq!(sink.property::<u32>("subscriber-stall-timeout"), 3000);
    assert_eq!(sink.property::<u64>("encoder-max-bitrate"), 900_000);
    assert_eq!(src.property::<u32>("media-timeout"), 5000);
    assert_eq!(src.property::<u64>("abr-max-bitrate"), 700_000);
    assert_eq!(sink.property::<u32>("subscriber-timeout"), 3);
    assert_eq!(src.property::<u32>("max-bitrate"), 700_000);
    let warnings = || {
        let bus = pipeline.bus().unwrap();
        std::iter::from_fn(|| bus.pop_filtered(&[gst::MessageType::Warning]))
            .filter_map(|m| match m.view() {
                gst::MessageView::Warning(w) => Some(w.error().to_string()),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    pipeline.set_state(gst::State::Ready).unwrap();
    let first = warnings();
    eprintln!("{first:#?}");
    for old in [
        "subscriber-timeout",
        "target-max-bitrate",
        "timeout",
        "max-bitrate",
    ] {
        assert_eq!(
            first
                .iter()
                .filter(|w| w.starts_with(&format!("property {old} ")))
                .count(),
            1,
            "one warning for {old}: {first:?}"
        );
    }
    assert!(
        first
            .iter()
            .any(|w| w.contains("use media-timeout (milliseconds)")),
        "the warning names the new property and its unit: {first:?}"
    );
    pipeline.set_state(gst::State::Null).unwrap();
    pipeline.set_state(gst::State::Ready).unwrap();
    assert!(warnings().is_empty(), "warned once per instance");
    pipeline.set_state(gst::State::Null).unwrap();
}
