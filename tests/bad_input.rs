//! Bad input gets a clear outcome: refused caps, dropped leading AUs, errors naming the
//! URL for unreachable or vanished peers, and no hang anywhere.

mod common;

use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

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
    // Linked to a requested pad by name, so the raw caps only meet moqsink at negotiation,
    // where upstream finds nothing in common with the pad.
    let pipeline = launch(
        "appsrc name=src format=time caps=video/x-raw,format=I420,width=64,height=64,framerate=1/1 \
         ! sink.video_0 moqsink name=sink listen=127.0.0.1:0",
    );
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

/// The first warning moqsink posted, if any within `timeout`.
fn sink_warning(sender: &AppSender, timeout: Duration) -> Option<String> {
    let bus = sender.pipeline.bus().unwrap();
    wait_bus(&bus, timeout, |m| match m.view() {
        gst::MessageView::Warning(w) => Some(w.error().to_string()),
        _ => None,
    })
    .ok()
}

/// Pushes AUs one by one at about the frame rate.
fn publish(sender: &AppSender, aus: &[EncodedAu]) {
    for au in aus {
        sender.push(&au.data, au.pts_us, au.dts_us, au.key);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn subscribe(sender: &AppSender) -> Receiver {
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    // Subscribed before what it must see goes out.
    wait_subscribed(&sender.sink, "video");
    receiver
}

#[test]
fn access_units_before_the_first_keyframe_are_dropped_with_a_warning() {
    // Publish 60 AUs starting from the fourth (not a keyframe).
    let aus = encode_aus(60, TEST_CAPS);
    assert!(
        aus[0].key && !aus[3].key,
        "the stream starts with a keyframe, AU 3 is not one"
    );
    let sender = AppSender::start(&h264_caps(320, 240), "");
    let receiver = subscribe(&sender);
    publish(&sender, &aus[3..]);
    let warning = sink_warning(&sender, WAIT).expect("moqsink warns about the leading AUs");
    assert!(warning.contains("keyframe"), "{warning}");
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("receiver EOS");
    let frames = receiver.frames();
    let first_key = aus[3..]
        .iter()
        .position(|a| a.key)
        .expect("a later keyframe");
    assert_eq!(
        frames.len(),
        60 - 3 - first_key,
        "everything from the first keyframe on"
    );
    assert!(frames[0].key);
    assert_eq!(
        frames[0].decode_index, 0,
        "dropped AUs take no decode index"
    );
    assert_eq!(receiver.decoded(), frames.len());
}

/// xorshift64: deterministic noise.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn garbage_and_truncated_access_units_are_dropped_with_a_warning() {
    let aus = encode_aus(60, TEST_CAPS);
    let sender = AppSender::start(&h264_caps(320, 240), "");
    let receiver = subscribe(&sender);
    let mut bad = 0;
    for (i, au) in aus.iter().enumerate() {
        sender.push(&au.data, au.pts_us, au.dts_us, au.key);
        if i % 5 == 2 {
            let junk: Vec<Vec<u8>> = vec![
                // Bytes with no start code at all.
                noise(i as u64 + 1, 500),
                // An access unit cut inside its first NAL units' headers.
                au.data[..au.data.len().min(6)].to_vec(),
                // Random bytes behind an IDR NAL header: not a keyframe.
                [&[0, 0, 0, 1, 0x65][..], &noise(i as u64 + 7, 800)].concat(),
                // Random bytes behind an SEI header: no picture at all.
                [&[0, 0, 1, 0x06][..], &noise(i as u64 + 13, 300)].concat(),
            ];
            for j in junk {
                sender.push(&j, au.pts_us, au.dts_us, false);
                bad += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let warning = sink_warning(&sender, WAIT).expect("moqsink warns about malformed AUs");
    assert!(warning.contains("malformed"), "{warning}");
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("receiver EOS");
    assert_eq!(sender.stat("frames-refused"), bad);
    let frames = receiver.frames();
    eprintln!(
        "{bad} bad AUs refused; {} of 60 good frames received, {} decoded",
        frames.len(),
        receiver.decoded()
    );
    assert_eq!(frames.len(), 60, "every good frame");
    assert_eq!(receiver.decoded(), 60, "and every one decodes");
}

#[test]
fn a_bogus_sps_is_refused_and_later_joiners_still_decode() {
    let aus = encode_aus(75, TEST_CAPS);
    let sender = AppSender::start(&h264_caps(320, 240), "");
    let early = subscribe(&sender);
    // The second keyframe carries an extra SPS that parses but no decoder takes (an
    // undefined level), the way a buggy or hostile upstream might send it.
    let bogus_sps: [u8; 12] = [
        0x67, 0x42, 0x12, 0x50, 0x42, 0x7f, 0x36, 0xef, 0xd0, 0x62, 0x72, 0x40,
    ];
    let second_key = aus
        .iter()
        .skip(1)
        .position(|a| a.key)
        .expect("a second keyframe")
        + 1;
    let mut poisoned = aus.clone();
    poisoned[second_key].data = [&[0, 0, 0, 1][..], &bogus_sps, &aus[second_key].data].concat();
    publish(&sender, &poisoned[..second_key + 5]);
    let warning = sink_warning(&sender, WAIT).expect("moqsink warns");
    assert!(warning.contains("malformed"), "{warning}");
    // A viewer joining after the bogus SPS gets the stream's own parameter sets.
    let late = subscribe(&sender);
    publish(&sender, &poisoned[second_key + 5..]);
    sender.finish();
    wait_eos(&late.pipeline, WAIT).expect("late joiner EOS");
    wait_eos(&early.pipeline, WAIT).expect("early viewer EOS");
    let joined = late.frames();
    eprintln!(
        "late joiner: {} frames, {} decoded; early viewer: {} decoded",
        joined.len(),
        late.decoded(),
        early.decoded()
    );
    assert!(
        joined.len() >= 15,
        "the late joiner got {} frames",
        joined.len()
    );
    assert_eq!(
        late.decoded(),
        joined.len(),
        "the late joiner decodes everything"
    );
    // The refused keyframe's GoP never reached anyone: what the early viewer got decodes.
    assert_eq!(early.decoded(), early.frames().len());
}

#[test]
fn a_resolution_change_mid_stream_keeps_decoding_with_the_new_size() {
    let small = encode_aus(30, TEST_CAPS);
    let large = encode_aus(
        30,
        "video/x-raw,format=I420,width=640,height=480,framerate=24/1",
    );
    let sender = AppSender::start(&h264_caps(320, 240), "");
    let receiver = subscribe(&sender);
    publish(&sender, &small);
    sender.src.set_caps(Some(&h264_caps(640, 480)));
    // The second encoding's timestamps continue after the first one's.
    let offset = small.last().map_or(0, |a| a.pts_us) + 41_667;
    let shifted: Vec<EncodedAu> = large
        .iter()
        .map(|a| EncodedAu {
            pts_us: a.pts_us + offset,
            dts_us: a.dts_us + offset,
            ..a.clone()
        })
        .collect();
    publish(&sender, &shifted);
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("receiver EOS");
    let widths = receiver.widths.lock().unwrap().clone();
    eprintln!(
        "{} frames decoded: {} at 320, {} at 640",
        widths.len(),
        widths.iter().filter(|w| **w == 320).count(),
        widths.iter().filter(|w| **w == 640).count()
    );
    assert_eq!(widths.len(), 60, "every frame of both sizes decoded");
    assert!(widths[..30].iter().all(|w| *w == 320), "{widths:?}");
    assert!(widths[30..].iter().all(|w| *w == 640), "{widths:?}");
}

#[test]
fn an_unreachable_publisher_is_an_error_naming_the_url_after_the_timeout() {
    let silent = silent_udp_socket();
    let url = format!(
        "moqt://127.0.0.1:{}/live",
        silent.local_addr().unwrap().port()
    );
    let pipeline = launch(&format!(
        "moqsrc url={url} tls-insecure=true media-timeout=2000 ! fakesink"
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
        "moqsrc url={} tls-fingerprint={} media-timeout=2000 ! fakesink",
        sender.url(),
        "ab".repeat(32)
    ));
    let err = first_error(&pipeline, WAIT);
    assert!(err.contains(&sender.url()), "{err}");
}

#[test]
fn a_vanished_publisher_is_an_error_not_a_hang() {
    let sender = Sender::start("");
    let receiver = Receiver::of(&sender);
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
            "moqsrc url=moqt://127.0.0.1:9/live tls-ca-file=/nonexistent-ca.pem ! fakesink",
            "nonexistent-ca.pem",
        ),
        (
            "moqsrc url=moqt://127.0.0.1:9/live tls-fingerprint=xyz ! fakesink",
            "fingerprint",
        ),
        (
            "videotestsrc ! x264enc ! h264parse ! moqsink listen=nonsense",
            "listen address",
        ),
        (
            "moqsrc url=moqt://127.0.0.1:9/live versions=15 ! fakesink",
            "unknown MoQ Transport draft",
        ),
        (
            "videotestsrc ! x264enc ! h264parse ! moqsink listen=127.0.0.1:0 versions=,",
            "no MoQ Transport draft",
        ),
        (
            "videotestsrc ! x264enc ! h264parse ! moqsink listen=127.0.0.1:0 url=moqt://127.0.0.1:9/anon/live",
            "both listen",
        ),
        (
            "videotestsrc ! x264enc ! h264parse ! moqsink url=moqt://127.0.0.1:9/",
            "names no broadcast",
        ),
        (
            "videotestsrc ! x264enc ! h264parse ! moqsink tls-cert-file=/nonexistent.pem tls-key-file=/nonexistent.key",
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

#[test]
fn properties_set_while_playing_are_refused_with_a_warning() {
    let sender = Sender::start("");
    let receiver = Receiver::start(&format!(
        "url={} tls-insecure=true latency=100",
        sender.url()
    ));
    receiver.wait_frames(10, WAIT).expect("plays");
    let src = receiver.pipeline.by_name("src").unwrap();
    src.set_property("latency", 900u32);
    assert_eq!(
        src.property::<u32>("latency"),
        100,
        "not taken while playing"
    );
    sender.sink.set_property("max-backlog", 5000u32);
    assert_eq!(sender.sink.property::<u32>("max-backlog"), 3000);
}

#[test]
fn a_draft_the_publisher_does_not_speak_is_an_error() {
    let sender = Sender::start("versions=16");
    let pipeline = launch(&format!(
        "moqsrc url={} tls-insecure=true versions=14 media-timeout=2000 ! fakesink",
        sender.url()
    ));
    let err = first_error(&pipeline, WAIT);
    eprintln!("{err}");
    assert!(err.contains(&sender.url()), "{err}");
    assert!(
        err.contains("we allow 14") && err.contains("speaks 16"),
        "names both sides' drafts: {err}"
    );
}
