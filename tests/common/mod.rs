//! Shared helpers for the pipeline tests: plugin registration, free ports, a live H.264
//! sender into moqsink, a decoding receiver behind moqsrc, and bus waits with timeouts.
#![allow(dead_code)] // each test binary uses a different subset

pub mod av;
pub mod ladder;

use std::net::UdpSocket;
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use gst::prelude::*;
use moq_player::playout::VIDEO_DRAIN_SHARE;

/// A small multi-threaded runtime for tests that drive the session crate directly.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The namespace a default `Sender` publishes: `live`.
pub fn live() -> moq_wire::message::TrackNamespace {
    moq_wire::message::TrackNamespace(vec![b"live".to_vec()])
}

/// Upper bound for any single wait in a test.
pub const WAIT: Duration = Duration::from_secs(30);

pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        gst::init().expect("GStreamer initialises");
        gstmoqt::plugin_register_static().expect("moqsink and moqsrc register");
        let missing: Vec<_> = [
            "videotestsrc",
            "x264enc",
            "h264parse",
            "avdec_h264",
            "appsink",
            "appsrc",
        ]
        .into_iter()
        .filter(|name| gst::ElementFactory::find(name).is_none())
        .collect();
        assert!(
            missing.is_empty(),
            "GStreamer elements {missing:?} are missing: install gstreamer1.0-plugins-{{base,good,bad,ugly}} \
             and gstreamer1.0-libav (the README's test command does)"
        );
    });
}

/// The directory of the built plugin library (next to the test binaries' `deps`), for
/// child processes that load them.
pub fn plugin_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    assert!(
        dir.join("libgstmoqt.so").exists(),
        "{} has no libgstmoqt.so: build them first (cargo build --workspace; pipelines/test.sh does)",
        dir.display()
    );
    dir.to_path_buf()
}

/// Runs `command` for `duration`, then kills it; returns what it printed (stdout, then
/// stderr). Output goes to files, not pipes: a chatty child would block on a full pipe.
pub fn run_for(command: &mut std::process::Command, duration: Duration) -> String {
    let dir = scratch_dir("moq-child");
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let file = |p: &std::path::Path| std::fs::File::create(p).expect("an output file");
    let mut child = command
        .stdout(file(&out))
        .stderr(file(&err))
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} does not start: {e}"));
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline && child.try_wait().ok().flatten().is_none() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&out).unwrap_or_default()
        + &std::fs::read_to_string(&err).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    text
}

/// A link emulator on loopback in front of the UDP server at `port`, doing `downstream` to
/// what the server sends (`None`: passing it as it comes).
pub fn link_to(port: u16, downstream: Option<linkem::Profile>) -> linkem::Link {
    linkem::Link::start(linkem::LinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        forward: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        downstream,
        upstream: None,
        seed: 1,
        log: None,
    })
    .expect("link starts")
}

/// A path that delays what the server sends by `ms`, at any rate.
pub fn delay_only(ms: u64) -> linkem::Profile {
    linkem::Profile::from_json_str(&format!(
        r#"{{"name": "{ms} ms", "queue_bytes": 500000,
            "steps": [{{"duration_s": 600, "rate_kbit": 0, "delay_ms": {ms}}}]}}"#
    ))
    .expect("profile")
}

/// Plays `pipeline`, whose moqsink `sink` has `listen=HOST:0`: the port it listens on.
pub fn play_listening(pipeline: &gst::Pipeline, sink: &gst::Element) -> u16 {
    pipeline
        .set_state(gst::State::Playing)
        .expect("sender plays");
    listening_port(sink)
}

/// Polls `ready` every 20 ms until it holds; panics naming `what` after [`WAIT`].
pub fn wait_until(what: &str, ready: impl FnMut() -> bool) {
    wait_until_explained(what, ready, String::new);
}

