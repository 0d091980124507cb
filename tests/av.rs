//! Audio with video: moqsink's request pads to moqsrc's sometimes pads, decoded on both
//! sides, in sync; audio keeps playing while congestion makes the video skip; late
//! joiners, EOS on both pads, AAC, and caps or codecs that cannot be carried.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::av::*;
use common::*;
use gst::prelude::*;

/// Video for the loopback runs: the test pattern with the test encoder.
fn test_video() -> String {
    format!("{TEST_VIDEO} ! {TEST_ENCODER}")
}

fn require(codec: AudioCodec) {
    init();
    for name in codec.elements() {
        assert!(
            gst::ElementFactory::find(name).is_some(),
            "GStreamer element {name} is missing (gstreamer1.0-plugins-bad / -libav)"
        );
    }
}

/// Where the senders listen: a port the system picks ([`AvSender::port`] tells which).
const LISTEN: &str = "listen=127.0.0.1:0";

/// Plays A/V for `seconds`, ends the stream at the sender and checks the receiver's
/// output: both pads reach EOS, ≥ 95 % of either kind of frame after joining, and A/V
/// skew within 40 ms.
fn play_and_check(codec: AudioCodec, seconds: u64) {
    require(codec);
    let sender = AvSender::start(&test_video(), codec, LISTEN);
    let port = sender.port();
    let receiver = AvReceiver::start(
        &format!(
            "url=moqt://127.0.0.1:{port}/live tls-fingerprint={}",
            sender.fingerprint()
        ),
        codec,
    );
    receiver.wait_both(24, WAIT).expect("both tracks play");
    std::thread::sleep(Duration::from_secs(seconds));
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("the receiver reaches EOS");
    let src_stats: gst::Structure = receiver.pipeline.by_name("s").unwrap().property("stats");
    eprintln!("receiver {src_stats}");
    let (video, audio) = (
        receiver.video.lock().unwrap(),
        receiver.audio.lock().unwrap(),
    );
    assert!(video.eos && audio.eos, "EOS on both pads");
    let Skew {
        worst_ms: worst,
        pairs,
    } = skew(&sender, &video, &audio);
    let (sent_video, sent_audio) = (sender.video.lock().unwrap(), sender.audio.lock().unwrap());
    let (v_got, v_sent) = delivered(&sent_video, &video.outputs);
    let (a_got, a_sent) = delivered(&sent_audio, &audio.outputs);
    eprintln!(
        "{codec:?}: video {v_got}/{v_sent} output, {} rendered; audio {a_got}/{a_sent} output, {} \
         rendered; A/V skew over {} pairs: worst {worst:.1} ms",
        video.rendered, audio.rendered, pairs
    );
    assert!(v_got * 100 >= v_sent * 95, "video {v_got}/{v_sent}");
    assert!(a_got * 100 >= a_sent * 95, "audio {a_got}/{a_sent}");
    assert!(video.rendered * 100 >= v_got * 95, "video decoded");
    assert!(audio.rendered * 100 >= a_got * 95, "audio decoded");
    assert!(pairs > 24 * seconds as usize / 2, "pairs to compare");
    assert!(worst <= 40.0, "A/V skew {worst:.1} ms");
}

#[test]
fn opus_and_video_play_in_sync_and_both_pads_reach_eos() {
    play_and_check(AudioCodec::Opus, 6);
}

#[test]
fn aac_and_video_play_in_sync_and_both_pads_reach_eos() {
    play_and_check(AudioCodec::Aac, 6);
}

#[test]
fn a_late_joiner_gets_both_tracks() {
    require(AudioCodec::Opus);
    let sender = AvSender::start(&test_video(), AudioCodec::Opus, LISTEN);
    let port = sender.port();
    let url = format!(
        "url=moqt://127.0.0.1:{port}/live tls-fingerprint={}",
        sender.fingerprint()
    );
    let first = AvReceiver::start(&url, AudioCodec::Opus);
    first.wait_both(24, WAIT).expect("the first viewer plays");
    std::thread::sleep(Duration::from_secs(2));
    let late = AvReceiver::start(&url, AudioCodec::Opus);
    late.wait_both(24, WAIT)
        .expect("the late joiner plays both");
    let (video, audio) = (late.video.lock().unwrap(), late.audio.lock().unwrap());
    let first_video = first.video.lock().unwrap().outputs[0].offset;
    assert!(
        video.outputs[0].offset > first_video,
        "joined later in the stream"
    );
    assert!(video.outputs[0].discont && audio.outputs[0].discont);
}

