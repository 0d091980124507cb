//! moqsrc's playout offset comes back down: through a path whose delay falls (a fixed
//! playout keeps the latency it started with, an adaptive one gives it back), and after a
//! rate-controlled encoder started above its link. The runs compared go side by side,
//! each through its own link emulator with the same profile.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

const RUN: Duration = Duration::from_secs(25);

/// 400 ms each way for the first 5 s (a path that starts congested), then 20 ms.
const FALLING_DELAY: &str = r#"{"name": "falling-delay", "queue_bytes": 500000, "steps": [
    {"duration_s": 5, "rate_kbit": 0, "delay_ms": 400},
    {"duration_s": 55, "rate_kbit": 0, "delay_ms": 20}]}"#;

/// A viewer rendering with `fakesink sync=true`: latency of every frame it renders.
struct Viewer {
    pipeline: gst::Pipeline,
    /// (s since the viewer started, latency s) per rendered frame.
    latencies: Arc<Mutex<Vec<(f64, f64)>>>,
    _link: linkem::Link,
}

fn viewer(sender: &Sender, playout: &str) -> Viewer {
    let profile = linkem::Profile::from_json_str(FALLING_DELAY).expect("profile");
    viewer_through(sender.port, &sender.fingerprint(), profile, playout)
}

/// A viewer of the moqsink listening at `port` through a link emulator following
/// `profile`.
fn viewer_through(port: u16, fingerprint: &str, profile: linkem::Profile, playout: &str) -> Viewer {
    let link = link_to(port, Some(profile));
    let pipeline = launch(&format!(
        "moqsrc name=src url=moqt://{}/live tls-fingerprint={fingerprint} playout={playout} \
         ! h264parse ! avdec_h264 ! fakesink name=out sync=true signal-handoffs=true",
        link.local_addr(),
    ));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let record = latencies.clone();
    let started = Instant::now();
    let unix = gst::Caps::new_empty_simple("timestamp/x-unix");
    pipeline
        .by_name("out")
        .unwrap()
        .connect("handoff", false, move |values| {
            let buffer = values[1].get::<gst::Buffer>().expect("buffer");
            if let Some(meta) = buffer
                .iter_meta::<gst::ReferenceTimestampMeta>()
                .find(|m| m.reference().can_intersect(&unix))
            {
                let latency =
                    unix_now().saturating_sub(Duration::from_nanos(meta.timestamp().nseconds()));
                record
                    .lock()
                    .unwrap()
                    .push((started.elapsed().as_secs_f64(), latency.as_secs_f64()));
            }
            None
        });
    pipeline.set_state(gst::State::Playing).expect("plays");
    Viewer {
        pipeline,
        latencies,
        _link: link,
    }
}

impl Viewer {
    /// Latencies (ms) of the frames rendered from `from` s to `to` s, in order.
    fn latencies_between_ms(&self, from: f64, to: f64) -> Vec<f64> {
        let mut window: Vec<f64> = self
            .latencies
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, l)| l * 1000.0)
            .collect();
        window.sort_by(f64::total_cmp);
        window
    }

    /// Mean latency (ms) of the frames rendered from `from` s to `to` s.
    fn mean_latency_between_ms(&self, from: f64, to: f64) -> f64 {
        let window = self.latencies_between_ms(from, to);
        assert!(window.len() > 50, "{} frames rendered", window.len());
        window.iter().sum::<f64>() / window.len() as f64
    }

    /// Mean latency (ms) of the frames rendered from `from` s on.
    fn mean_latency_ms(&self, from: f64) -> f64 {
        self.mean_latency_between_ms(from, f64::MAX)
    }

    /// Median latency (ms) of the frames rendered from `from` s on.
    fn median_latency_ms(&self, from: f64) -> f64 {
        let window = self.latencies_between_ms(from, f64::MAX);
        assert!(window.len() > 50, "{} frames rendered", window.len());
        window[window.len() / 2]
    }

    fn stats(&self) -> gst::Structure {
        self.pipeline.by_name("src").unwrap().property("stats")
    }
}

#[test]
fn adaptive_playout_gives_back_latency_a_fixed_one_keeps() {
    init();
    let sender = Sender::start_with_encoder(
        "",
        "x264enc tune=zerolatency bitrate=400 key-int-max=24 speed-preset=ultrafast \
         ! h264parse ! video/x-h264,alignment=au",
    );
    let fixed = viewer(&sender, "fixed");
    let adaptive = viewer(&sender, "adaptive");
    let playout_messages = Arc::new(Mutex::new(0usize));
    let count = playout_messages.clone();
    adaptive
        .pipeline
        .bus()
        .unwrap()
        .set_sync_handler(move |_, msg| {
            if let gst::MessageView::Element(e) = msg.view()
                && e.structure().is_some_and(|s| s.name() == "moq-playout")
            {
                *count.lock().unwrap() += 1;
            }
            gst::BusSyncReply::Pass
        });
    std::thread::sleep(RUN);
    let (fixed_ms, adaptive_ms) = (fixed.mean_latency_ms(17.0), adaptive.mean_latency_ms(17.0));
    let (fixed_stats, adaptive_stats) = (fixed.stats(), adaptive.stats());
    for v in [&fixed, &adaptive] {
        v.pipeline.set_state(gst::State::Null).unwrap();
    }
    sender.pipeline.set_state(gst::State::Null).unwrap();
    eprintln!(
        "latency over the last 8 s: fixed {fixed_ms:.0} ms, adaptive {adaptive_ms:.0} ms\n  \
         fixed {fixed_stats}\n  adaptive {adaptive_stats}"
    );
    // The path's delay fell by 380 ms after 5 s: the fixed playout keeps it.
    assert!(
        adaptive_ms < fixed_ms - 250.0,
        "adaptive {adaptive_ms:.0} ms against fixed {fixed_ms:.0} ms"
    );
    // Given back gradually, not by jumping.
    assert_eq!(adaptive_stats.get::<u64>("jumps").unwrap(), 0);
    assert!(adaptive_stats.get::<f64>("playout-drained-ms").unwrap() > 250.0);
    assert_eq!(fixed_stats.get::<f64>("playout-target-ms").unwrap(), -1.0);
    assert!(*playout_messages.lock().unwrap() >= 1, "moq-playout posted");
}