/// [`wait_until`], and when it panics, says what `state` tells of where things stood, so
/// a wait that timed out can be traced.
pub fn wait_until_explained(
    what: &str,
    mut ready: impl FnMut() -> bool,
    state: impl Fn() -> String,
) {
    let deadline = std::time::Instant::now() + WAIT;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {WAIT:?}; {}",
            state()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a session subscribes to `track` of moqsink `sink`: what it publishes from
/// then on reaches that subscriber.
pub fn wait_subscribed(sink: &gst::Element, track: &str) {
    wait_until(&format!("a subscriber to {track}"), || {
        let stats: gst::Structure = sink.property("stats");
        stats
            .get::<gst::Array>("tracks")
            .ok()
            .is_some_and(|tracks| {
                tracks.iter().any(|t| {
                    t.get::<gst::Structure>().is_ok_and(|t| {
                        t.get::<&str>("name") == Ok(track)
                            && t.get::<u64>("subscribers").unwrap_or(0) > 0
                    })
                })
            })
    });
}

/// Waits until moqsink `sink`, publishing through a relay, is announced there.
pub fn wait_announced(sink: &gst::Element) {
    wait_until("announced on the relay", || {
        let stats: gst::Structure = sink.property("stats");
        stats.get::<u32>("subscribers").unwrap_or(0) > 0
    });
}

/// The port a started moqsink listens on (its `current-port`).
pub fn listening_port(sink: &gst::Element) -> u16 {
    wait_until("moqsink listening", || {
        sink.property::<u32>("current-port") != 0
    });
    u16::try_from(sink.property::<u32>("current-port")).expect("a UDP port")
}

/// A UDP socket on 127.0.0.1 that never answers: a server that is not there, held for as
/// long as the test keeps it so nobody else takes its port.
pub fn silent_udp_socket() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").expect("bind an ephemeral UDP port")
}

/// Binds `port` of a server that is down, silent, until dropped: the system could give a
/// free port to another test's endpoint meanwhile, which this server's viewers would
/// reach, and the server could not listen there again. `None` if it is taken already.
pub fn hold_udp_port(port: u16) -> Option<UdpSocket> {
    UdpSocket::bind(("127.0.0.1", port)).ok()
}