#[test]
fn video_only_and_audio_only_broadcasts_and_track_choices() {
    require(AudioCodec::Opus);
    // `video-track=none`: only the audio pad appears.
    let sender = AvSender::start(&test_video(), AudioCodec::Opus, LISTEN);
    let port = sender.port();
    let pipeline = launch(&format!(
        "moqsrc name=s url=moqt://127.0.0.1:{port}/live tls-fingerprint={} video-track=none \
         ! opusdec ! fakesink name=out",
        sender.fingerprint()
    ));
    pipeline.set_state(gst::State::Playing).unwrap();
    let bus = pipeline.bus().unwrap();
    let deadline = Instant::now() + WAIT;
    let src = pipeline.by_name("s").unwrap();
    while src.src_pads().is_empty() {
        assert!(Instant::now() < deadline, "no pad");
        if let Some(msg) = bus.timed_pop_filtered(
            gst::ClockTime::from_mseconds(50),
            &[gst::MessageType::Error],
        ) {
            panic!("{msg:?}");
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let names: Vec<String> = src
        .src_pads()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    assert_eq!(names, ["audio_0"]);
    pipeline.set_state(gst::State::Null).unwrap();
    // A named track that is not in the catalog is an error naming it.
    let pipeline = launch(&format!(
        "moqsrc url=moqt://127.0.0.1:{port}/live tls-fingerprint={} audio-track=commentary media-timeout=3000 \
         ! fakesink",
        sender.fingerprint()
    ));
    pipeline.set_state(gst::State::Playing).unwrap();
    let err = wait_eos(&pipeline, WAIT).expect_err("an error");
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(err.contains("audio track \"commentary\""), "{err}");
}

#[test]
fn an_audio_pad_added_while_playing_extends_the_catalog_and_gets_a_pad() {
    require(AudioCodec::Opus);
    let sender = launch(&format!(
        "{TEST_VIDEO} ! {TEST_ENCODER} ! m.video_0 moqsink name=m sync=false {LISTEN}"
    ));
    let sink = sender.by_name("m").unwrap();
    let port = play_listening(&sender, &sink);
    let fingerprint = sink
        .property::<Option<String>>("tls-cert-fingerprint")
        .unwrap();
    let receiver = Receiver::start(&format!(
        "url=moqt://127.0.0.1:{port}/live tls-fingerprint={fingerprint}"
    ));
    receiver.wait_frames(24, WAIT).expect("video plays");
    // An audio branch joins the running sender.
    let audio =
        gst::parse::bin_from_description(&format!("{AV_AUDIO} ! opusenc bitrate=64000"), true)
            .unwrap();
    sender.add(&audio).unwrap();
    let pad = sink.request_pad_simple("audio_%u").expect("an audio pad");
    audio.static_pad("src").unwrap().link(&pad).unwrap();
    audio.sync_state_with_parent().unwrap();
    // moqsrc adds a pad for the track the new catalog lists (gst-launch's delayed links
    // are done by then, so it stays unlinked here: its frames are output and dropped).
    let src = receiver.pipeline.by_name("src").unwrap();
    let audio_output = || -> u64 {
        let stats: gst::Structure = src.property("stats");
        let tracks = stats.get::<gst::Array>("tracks").unwrap();
        tracks
            .iter()
            .filter_map(|t| t.get::<gst::Structure>().ok())
            .find(|t| t.get::<String>("kind").as_deref() == Ok("audio"))
            .map_or(0, |t| t.get::<u64>("frames-output").unwrap())
    };
    let deadline = Instant::now() + WAIT;
    while audio_output() < 48 {
        assert!(
            Instant::now() < deadline,
            "no audio after the pad was added"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let names: Vec<String> = src
        .src_pads()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    assert_eq!(names, ["video_0", "audio_0"]);
    let before = receiver.frames().len();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("video plays on");
    sender.set_state(gst::State::Null).unwrap();
}

/// x264's lookahead (its defaults: 40 frames, ~1.7 s at 24 fps) keeps the first video
/// frame from moqsink long after live audio starts. Audio is published as it comes: its
/// first frame is not held back until a video frame arrives (a sink prerolling would hold
/// it, then let it go with its timing and the catalog clock set late).
#[test]
fn a_live_audio_pad_is_not_held_back_until_the_first_video_frame() {
    require(AudioCodec::Opus);
    let sender = launch(&format!(
        "{TEST_VIDEO} ! x264enc bframes=3 key-int-max=24 ! h264parse ! m.video_0 \
         {AV_AUDIO} ! opusenc bitrate=64000 frame-size=20 ! m.audio_0 \
         moqsink name=m sync=false {LISTEN}"
    ));
    let sink = sender.by_name("m").unwrap();
    let arrivals = |name: &str| Arrivals::record(&sink.static_pad(name).unwrap());
    let audio = arrivals("audio_0");
    let video = arrivals("video_0");
    sender.set_state(gst::State::Playing).unwrap();
    let deadline = Instant::now() + WAIT;
    while video.times().is_empty() || audio.times().len() < 10 {
        assert!(Instant::now() < deadline, "no video or audio at moqsink");
        std::thread::sleep(Duration::from_millis(20));
    }
    sender.set_state(gst::State::Null).unwrap();
    let audio = audio.times();
    let us = |us: i64| Duration::from_micros(us.max(0) as u64);
    let video_after = us(video.times()[0] - audio[0]);
    let longest = us(audio.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0));
    println!(
        "first video frame {video_after:?} after the first audio frame; longest wait \
         between the first {} audio frames {longest:?}",
        audio.len()
    );
    // Without the encoder's delay the test would show nothing.
    assert!(video_after >= Duration::from_millis(600), "{video_after:?}");
    assert!(longest < Duration::from_millis(300), "{longest:?}");
}

/// 600 kbit/s of video and 64 kbit/s of Opus over a 400 kbit/s link: the video skips,
/// the audio (sent before any video) plays on without holes longer than 60 ms.
#[test]
fn audio_plays_on_without_gaps_while_congestion_makes_the_video_skip() {
    require(AudioCodec::Opus);
    let sender = AvSender::start(CONGESTED_VIDEO, AudioCodec::Opus, LISTEN);
    let port = sender.port();
    let fingerprint = sender.fingerprint();
    play_congested(&sender, SocketAddr::from(([127, 0, 0, 1], port)), |link| {
        format!("url=moqt://{link}/live tls-fingerprint={fingerprint}")
    });
}

#[test]
fn caps_moqsink_cannot_carry_are_refused_at_negotiation() {
    init();
    // (caps pushed, what the error says): ADTS is outside the pad's caps, so upstream
    // cannot negotiate; raw AAC without its AudioSpecificConfig gets past the template
    // and moqsink says what is missing.
    for (caps, expected) in [
        (
            "audio/mpeg,mpegversion=4,stream-format=adts,rate=48000,channels=2",
            "not-negotiated",
        ),
        (
            "audio/mpeg,mpegversion=4,stream-format=raw,rate=48000,channels=2",
            "without codec_data",
        ),
    ] {
        let pipeline = launch(&format!(
            "appsrc name=src format=time caps={caps} ! m.audio_0 moqsink name=m {LISTEN}"
        ));
        let appsrc = pipeline
            .by_name("src")
            .and_downcast::<gst_app::AppSrc>()
            .unwrap();
        pipeline.set_state(gst::State::Playing).unwrap();
        let _ = appsrc.push_buffer(gst::Buffer::with_size(64).unwrap());
        let err = wait_eos(&pipeline, WAIT).expect_err("an error");
        pipeline.set_state(gst::State::Null).unwrap();
        assert!(err.contains(expected), "{caps}: {err}");
    }
}