/// A 320x240 stream x264 holds at its target rate (a noise patch over a moving ball),
/// encoded as the README's publish line does (B-frames, x264's default lookahead), its
/// bitrate driven by moqsink from `start_kbit`. The pipeline and where it listens.
fn rate_controlled(start_kbit: u64) -> (gst::Pipeline, u16, String) {
    let pipeline = launch(&format!(
        "compositor name=mix sink_1::xpos=100 sink_1::ypos=80 \
         ! video/x-raw,format=I420,width=320,height=240,framerate=24/1 \
         ! x264enc bitrate={start_kbit} bframes=3 key-int-max=15 speed-preset=veryfast option-string=scenecut=0 \
         ! h264parse ! moqsink name=sink listen=127.0.0.1:0 rate-control=encoder \
           encoder-min-bitrate=100000 encoder-max-bitrate=1500000 encoder-start-bitrate={} \
         videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,width=320,height=240,framerate=24/1 ! mix.sink_0 \
         videotestsrc is-live=true pattern=snow ! video/x-raw,format=I420,width=96,height=96,framerate=24/1 ! mix.sink_1",
        start_kbit * 1000
    ));
    let sink = pipeline.by_name("sink").expect("moqsink");
    let fingerprint = certificate_fingerprint(&pipeline, &sink);
    let port = play_listening(&pipeline, &sink);
    (pipeline, port, fingerprint)
}

/// How long the streams of the rate-controlled comparison run, s: the latency after 20 s
/// is compared over the rest, long enough that a probe up (a few hundred ms of queue on
/// either stream, now and then) does not decide it.
const RECOVERY_RUN_S: u64 = 30;

#[test]
fn a_stream_started_above_its_link_comes_back_to_the_latency_of_one_started_below() {
    init();
    const LINK_KBIT: u64 = 400;
    let constant = || linkem::Profile::constant(LINK_KBIT, 60_000);
    // 1.5 times the link, and 0.7 times.
    let (above, above_port, above_fingerprint) = rate_controlled(LINK_KBIT * 3 / 2);
    let (below, below_port, below_fingerprint) = rate_controlled(LINK_KBIT * 7 / 10);
    let (v_above, v_below) = (
        viewer_through(above_port, &above_fingerprint, constant(), "adaptive"),
        viewer_through(below_port, &below_fingerprint, constant(), "adaptive"),
    );
    // The target each moqsink sets, once a second: what a failing run is read with.
    let target = |p: &gst::Pipeline| {
        let stats: gst::Structure = p.by_name("sink").unwrap().property("stats");
        stats.get::<u64>("target-bitrate").unwrap_or(0) / 1000
    };
    let targets: Vec<(u64, u64)> = (0..RECOVERY_RUN_S)
        .map(|_| {
            std::thread::sleep(Duration::from_secs(1));
            (target(&above), target(&below))
        })
        .collect();
    let (above_ms, below_ms) = (
        v_above.median_latency_ms(20.0),
        v_below.median_latency_ms(20.0),
    );
    let early_above = v_above.mean_latency_between_ms(0.0, 5.0);
    let per_second = |v: &Viewer| -> String {
        (0..RECOVERY_RUN_S)
            .map(|s| {
                let w = v.latencies_between_ms(s as f64, (s + 1) as f64);
                format!("{:.0}", w.iter().sum::<f64>() / w.len().max(1) as f64)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (stats, below_stats) = (v_above.stats(), v_below.stats());
    for v in [&v_above, &v_below] {
        v.pipeline.set_state(gst::State::Null).unwrap();
    }
    for s in [&above, &below] {
        s.set_state(gst::State::Null).unwrap();
    }
    eprintln!(
        "median latency from 20 s on: started above {above_ms:.0} ms (mean over the first 5 s \
         {early_above:.0} ms), started below {below_ms:.0} ms\n  mean per second (ms), above: {}\n  \
         below: {}\n  targets (kbit/s, above/below): {targets:?}\n  above {stats}\n  below {below_stats}",
        per_second(&v_above),
        per_second(&v_below),
    );
    assert!(
        above_ms <= below_ms + 50.0,
        "started above: {above_ms:.0} ms, below: {below_ms:.0} ms"
    );
}