/// A new directory under the system's temporary one, `prefix` and a name no other test
/// of this process uses.
pub fn scratch_dir(prefix: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A [`scratch_dir`] removed when dropped, unless the test is failing: what it holds
/// (a link's log, certificates) is then left for the post-mortem.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    pub fn new(prefix: &str) -> Scratch {
        Scratch(scratch_dir(prefix))
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Raw video every test encodes; I420 keeps x264enc in High profile (not High 4:4:4).
pub const TEST_CAPS: &str = "video/x-raw,format=I420,width=320,height=240,framerate=24/1";
pub const TEST_VIDEO: &str = "videotestsrc is-live=true pattern=ball \
    ! video/x-raw,format=I420,width=320,height=240,framerate=24/1";
pub const TEST_ENCODER: &str = "x264enc bframes=3 key-int-max=15 speed-preset=veryfast \
    ! h264parse ! video/x-h264,alignment=au";

/// One encoded access unit, as h264parse delivers it (byte-stream).
#[derive(Debug, Clone)]
pub struct EncodedAu {
    pub data: Vec<u8>,
    pub key: bool,
    pub pts_us: i64,
    pub dts_us: i64,
    /// Keyframes seen before this one (the GoP it belongs to).
    pub group: u64,
}

/// The longest pause between frames output from `from` (UNIX time) on.
pub fn longest_pause(frames: &[ReceivedFrame], from: Duration) -> Duration {
    frames
        .windows(2)
        .filter(|w| w[1].output_unix > from)
        .map(|w| w[1].output_unix.saturating_sub(w[0].output_unix))
        .max()
        .unwrap_or_default()
}

/// Frames missing between consecutive decode indices, and frames that came out of order
/// (a repeat or a step back).
pub fn skipped_and_repeated(frames: &[ReceivedFrame]) -> (u64, usize) {
    let (mut skipped, mut repeated) = (0, 0);
    for w in frames.windows(2) {
        match w[1].decode_index.cmp(&(w[0].decode_index + 1)) {
            std::cmp::Ordering::Greater => skipped += w[1].decode_index - w[0].decode_index - 1,
            std::cmp::Ordering::Less => repeated += 1,
            std::cmp::Ordering::Equal => {}
        }
    }
    (skipped, repeated)
}

/// The longest pause within each window (what, from, to; UNIX times), as "what: pause".
pub fn pauses_within(
    frames: &[ReceivedFrame],
    windows: &[(String, Duration, Duration)],
) -> Vec<String> {
    windows
        .iter()
        .map(|(what, from, to)| {
            let inside: Vec<_> = frames
                .iter()
                .filter(|f| f.output_unix <= *to)
                .cloned()
                .collect();
            format!("{what}: {:?}", longest_pause(&inside, *from))
        })
        .collect()
}

/// Stops the viewers of a rolling restart and says what each got (printed, one line per
/// viewer, with its longest pause within each window: what, from, to; UNIX times). Returns
/// a line for each viewer that did not get every frame once and in order, no picture twice,
/// no pause over 250 ms from the first window on, on one connection.
pub fn rolling_failures(
    viewers: &[Receiver],
    windows: &[(String, Duration, Duration)],
) -> Vec<String> {
    let mut failures = Vec::new();
    for (i, viewer) in viewers.iter().enumerate() {
        let messages = viewer.messages.lock().unwrap().clone();
        viewer.pipeline.set_state(gst::State::Null).unwrap();
        let frames = viewer.frames();
        let count = |name: &str| messages.iter().filter(|m| *m == name).count();
        let (skipped, repeated) = skipped_and_repeated(&frames);
        let mut pts: Vec<gst::ClockTime> = frames.iter().map(|f| f.pts).collect();
        pts.sort();
        pts.dedup();
        let twice = frames.len() - pts.len();
        let connected = count("moq-connected");
        eprintln!(
            "viewer {i}: {} frames, {skipped} skipped, {repeated} out of order, {twice} pictures \
             twice; longest pause within {:?}; moved {}, connected {connected}",
            frames.len(),
            pauses_within(&frames, windows),
            count("moq-moved"),
        );
        let longest = windows
            .first()
            .map_or(Duration::ZERO, |w| longest_pause(&frames, w.1));
        if longest >= Duration::from_millis(250)
            || skipped > 0
            || repeated > 0
            || twice > 0
            || connected != 1
        {
            failures.push(format!(
                "viewer {i}: longest pause {longest:?}, {skipped} skipped, {repeated} out of \
                 order, {twice} twice, {connected} connections"
            ));
        }
    }
    failures
}

/// Asserts that a viewer played through something on the session it started with (one
/// `moq-connected` in its `messages`), every frame once and in order, with no pause over
/// `bound` after `from` (UNIX time).
pub fn assert_played_through(
    frames: &[ReceivedFrame],
    messages: &[String],
    from: Duration,
    bound: Duration,
) {
    assert_eq!(
        messages.iter().filter(|m| *m == "moq-connected").count(),
        1,
        "kept or moved its session, not reconnected: {messages:?}"
    );
    for w in frames.windows(2) {
        assert_eq!(
            w[1].decode_index,
            w[0].decode_index + 1,
            "every frame once, in order; the element's messages: {messages:?}"
        );
    }
    let longest = longest_pause(frames, from);
    assert!(longest < bound, "a freeze of {longest:?}");
}

/// Parses a pipeline description.
pub fn launch(description: &str) -> gst::Pipeline {
    init();
    gst::parse::launch(description)
        .unwrap_or_else(|e| panic!("{description}: {e}"))
        .downcast::<gst::Pipeline>()
        .expect("a pipeline")
}

/// Encodes `n` frames of a moving test pattern with the test encoder, as byte-stream AUs.
pub fn encode_aus(n: usize, raw_caps: &str) -> Vec<EncodedAu> {
    let pipeline = launch(&format!(
        "videotestsrc pattern=ball num-buffers={n} ! {raw_caps} ! {TEST_ENCODER},stream-format=byte-stream \
         ! appsink name=out sync=false"
    ));
    let sink = pipeline
        .by_name("out")
        .and_downcast::<gst_app::AppSink>()
        .expect("appsink");
    pipeline
        .set_state(gst::State::Playing)
        .expect("encoder plays");
    let mut aus: Vec<EncodedAu> = Vec::new();
    while let Ok(sample) = sink.pull_sample() {
        let buffer = sample.buffer().expect("a buffer");
        let key = !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT);
        let pts = buffer.pts().expect("PTS").useconds() as i64;
        let group = aus.iter().filter(|a| a.key).count() as u64;
        aus.push(EncodedAu {
            data: buffer.map_readable().expect("readable").to_vec(),
            key,
            pts_us: pts,
            dts_us: buffer.dts().map_or(pts, |d| d.useconds() as i64),
            group: if key { group } else { group.saturating_sub(1) },
        });
    }
    pipeline.set_state(gst::State::Null).expect("stops");
    assert_eq!(aus.len(), n, "the encoder produced every frame");
    aus
}

/// Waits on `bus` until `pick` returns something, an ERROR arrives, or `timeout` passes.
pub fn wait_bus<T>(
    bus: &gst::Bus,
    timeout: Duration,
    mut pick: impl FnMut(&gst::Message) -> Option<T>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("timed out after {timeout:?}"));
        }
        let Some(msg) = bus.timed_pop(gst::ClockTime::from_nseconds(left.as_nanos() as u64)) else {
            continue;
        };
        if let Some(found) = pick(&msg) {
            return Ok(found);
        }
        if let gst::MessageView::Error(err) = msg.view() {
            return Err(format!(
                "error from {:?}: {} ({:?})",
                err.src().map(|s| s.path_string()),
                err.error(),
                err.debug()
            ));
        }
    }
}

/// `playbin uri=URI` with fake sinks that sync: what a player application does.
pub fn playbin(uri: &str) -> gst::Element {
    init();
    let sink = || {
        gst::ElementFactory::make("fakesink")
            .property("sync", true)
            .build()
            .unwrap()
    };
    gst::ElementFactory::make("playbin")
        .property("uri", uri)
        .property("video-sink", sink())
        .property("audio-sink", sink())
        .build()
        .unwrap()
}

pub fn wait_eos(pipeline: &gst::Pipeline, timeout: Duration) -> Result<(), String> {
    let bus = pipeline.bus().expect("pipeline has a bus");
    wait_bus(&bus, timeout, |m| {
        matches!(m.view(), gst::MessageView::Eos(_)).then_some(())
    })
}

/// The certificate fingerprint of `sink` (a listening moqsink in `pipeline`): it exists
/// from READY on, so the pipeline is brought there first.
pub fn certificate_fingerprint(pipeline: &gst::Pipeline, sink: &gst::Element) -> String {
    pipeline.set_state(gst::State::Ready).expect("READY");
    sink.property::<Option<String>>("tls-cert-fingerprint")
        .expect("a listening moqsink has a certificate in READY")
}

/// One access unit as it reached moqsink.
#[derive(Debug, Clone)]
pub struct SentAu {
    pub pts: gst::ClockTime,
    pub dts: Option<gst::ClockTime>,
    pub key: bool,
}

/// `TEST_VIDEO ! TEST_ENCODER ! moqsink` with a probe recording every AU the sink gets.
pub struct Sender {
    pub pipeline: gst::Pipeline,
    pub sink: gst::Element,
    pub sent: Arc<Mutex<Vec<SentAu>>>,
    pub port: u16,
}

impl Sender {
    /// On a port the system picks.
    pub fn start(sink_properties: &str) -> Sender {
        Sender::start_on(0, sink_properties)
    }

    /// Like [`start`](Self::start) on a given port (a publisher coming back).
    pub fn start_on(port: u16, sink_properties: &str) -> Sender {
        Sender::launch(Some(port), TEST_ENCODER, sink_properties)
    }

    /// Like [`start`](Self::start) with another encoder description.
    pub fn start_with_encoder(sink_properties: &str, encoder: &str) -> Sender {
        Sender::launch(Some(0), encoder, sink_properties)
    }

    /// A sender that publishes through a relay (`sink_properties` give its `url`).
    pub fn through_relay(sink_properties: &str) -> Sender {
        Sender::launch(None, TEST_ENCODER, sink_properties)
    }

    /// `port`: listen there (0: any free port); `None`: the properties say where to publish.
    fn launch(port: Option<u16>, encoder: &str, sink_properties: &str) -> Sender {
        init();
        let listen = port.map_or(String::new(), |p| format!("listen=127.0.0.1:{p}"));
        let description =
            format!("{TEST_VIDEO} ! {encoder} ! moqsink name=sink {listen} {sink_properties}");
        let pipeline = gst::parse::launch(&description)
            .expect("sender pipeline parses")
            .downcast::<gst::Pipeline>()
            .expect("a pipeline");
        let sink = pipeline.by_name("sink").expect("sink exists");
        let sent = Arc::new(Mutex::new(Vec::new()));
        let record = sent.clone();
        sink.static_pad("video_0").expect("video pad").add_probe(
            gst::PadProbeType::BUFFER,
            move |_, info| {
                if let Some(buffer) = info.buffer() {
                    record.lock().unwrap().push(SentAu {
                        pts: buffer.pts().expect("encoder output has PTS"),
                        dts: buffer.dts(),
                        key: !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
                    });
                }
                gst::PadProbeReturn::Ok
            },
        );
        pipeline
            .set_state(gst::State::Playing)
            .expect("sender plays");
        let port = match port {
            Some(_) => listening_port(&sink),
            None => 0,
        };
        Sender {
            pipeline,
            sink,
            sent,
            port,
        }
    }

    pub fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/live", self.port)
    }

    pub fn fingerprint(&self) -> String {
        self.sink
            .property::<Option<String>>("tls-cert-fingerprint")
            .expect("moqsink has a fingerprint")
    }

    pub fn sent(&self) -> Vec<SentAu> {
        self.sent.lock().unwrap().clone()
    }

    /// Sends EOS and waits for it to leave the sink (subscribers drained).
    pub fn finish(&self) {
        self.pipeline.send_event(gst::event::Eos::new());
        wait_eos(&self.pipeline, WAIT).expect("sender reaches EOS");
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// `appsrc ! moqsink.video_0`: publishes the access units a test hands it, good or bad,
/// without a parser in between.
pub struct AppSender {
    pub pipeline: gst::Pipeline,
    pub sink: gst::Element,
    pub src: gst_app::AppSrc,
    pub port: u16,
}

/// Caps of the test encoder's byte-stream output at `width`×`height`.
pub fn h264_caps(width: u32, height: u32) -> gst::Caps {
    gst::Caps::builder("video/x-h264")
        .field("stream-format", "byte-stream")
        .field("alignment", "au")
        .field("width", width as i32)
        .field("height", height as i32)
        .field("framerate", gst::Fraction::new(24, 1))
        .build()
}

impl AppSender {
    pub fn start(caps: &gst::Caps, sink_properties: &str) -> AppSender {
        let pipeline = launch(&format!(
            "appsrc name=src format=time is-live=true ! sink.video_0 \
             moqsink name=sink sync=false listen=127.0.0.1:0 {sink_properties}"
        ));
        let src = pipeline
            .by_name("src")
            .and_downcast::<gst_app::AppSrc>()
            .expect("appsrc");
        src.set_caps(Some(caps));
        let sink = pipeline.by_name("sink").expect("sink");
        pipeline
            .set_state(gst::State::Playing)
            .expect("sender plays");
        let port = listening_port(&sink);
        AppSender {
            pipeline,
            sink,
            src,
            port,
        }
    }

    pub fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/live", self.port)
    }

    /// Publishes `data` as one access unit with these timestamps (µs).
    pub fn push(&self, data: &[u8], pts_us: i64, dts_us: i64, key: bool) {
        let mut buffer = gst::Buffer::from_slice(data.to_vec());
        let b = buffer.get_mut().expect("a new buffer");
        b.set_pts(gst::ClockTime::from_useconds(pts_us.max(0) as u64));
        b.set_dts(gst::ClockTime::from_useconds(dts_us.max(0) as u64));
        if !key {
            b.set_flags(gst::BufferFlags::DELTA_UNIT);
        }
        self.src.push_buffer(buffer).expect("pushed");
    }

    /// Ends the stream and waits until subscribers have it all.
    pub fn finish(&self) {
        self.src.end_of_stream().expect("EOS");
        wait_eos(&self.pipeline, WAIT).expect("sender reaches EOS");
    }

    pub fn stat(&self, field: &str) -> u64 {
        let stats: gst::Structure = self.sink.property("stats");
        stats.get(field).unwrap_or_else(|e| panic!("{field}: {e}"))
    }
}

impl Drop for AppSender {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// A frame as moqsrc output it.
#[derive(Debug, Clone)]
pub struct ReceivedFrame {
    pub decode_index: u64,
    pub pts: gst::ClockTime,
    pub dts: gst::ClockTime,
    pub key: bool,
    pub discont: bool,
    /// Availability time at the sender, from the `timestamp/x-unix` reference meta.
    pub availability: Option<gst::ClockTime>,
    /// When moqsrc had the object whole, from the `timestamp/x-moq-received` meta.
    pub received: Option<gst::ClockTime>,
    /// When moqsrc output it (Unix time).
    pub output_unix: Duration,
}

impl ReceivedFrame {
    /// Availability at the sender to output by moqsrc (both Unix time, one machine).
    pub fn latency(&self) -> Option<Duration> {
        let availability = self.availability?;
        Some(
            self.output_unix
                .saturating_sub(Duration::from_nanos(availability.nseconds())),
        )
    }
}

/// Wall-clock time, as the availability meta carries it.
pub fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
}

/// Wall-clock time, µs since 1970.
pub fn unix_now_us() -> i64 {
    unix_now().as_micros() as i64
}

/// Every buffer that reached a pad: its running time (`None` without a timestamp or a
/// time segment) and the wall clock then, µs.
#[derive(Clone, Default)]
pub struct Arrivals(Arc<Mutex<Vec<Arrival>>>);

#[derive(Clone, Copy)]
struct Arrival {
    running_us: Option<i64>,
    at_us: i64,
}

impl Arrivals {
    /// Records every buffer reaching `pad` from now on.
    pub fn record(pad: &gst::Pad) -> Arrivals {
        let arrivals = Arrivals::default();
        let record = arrivals.clone();
        pad.add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
            let running = info.buffer().and_then(|b| {
                let segment = pad.sticky_event::<gst::event::Segment>(0)?;
                let segment = segment.segment().downcast_ref::<gst::ClockTime>()?;
                segment.to_running_time(b.pts()?)
            });
            record
                .0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Arrival {
                    running_us: running.map(|r| r.useconds() as i64),
                    at_us: unix_now_us(),
                });
            gst::PadProbeReturn::Ok
        });
        arrivals
    }

    /// When each buffer arrived, wall clock µs.
    pub fn times(&self) -> Vec<i64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|a| a.at_us)
            .collect()
    }

    /// The buffers with a running time: (running time, arrival), µs.
    pub fn stamped(&self) -> Vec<(i64, i64)> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(|a| Some((a.running_us?, a.at_us)))
            .collect()
    }
}

/// `moqsrc ! h264parse ! avdec_h264 ! appsink`, recording moqsrc's video output (at the
/// parser's input: moqsrc's pads come and go with the catalog) and counting decoded
/// pictures.
pub struct Receiver {
    pub pipeline: gst::Pipeline,
    pub frames: Arc<Mutex<Vec<ReceivedFrame>>>,
    pub decoded: Arc<Mutex<usize>>,
    /// Width of every decoded picture, from its caps.
    pub widths: Arc<Mutex<Vec<i32>>>,
    /// Names of the element messages posted so far (`moq-connected` also as
    /// `moq-connected draft=N`, one with a `url` also as `NAME url=URL`, `moq-rendition`
    /// also as `moq-rendition to=NAME reason=WHY`), and `warning from ...` lines.
    pub messages: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    /// A receiver of what `sender` publishes, its certificate pinned.
    pub fn of(sender: &Sender) -> Receiver {
        Receiver::start(&format!(
            "url={} tls-fingerprint={}",
            sender.url(),
            sender.fingerprint()
        ))
    }

    pub fn start(src_properties: &str) -> Receiver {
        init();
        let description = format!(
            "moqsrc name=src {src_properties} ! h264parse name=parse ! avdec_h264 ! appsink name=out sync=false"
        );
        let pipeline = gst::parse::launch(&description)
            .expect("receiver pipeline parses")
            .downcast::<gst::Pipeline>()
            .expect("a pipeline");
        let frames = Arc::new(Mutex::new(Vec::new()));
        let record = frames.clone();
        let unix = gst::Caps::new_empty_simple("timestamp/x-unix");
        let received_caps = gst::Caps::new_empty_simple("timestamp/x-moq-received");
        pipeline
            .by_name("parse")
            .expect("parser exists")
            .static_pad("sink")
            .expect("parser sink pad")
            .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
                if let Some(buffer) = info.buffer() {
                    let meta = |caps: &gst::Caps| {
                        buffer
                            .iter_meta::<gst::ReferenceTimestampMeta>()
                            .find(|m| m.reference().can_intersect(caps))
                            .map(|m| m.timestamp())
                    };
                    let (availability, received) = (meta(&unix), meta(&received_caps));
                    record.lock().unwrap().push(ReceivedFrame {
                        decode_index: buffer.offset(),
                        pts: buffer.pts().expect("moqsrc sets PTS"),
                        dts: buffer.dts().expect("moqsrc sets DTS"),
                        key: !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
                        discont: buffer.flags().contains(gst::BufferFlags::DISCONT),
                        availability,
                        received,
                        output_unix: unix_now(),
                    });
                }
                gst::PadProbeReturn::Ok
            });
        let decoded = Arc::new(Mutex::new(0usize));
        let count = decoded.clone();
        let widths = Arc::new(Mutex::new(Vec::new()));
        let width_of = widths.clone();
        let appsink = pipeline
            .by_name("out")
            .expect("appsink exists")
            .downcast::<gst_app::AppSink>()
            .expect("an appsink");
        appsink.set_callbacks(
            gst_app::AppSinkCallbacks::builder()
                .new_sample(move |sink| {
                    let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                    let width = sample
                        .caps()
                        .and_then(|c| c.structure(0).and_then(|s| s.get::<i32>("width").ok()));
                    width_of.lock().unwrap().push(width.unwrap_or(0));
                    *count.lock().unwrap() += 1;
                    Ok(gst::FlowSuccess::Ok)
                })
                .build(),
        );
        let messages = Arc::new(Mutex::new(Vec::new()));
        let names = messages.clone();
        pipeline
            .bus()
            .expect("bus")
            .set_sync_handler(move |_, msg| {
                match msg.view() {
                    gst::MessageView::Element(e) => {
                        if let Some(s) = e.structure() {
                            let mut names = names.lock().unwrap();
                            names.push(s.name().to_string());
                            if let Ok(draft) = s.get::<u32>("draft") {
                                names.push(format!("{} draft={draft}", s.name()));
                            }
                            if let Ok(url) = s.get::<&str>("url") {
                                names.push(format!("{} url={url}", s.name()));
                            }
                            match (s.get::<&str>("to"), s.get::<&str>("reason")) {
                                (Ok(to), Ok(reason)) => {
                                    names.push(format!("{} to={to} reason={reason}", s.name()))
                                }
                                (Err(_), Ok(reason)) => {
                                    names.push(format!("{} reason={reason}", s.name()))
                                }
                                _ => {}
                            }
                        }
                    }
                    gst::MessageView::Warning(w) => names.lock().unwrap().push(format!(
                        "warning from {}: {}",
                        msg.src().map_or("?".into(), |s| s.name().to_string()),
                        w.error()
                    )),
                    _ => {}
                }
                gst::BusSyncReply::Pass
            });
        pipeline
            .set_state(gst::State::Playing)
            .expect("receiver plays");
        Receiver {
            pipeline,
            frames,
            decoded,
            widths,
            messages,
        }
    }

    /// The bus messages recorded so far that `keep` selects.
    pub fn messages_where(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let messages = self.messages.lock().unwrap();
        messages.iter().filter(|m| keep(m)).cloned().collect()
    }

    pub fn frames(&self) -> Vec<ReceivedFrame> {
        self.frames.lock().unwrap().clone()
    }

    pub fn decoded(&self) -> usize {
        *self.decoded.lock().unwrap()
    }

    /// Waits until moqsrc has output at least `n` frames.
    pub fn wait_frames(&self, n: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let bus = self.pipeline.bus().expect("bus");
        while self.frames.lock().unwrap().len() < n {
            if Instant::now() > deadline {
                return Err(format!(
                    "only {} of {n} frames after {timeout:?}",
                    self.frames.lock().unwrap().len()
                ));
            }
            let msg = bus.timed_pop_filtered(
                gst::ClockTime::from_mseconds(50),
                &[gst::MessageType::Error],
            );
            if let Some(gst::MessageView::Error(err)) = msg.as_ref().map(|m| m.view()) {
                return Err(format!(
                    "receiver error: {} ({:?})",
                    err.error(),
                    err.debug()
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// Checks a receiver's output against what the sender sent: decode order without gaps
/// from the first (key) frame on, every AU from there on delivered and decoded, PTS-DTS
/// preserved, availability meta on every frame.
pub fn assert_complete_delivery(sent: &[SentAu], receiver: &Receiver) {
    let frames = receiver.frames();
    assert!(!frames.is_empty(), "nothing received");
    let first = frames[0].decode_index as usize;
    assert!(frames[0].key, "playback starts at a keyframe");
    assert!(frames[0].discont, "the first buffer is a discontinuity");
    assert!(
        sent[first].key,
        "the first received frame was a keyframe at the sender"
    );
    // PTS spacing is preserved between re-anchoring points (DISCONT buffers), but for
    // what the adaptive playout grows or drains.
    let mut timeline = TimelineCheck::default();
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(
            f.decode_index as usize,
            first + i,
            "decode order without gaps"
        );
        let s = &sent[f.decode_index as usize];
        timeline.follow(f, s.pts, s.dts.unwrap_or(s.pts));
        assert_eq!(f.key, s.key, "frame {} key flag", f.decode_index);
        let sent_cts = s.pts.useconds() as i64 - s.dts.unwrap_or(s.pts).useconds() as i64;
        let recv_cts = f.pts.useconds() as i64 - f.dts.useconds() as i64;
        assert!(
            (sent_cts - recv_cts).abs() <= 2,
            "frame {}: PTS-DTS {sent_cts} µs sent, {recv_cts} µs received",
            f.decode_index
        );
        assert!(
            f.availability.is_some(),
            "frame {} has availability meta",
            f.decode_index
        );
        if i > 0 {
            assert!(f.dts >= frames[i - 1].dts, "DTS never decreases");
        }
    }
    assert_eq!(
        frames.len(),
        sent.len() - first,
        "every AU sent after the subscriber joined arrived"
    );
    assert_eq!(
        receiver.decoded(),
        frames.len(),
        "every received AU decoded"
    );
}

/// How far a received frame's PTS is from where the sender put it, against the frame
/// before: fixed between re-anchoring points (DISCONT buffers), but for what the adaptive
/// playout grows (any amount) or drains (at most [`VIDEO_DRAIN_SHARE`] of the media time).
#[derive(Default)]
pub struct TimelineCheck {
    /// The previous frame's (received PTS − sent PTS) and sent DTS, µs.
    previous: Option<(i64, i64)>,
}

impl TimelineCheck {
    pub fn follow(
        &mut self,
        f: &ReceivedFrame,
        sent_pts: gst::ClockTime,
        sent_dts: gst::ClockTime,
    ) {
        let offset = f.pts.useconds() as i64 - sent_pts.useconds() as i64;
        let sent_dts = sent_dts.useconds() as i64;
        match self.previous {
            Some((previous, previous_dts)) if !f.discont => {
                let step = offset - previous;
                let media = (sent_dts - previous_dts).abs();
                assert!(
                    step >= -((media as f64 * VIDEO_DRAIN_SHARE) as i64) - 2,
                    "frame {}: {} µs closer to the one before than sent ({media} µs apart)",
                    f.decode_index,
                    -step
                );
            }
            _ => {}
        }
        self.previous = Some((offset, sent_dts));
    }
}

/// Like [`assert_complete_delivery`] for a broadcast in the hang format, whose frames
/// carry only a presentation time: after the sender finished, the frames received are the
/// last ones sent, with the same PTS spacing (see [`TimelineCheck`]) and key flags, decode timestamps that never
/// decrease and (once the first GoP showed the reordering) never pass the PTS, no
/// availability meta unless the catalog had a clock, and all of them decoded.
pub fn assert_complete_hang_delivery(sent: &[SentAu], receiver: &Receiver) {
    let frames = receiver.frames();
    assert!(!frames.is_empty(), "nothing received");
    assert!(frames.len() <= sent.len(), "more frames than were sent");
    assert!(
        frames[0].key && frames[0].discont,
        "starts at a keyframe, DISCONT"
    );
    let sent = &sent[sent.len() - frames.len()..];
    let gop = sent[1..]
        .iter()
        .position(|s| s.key)
        .map_or(sent.len(), |p| p + 1);
    let mut timeline = TimelineCheck::default();
    for (i, (f, s)) in frames.iter().zip(sent).enumerate() {
        timeline.follow(f, s.pts, s.pts);
        assert_eq!(f.key, s.key, "frame {i} key flag");
        if i > 0 {
            assert!(f.dts >= frames[i - 1].dts, "frame {i}: DTS decreases");
        }
        if i >= gop {
            assert!(f.dts <= f.pts, "frame {i}: DTS {} > PTS {}", f.dts, f.pts);
        }
    }
    assert_eq!(
        receiver.decoded(),
        frames.len(),
        "every received AU decoded"
    );
}

/// Starts moq-relay with `args` (its own: where to listen, TLS, auth, cluster) and reads
/// from its log where it bound each of `kinds` (`quic`, `http`): the child and the ports in
/// that order, or `None` when it exited or said nothing for [`WAIT`] (a port it was given
/// is taken). The rest of its log, warnings only, is read and dropped.
pub fn start_relay(
    args: &[std::ffi::OsString],
    kinds: &[&str],
) -> Option<(std::process::Child, Vec<u16>)> {
    use std::io::BufRead;
    let mut child = std::process::Command::new(relay_binary())
        .args(args)
        .args(["--iroh-enabled=false", "--log-level", "warn"])
        // The lines saying where it listens, and warnings.
        .env("RUST_LOG", "moq_relay::relay=info,moq_relay::web=info")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("moq-relay starts");
    let log = child.stderr.take().expect("moq-relay's log");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(log).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + WAIT;
    let mut ports: Vec<Option<u16>> = vec![None; kinds.len()];
    while ports.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        };
        for (port, kind) in ports.iter_mut().zip(kinds) {
            *port = port.or(relay_listen_port(&line, kind));
        }
    }
    std::thread::spawn(move || for _ in rx {});
    Some((child, ports.into_iter().flatten().collect()))
}

/// The port in moq-relay's `listening addr=HOST:PORT kind="KIND"` log line (`quic`, `http`):
/// where it bound a listener it was asked to bind on port 0.
fn relay_listen_port(line: &str, kind: &str) -> Option<u16> {
    let line = strip_ansi(line);
    if !line.contains("listening") || !line.contains(&format!("kind=\"{kind}\"")) {
        return None;
    }
    let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
    addr.parse::<std::net::SocketAddr>().ok().map(|a| a.port())
}

/// `text` without terminal colour sequences (ESC [ … m).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// moq-relay for the tests that run one: `MOQ_RELAY`, `PATH`, or where
/// pipelines/install-moq-relay.sh puts it.
pub fn relay_binary() -> std::path::PathBuf {
    let candidates = std::env::var_os("MOQ_RELAY")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("moq-relay"))
                .collect::<Vec<_>>()
        }))
        .chain(
            std::env::var_os("HOME")
                .map(|h| std::path::PathBuf::from(h).join(".cache/moqsink-tools/bin/moq-relay")),
        );
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "moq-relay not found: run pipelines/install-moq-relay.sh (pipelines/test.sh does), \
             or set MOQ_RELAY to the binary"
            )
        })
}
