//! Through a real moq-relay (0.17.x): moqsink publishes to it, moqsrc plays from it, in
//! every delivery mode; late joiners, relay restarts, and keyframes on demand. Interop with
//! moq-dev's GStreamer plugin (moq-gst 0.4.20) in both directions, in the hang format: its
//! directory comes from `MOQ_GST_DIR`, else `pipelines/install-moq-gst.sh` builds it.
//!
//! The relay binary comes from `MOQ_RELAY`, `PATH` or `~/.cache/moqsink-tools/bin`
//! (`pipelines/install-moq-relay.sh` installs it there). Without it the tests fail.
//!
//! The suite runs on one MoQ Transport draft: `MOQ_DRAFT` (14, 16, 20 or 22) is given to
//! every element of ours as its `versions`; unset, the elements' default.
//! `pipelines/interop.sh` runs it once per draft.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

/// The relay's root for anonymous sessions, and the broadcast under it.
const ROOT: &str = "anon";
const NAMESPACE: &str = "live";

/// `properties` of one of our elements, with the draft the suite runs on.
fn ours(properties: impl AsRef<str>) -> String {
    match std::env::var("MOQ_DRAFT") {
        Ok(draft) => format!("{} versions={draft}", properties.as_ref()),
        Err(_) => properties.as_ref().to_owned(),
    }
}

/// The draft our elements negotiate with the relay: `MOQ_DRAFT`, else the default's first.
fn expected_draft() -> String {
    std::env::var("MOQ_DRAFT").unwrap_or_else(|_| {
        let default: moq_session::Versions = moq_session::DEFAULT_VERSIONS.parse().unwrap();
        default.list()[0].draft().to_string()
    })
}

/// How many element messages named `name` `pipeline` has posted so far.
fn count_messages(pipeline: &gst::Pipeline, name: &'static str) -> Arc<Mutex<usize>> {
    let counted = Arc::new(Mutex::new(0));
    let count = counted.clone();
    pipeline.bus().unwrap().set_sync_handler(move |_, msg| {
        if let gst::MessageView::Element(e) = msg.view()
            && e.structure().is_some_and(|s| s.name() == name)
        {
            *count.lock().unwrap() += 1;
        }
        gst::BusSyncReply::Pass
    });
    counted
}

/// The port in moq-relay's "listening addr=HOST:PORT kind=\"quic\"" log line.
fn quic_listen_port(line: &str) -> Option<u16> {
    let line: String = strip_ansi(line);
    if !line.contains("listening") || !line.contains("kind=\"quic\"") {
        return None;
    }
    let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
    addr.parse::<SocketAddr>().ok().map(|a| a.port())
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

/// A moq-relay on 127.0.0.1 with its own self-signed certificate.
struct Relay {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    fingerprint: String,
    /// How it authorizes sessions (`--auth-…`), and any other arguments.
    args: Vec<String>,
}

impl Relay {
    /// A relay that lets anyone publish and play under `/anon`.
    fn start() -> Relay {
        Relay::start_with_args(&["--auth-public", "anon/**"])
    }

    /// A node of `root`'s cluster, also open to anyone under `/anon`.
    fn start_in_cluster(root: &Relay) -> Relay {
        Relay::start_with_args(&[
            "--auth-public",
            "anon/**",
            "--cluster-connect",
            &format!("moqt://127.0.0.1:{}/", root.port),
            "--connect-tls-fingerprint",
            &root.fingerprint,
        ])
    }

    fn start_with_args(args: &[&str]) -> Relay {
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
                .unwrap();
        let dir = scratch_dir("moq-relay-test");
        std::fs::write(dir.join("cert.pem"), certified.cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), certified.key_pair.serialize_pem()).unwrap();
        let fingerprint =
            moq_session::tls::fingerprint_hex(&moq_session::tls::fingerprint(certified.cert.der()));
        let mut relay = Relay {
            child: None,
            // The system picks it at the first start; a restart takes the same one.
            port: 0,
            dir,
            fingerprint,
            args: args.iter().map(|a| a.to_string()).collect(),
        };
        relay.spawn();
        relay
    }

    fn spawn(&mut self) {
        let mut child = Command::new(relay_binary())
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--listen-tls-cert")
            .arg(self.dir.join("cert.pem"))
            .arg("--listen-tls-key")
            .arg(self.dir.join("key.pem"))
            .args(&self.args)
            .args(["--iroh-enabled=false", "--log-level", "warn"])
            // Its one line saying where it listens, and warnings.
            .env("RUST_LOG", "moq_relay::relay=info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("moq-relay starts");
        let log = child.stderr.take().expect("moq-relay's log");
        self.child = Some(child);
        // Ready once it says where it listens; the rest of its log is read and dropped.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(log).lines().map_while(Result::ok) {
                if let Some(port) = quic_listen_port(&line)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(port);
                }
            }
        });
        let port = rx
            .recv_timeout(WAIT)
            .expect("moq-relay says where it listens");
        assert!(
            self.port == 0 || self.port == port,
            "moq-relay restarted on {port}, not {}",
            self.port
        );
        self.port = port;
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the relay as a planned restart does: SIGTERM, which makes moq-relay send
    /// GOAWAY to every session and wait for them to leave (`--drain-timeout`). Returns
    /// without waiting for it to exit.
    fn terminate(&mut self) {
        if let Some(child) = &self.child {
            let status = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success(), "SIGTERM sent to moq-relay");
        }
    }

    fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/{ROOT}", self.port)
    }

    fn publisher(&self, properties: &str) -> Sender {
        Sender::through_relay(&ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={} {properties}",
            self.url(),
            self.fingerprint
        )))
    }

    fn subscriber(&self, properties: &str) -> Receiver {
        Receiver::start(&ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={} {properties}",
            self.url(),
            self.fingerprint
        )))
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Frames from the first output on are a decodable sequence: starts at a keyframe,
/// strictly increasing decode indices, every output decoded without a decoder warning.
fn assert_decodable(receiver: &Receiver, what: &str) {
    let frames = receiver.frames();
    assert!(
        frames[0].key && frames[0].discont,
        "{what}: starts at a keyframe"
    );
    for pair in frames.windows(2) {
        assert!(
            pair[1].decode_index > pair[0].decode_index,
            "{what}: decode order"
        );
        assert!(pair[1].dts >= pair[0].dts, "{what}: DTS never decreases");
    }
    assert!(
        frames.iter().all(|f| f.availability.is_some()),
        "{what}: availability meta"
    );
    let warnings: Vec<String> = receiver
        .messages
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.starts_with("warning"))
        .cloned()
        .collect();
    assert!(warnings.is_empty(), "{what}: {warnings:?}");
    // The decoder may still hold a few frames.
    let decoded = receiver.decoded();
    assert!(
        decoded + 4 >= frames.len() && decoded <= frames.len(),
        "{what}: {} output, {decoded} decoded",
        frames.len()
    );
}

#[test]
fn every_delivery_mode_plays_through_the_relay() {
    let relay = Relay::start();
    for mode in ["baseline", "deprioritize-b", "skip-gops", "combined"] {
        let sender = relay.publisher(&format!("delivery={mode}"));
        let receiver = relay.subscriber("");
        receiver
            .wait_frames(72, WAIT)
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_decodable(&receiver, mode);
        // Nothing is lost on an uncongested loopback: three seconds without a gap.
        let frames = receiver.frames();
        let gaps = frames
            .windows(2)
            .filter(|p| p[1].decode_index != p[0].decode_index + 1)
            .count();
        assert_eq!(gaps, 0, "{mode}: frames missing through the relay");
        drop(receiver);
        drop(sender);
    }
}

#[test]
fn the_same_url_on_both_elements_addresses_the_same_broadcast() {
    let relay = Relay::start();
    // Root /anon, broadcast `show`, on both ends, with no namespace property.
    let properties = ours(format!(
        "url={}/show tls-fingerprint={}",
        relay.url(),
        relay.fingerprint
    ));
    let _sender = Sender::through_relay(&properties);
    let receiver = Receiver::start(&properties);
    receiver
        .wait_frames(24, WAIT)
        .expect("the player finds the broadcast");
    assert_decodable(&receiver, "same url");
}

#[test]
fn two_subscribers_and_a_late_joiner_through_the_relay() {
    let relay = Relay::start();
    let _sender = relay.publisher("");
    let first = relay.subscriber("");
    let second = relay.subscriber("");
    first.wait_frames(48, WAIT).expect("first subscriber plays");
    second
        .wait_frames(48, WAIT)
        .expect("second subscriber plays");
    let late = relay.subscriber("");
    late.wait_frames(48, WAIT).expect("late joiner plays");
    for (receiver, what) in [
        (&first, "first"),
        (&second, "second"),
        (&late, "late joiner"),
    ] {
        assert_decodable(receiver, what);
    }
    let late_start = late.frames()[0].decode_index;
    assert!(
        late_start > first.frames()[0].decode_index,
        "joined later in the stream"
    );
}

/// moq-dev's format through moq-relay: the relay reads our catalog.json and frames as it
/// does moq-gst's, and our moqsrc plays them to the end.
#[test]
fn the_hang_format_plays_through_the_relay() {
    let relay = Relay::start();
    let sender = relay.publisher("format=hang");
    let receiver = relay.subscriber("");
    receiver.wait_frames(48, WAIT).expect("plays");
    sender.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("EOS reaches the subscriber");
    assert_complete_hang_delivery(&sender.sent(), &receiver);
}

#[test]
fn the_end_of_the_stream_reaches_subscribers_through_the_relay() {
    let relay = Relay::start();
    let sender = relay.publisher("");
    let receiver = relay.subscriber("");
    receiver.wait_frames(24, WAIT).expect("plays");
    sender.finish();
    let outcome = wait_eos(&receiver.pipeline, WAIT);
    eprintln!("after the publisher's EOS the receiver saw: {outcome:?}");
    outcome.expect("EOS, not an error");
}

#[test]
fn audio_and_video_play_through_the_relay() {
    let relay = Relay::start();
    let sender = av::AvSender::start(
        &format!("{TEST_VIDEO} ! {TEST_ENCODER}"),
        av::AudioCodec::Opus,
        &ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={}",
            relay.url(),
            relay.fingerprint
        )),
    );
    let url = ours(format!(
        "url={} namespace={NAMESPACE} tls-fingerprint={}",
        relay.url(),
        relay.fingerprint
    ));
    let receiver = av::AvReceiver::start(&url, av::AudioCodec::Opus);
    receiver
        .wait_both(48, WAIT)
        .expect("both tracks through the relay");
    let late = av::AvReceiver::start(&url, av::AudioCodec::Opus);
    late.wait_both(48, WAIT).expect("a late joiner gets both");
    std::thread::sleep(Duration::from_secs(3));
    for (what, r) in [("first", &receiver), ("late joiner", &late)] {
        // A joiner that starts behind (a relay sends the group under way from its
        // keyframe) drains its playout delay: audio by letting single frames go.
        let a_drained = r.drained("audio");
        let (video, audio) = (r.video.lock().unwrap(), r.audio.lock().unwrap());
        let (v_got, v_span) = av::received_span(&video.outputs);
        let (a_got, a_span) = av::received_span(&audio.outputs);
        let av::Skew {
            worst_ms: worst,
            pairs,
        } = av::skew(&sender, &video, &audio);
        // From the first frame on: a late joiner's video GoP older than its audio must
        // not cut a hole into the audio when it arrives.
        let gaps = av::audio_gaps_ms(&audio.outputs, Duration::from_millis(60));
        eprintln!(
            "through the relay, {what}: video {v_got}/{v_span}, audio {a_got}/{a_span} \
             ({a_drained} drained), A/V skew worst {worst:.1} ms over {} pairs, \
             audio gaps > 60 ms: {gaps:?}",
            pairs
        );
        assert!(gaps.is_empty(), "{what}: audio gaps {gaps:?} ms");
        assert!(
            v_got * 100 >= v_span * 95 && (a_got + a_drained) * 100 >= a_span * 95,
            "{what}"
        );
        assert!(worst <= 40.0, "{what}: A/V skew {worst:.1} ms");
    }
}

/// The congested A/V run of tests/av.rs with moq-relay between moqsink and the link: the
/// relay forwards audio ahead of the video it has to thin.
#[test]
fn audio_plays_on_through_the_relay_while_congestion_makes_the_video_skip() {
    let relay = Relay::start();
    let sender = av::AvSender::start(
        av::CONGESTED_VIDEO,
        av::AudioCodec::Opus,
        &ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={}",
            relay.url(),
            relay.fingerprint
        )),
    );
    let forward = SocketAddr::from(([127, 0, 0, 1], relay.port));
    av::play_congested(&sender, forward, |link| {
        ours(format!(
            "url=moqt://{link}/{ROOT} namespace={NAMESPACE} tls-fingerprint={}",
            relay.fingerprint
        ))
    });
}

/// Kills the relay for `down`, restarts it on the same port and certificate, and checks
/// that the publisher re-announces and the subscriber resumes without an error.
fn survive_relay_restart(down: Duration) {
    let mut relay = Relay::start();
    let sender = relay.publisher("");
    let receiver = relay.subscriber("media-timeout=90000");
    receiver
        .wait_frames(24, WAIT)
        .expect("plays before the restart");
    relay.kill();
    std::thread::sleep(down);
    let before = receiver.frames().len();
    relay.spawn();
    let back = Instant::now();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("plays after the restart");
    // wait_frames returned as soon as the count was reached; the first new frame came
    // about a second of frames earlier.
    let resumed = back.elapsed().saturating_sub(Duration::from_millis(1000));
    eprintln!("relay down {down:?}: receiver resumed ~{resumed:?} after the relay came back");
    let frames = receiver.frames();
    assert!(
        frames[before].key && frames[before].discont,
        "resumes at a keyframe, DISCONT"
    );
    assert!(
        back.elapsed() < Duration::from_secs(5),
        "resumed {:?} after the relay returned",
        back.elapsed()
    );
    for (what, pipeline) in [
        ("receiver", &receiver.pipeline),
        ("sender", &sender.pipeline),
    ] {
        let bus = pipeline.bus().unwrap();
        while let Some(msg) = bus.pop() {
            if let gst::MessageView::Error(e) = msg.view() {
                panic!("{what} posted an error: {} ({:?})", e.error(), e.debug());
            }
        }
    }
    let messages = receiver.messages.lock().unwrap().clone();
    assert!(
        messages.iter().filter(|m| *m == "moq-connected").count() >= 2,
        "{messages:?}"
    );
}

#[test]
fn a_publisher_restart_behind_the_relay_is_resumed() {
    let relay = Relay::start();
    let first = relay.publisher("");
    let receiver = relay.subscriber("media-timeout=30000");
    receiver.wait_frames(24, WAIT).expect("plays");
    drop(first);
    std::thread::sleep(Duration::from_secs(2));
    let before = receiver.frames().len();
    let _second = relay.publisher("");
    let back = Instant::now();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("plays the new publisher");
    eprintln!(
        "publisher restart: playing again {:?} after it came back",
        back.elapsed()
    );
    let frames = receiver.frames();
    assert!(
        frames[before].key && frames[before].discont,
        "resumes at a keyframe, DISCONT"
    );
    let bus = receiver.pipeline.bus().unwrap();
    while let Some(msg) = bus.pop() {
        assert!(
            !matches!(
                msg.view(),
                gst::MessageView::Error(_) | gst::MessageView::Eos(_)
            ),
            "{msg:?}"
        );
    }
}

#[test]
fn survives_a_5_second_relay_outage() {
    survive_relay_restart(Duration::from_secs(5));
}

#[test]
fn survives_a_30_second_relay_outage() {
    survive_relay_restart(Duration::from_secs(30));
}

/// Median latency (availability at the sender to output by moqsrc) of a viewer's frames
/// output within `window` of Unix time.
fn median_latency(receiver: &Receiver, window: std::ops::Range<Duration>) -> Duration {
    let mut latencies: Vec<Duration> = receiver
        .frames()
        .iter()
        .filter(|f| window.contains(&f.output_unix))
        .filter_map(|f| f.latency())
        .collect();
    assert!(!latencies.is_empty(), "frames in the window");
    latencies.sort();
    latencies[latencies.len() / 2]
}

/// Time from starting a viewer to its first frame.
fn first_frame(start: impl FnOnce() -> Receiver) -> (Receiver, Duration) {
    let started = Instant::now();
    let receiver = start();
    receiver.wait_frames(1, WAIT).expect("a first frame");
    (receiver, started.elapsed())
}

/// A three-node moq-relay cluster: the publisher on the root node, a viewer on each
/// node, the viewers on the two other nodes each naming the other as its backup. All
/// decode; killing one of those nodes moves its viewer to the backup while the others
/// play on. Prints the time to first frame per node, the latency a hop adds and the
/// failover time.
#[test]
fn viewers_on_any_node_of_a_cluster_play_and_fail_over_when_their_node_dies() {
    let root = Relay::start();
    let mut left = Relay::start_in_cluster(&root);
    let right = Relay::start_in_cluster(&root);
    let _sender = root.publisher("");
    // Live before the first viewer, so that every node's first frame is timed alike.
    std::thread::sleep(Duration::from_secs(2));
    let backup = |relay: &Relay| {
        format!(
            "backup-urls={}?tls-fingerprint={} media-timeout=30000",
            relay.url(),
            relay.fingerprint
        )
    };
    let (on_root, root_first) = first_frame(|| root.subscriber(""));
    let (on_left, left_first) = first_frame(|| left.subscriber(&backup(&right)));
    let (on_right, right_first) = first_frame(|| right.subscriber(&backup(&left)));
    eprintln!(
        "time to first frame: {root_first:?} on the root node, {left_first:?} and {right_first:?} on the other nodes"
    );
    let from = unix_now();
    std::thread::sleep(Duration::from_secs(4));
    let window = from..unix_now();
    let (direct, remote) = (
        median_latency(&on_root, window.clone()),
        median_latency(&on_left, window.clone()),
    );
    eprintln!(
        "median latency: {direct:?} through one relay, {remote:?} and {:?} through two: {:?} per added hop",
        median_latency(&on_right, window),
        remote.saturating_sub(direct)
    );

    let (left_before, right_before) = (on_left.frames().len(), on_right.frames().len());
    let killed = unix_now();
    left.kill();
    on_left
        .wait_frames(left_before + 50, WAIT)
        .expect("the viewer of the dead node plays on from its backup");
    let frames = on_left.frames();
    let resumed = frames[left_before..]
        .iter()
        .find(|f| f.discont && f.output_unix > killed)
        .expect("a new start after the node died");
    eprintln!(
        "failover: the viewer of the dead node played again {:?} after it died",
        resumed.output_unix - killed
    );
    assert!(resumed.key, "resumes at a keyframe");
    assert!(
        resumed.output_unix - killed < Duration::from_secs(10),
        "failover took {:?}",
        resumed.output_unix - killed
    );
    let connected = |r: &Receiver| {
        let messages = r.messages.lock().unwrap().clone();
        messages.iter().filter(|m| *m == "moq-connected").count()
    };
    assert_eq!(
        connected(&on_left),
        2,
        "connected to its node, then its backup"
    );
    on_right
        .wait_frames(right_before + 50, WAIT)
        .expect("the other viewers play on");
    assert_eq!(connected(&on_right), 1, "the other viewers stay connected");
    for (receiver, what) in [
        (&on_root, "root node"),
        (&on_left, "node that died, then backup"),
        (&on_right, "other node"),
    ] {
        assert_decodable(receiver, what);
    }
}

/// Time from starting a direct subscriber (which starts at the next GoP) to its first
/// frame, with a 5 s GoP so the difference shows; printed for the record, asserted only
/// loosely. (Through a relay a new viewer gets the relay's cached latest GoP at once.)
#[test]
fn a_keyframe_on_subscribe_shortens_the_time_to_first_frame() {
    let mut measured = Vec::new();
    for on in [true, false] {
        let sender = Sender::start_with_encoder(
            &format!("keyframe-on-subscribe={on}"),
            "x264enc bframes=3 key-int-max=120 speed-preset=veryfast ! h264parse ! video/x-h264,alignment=au",
        );
        let mut times = Vec::new();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(1700));
            let started = Instant::now();
            let receiver = Receiver::of(&sender);
            receiver.wait_frames(1, WAIT).expect("a first frame");
            times.push(started.elapsed());
        }
        eprintln!("keyframe-on-subscribe={on}: time to first frame {times:?}");
        measured.push(times);
    }
    let mean = |t: &[Duration]| t.iter().sum::<Duration>() / t.len() as u32;
    let (with, without) = (mean(&measured[0]), mean(&measured[1]));
    eprintln!("mean time to first frame: {with:?} with, {without:?} without a keyframe request");
    assert!(
        with < Duration::from_secs(2),
        "{with:?} with keyframe-on-subscribe"
    );
}

/// `moq` (moq-cli, whose `moq auth` makes keys and tokens and answers a relay's auth
/// requests), from `MOQ_CLI`, `PATH` or where `pipelines/install-moq-relay.sh` puts it.
fn moq_cli() -> PathBuf {
    std::env::var_os("MOQ_CLI")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/moqsink-tools/bin/moq")),
        )
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "moq (moq-cli) not found: run pipelines/install-moq-relay.sh (pipelines/test.sh does), \
                 or set MOQ_CLI to the binary"
            )
        })
}

/// A relay that requires a JWT: `moq auth serve` checks every session's token with a key
/// of its own, and the relay asks it (`--auth-url`).
struct JwtRelay {
    relay: Relay,
    auth: Child,
    dir: PathBuf,
}

impl JwtRelay {
    fn start() -> JwtRelay {
        let dir = scratch_dir("moq-jwt-test");
        let key = dir.join("key.jwk");
        let status = Command::new(moq_cli())
            .args(["auth", "generate", "--out"])
            .arg(&key)
            .status()
            .expect("moq auth generate runs");
        assert!(status.success(), "moq auth generate");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let auth = Command::new(moq_cli())
            .args([
                "auth",
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--key",
            ])
            .arg(&key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq auth serve starts");
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moq auth serve did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let relay = Relay::start_with_args(&["--auth-url", &format!("http://127.0.0.1:{port}")]);
        JwtRelay { relay, auth, dir }
    }

    /// A token for broadcasts under `root`, signed with `key` (this relay's, or another).
    fn token(&self, root: &str, key: Option<&Path>) -> String {
        let own = self.dir.join("key.jwk");
        let out = Command::new(moq_cli())
            .args([
                "auth",
                "sign",
                "--root",
                root,
                "--publish",
                "**",
                "--subscribe",
                "**",
                "--key",
            ])
            .arg(key.unwrap_or(&own))
            .output()
            .expect("moq auth sign runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn url(&self, path: &str) -> String {
        format!("moqt://127.0.0.1:{}{path}", self.relay.port)
    }
}

impl Drop for JwtRelay {
    fn drop(&mut self) {
        let _ = self.auth.kill();
        let _ = self.auth.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_relay_that_requires_a_jwt_plays_with_a_valid_token_and_refuses_others() {
    let relay = JwtRelay::start();
    let token = relay.token("demo", None);
    let pin = format!("tls-fingerprint={}", relay.relay.fingerprint);
    // The token as a property on the publisher, in the URL's query on the player.
    let _sender = Sender::through_relay(&ours(format!(
        "url={} {pin} auth-token={token}",
        relay.url("/demo/show")
    )));
    let receiver = Receiver::start(&ours(format!(
        "url={}?jwt={token} {pin}",
        relay.url("/demo/show")
    )));
    receiver.wait_frames(24, WAIT).expect("a valid token plays");

    // Another key's token, and none: refused with an error that says so.
    let stranger = relay.dir.join("stranger.jwk");
    let status = Command::new(moq_cli())
        .args(["auth", "generate", "--out"])
        .arg(&stranger)
        .status()
        .unwrap();
    assert!(status.success());
    let forged = relay.token("demo", Some(&stranger));
    for (what, properties) in [
        (
            "a token of another key",
            ours(format!(
                "url={} {pin} auth-token={forged} media-timeout=3000",
                relay.url("/demo/show")
            )),
        ),
        (
            "no token",
            ours(format!(
                "url={} {pin} media-timeout=3000",
                relay.url("/demo/show")
            )),
        ),
    ] {
        let started = Instant::now();
        let refused = Receiver::start(&properties);
        let err = wait_eos(&refused.pipeline, WAIT).expect_err("an error, not EOS");
        eprintln!("{what}: after {:?}: {err}", started.elapsed());
        assert!(
            err.to_lowercase().contains("unauthorized") || err.to_lowercase().contains("refused"),
            "{what}: {err}"
        );
        let sender = Sender::through_relay(&properties.replace(" media-timeout=3000", ""));
        let bus = sender.pipeline.bus().unwrap();
        let err = wait_bus(&bus, WAIT, |_| None::<()>).expect_err("the publisher is refused");
        eprintln!("{what}, publishing: {err}");
    }
}

/// moq-gst's plugin directory: `MOQ_GST_DIR`, else what `pipelines/install-moq-gst.sh`
/// builds (about 10 minutes, once) and prints.
fn moq_gst_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MOQ_GST_DIR") {
        return PathBuf::from(dir);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/install-moq-gst.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("install-moq-gst.sh runs");
    assert!(output.status.success(), "{} failed", script.display());
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// `gst-launch-1.0 -v <pipeline>` with moq-gst's plugin and not ours on the plugin path:
/// its elements are also called `moqsink` / `moqsrc`.
fn moq_gst_launch(dir: &Path, pipeline: &str) -> Command {
    let mut command = Command::new("gst-launch-1.0");
    command
        .arg("-v")
        .args(pipeline.split_whitespace())
        .env("GST_PLUGIN_PATH", dir)
        .env(
            "GST_REGISTRY",
            std::env::temp_dir().join(format!("moq-gst-registry-{}.bin", std::process::id())),
        );
    command
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How many of the frames in the span of `pts` (µs, any order, 24 fps) are there.
fn coverage(pts: &[u64]) -> (usize, usize) {
    let mut distinct = pts.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let (Some(first), Some(last)) = (distinct.first(), distinct.last()) else {
        return (0, 0);
    };
    let expected = ((last - first) as f64 / (1e6 / 24.0)).round() as usize + 1;
    (distinct.len(), expected)
}

/// `h:mm:ss.nnnnnnnnn` as µs.
fn parse_clock_time(text: &str) -> Option<u64> {
    let mut parts = text.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    let seconds: f64 = s.parse().ok()?;
    Some(
        (h.parse::<u64>().ok()? * 3600 + m.parse::<u64>().ok()? * 60) * 1_000_000
            + (seconds * 1e6).round() as u64,
    )
}

/// Our moqsink in moq-dev's format → moq-relay → moq-gst's moqsrc, decoded.
#[test]
fn moq_gst_plays_what_our_moqsink_publishes_in_the_hang_format() {
    let dir = moq_gst_dir();
    let relay = Relay::start();
    let _sender = relay.publisher("format=hang");
    let text = run_for(
        &mut moq_gst_launch(
            &dir,
            &format!(
                "moqsrc url=https://127.0.0.1:{}/{ROOT} broadcast={NAMESPACE} tls-disable-verify=true \
                 ! h264parse ! avdec_h264 ! fakesink name=out silent=false",
                relay.port
            ),
        ),
        Duration::from_secs(8),
    );
    let pts: Vec<u64> = text
        .lines()
        .filter(|l| l.contains("(out:sink)") && l.contains("chain"))
        .filter_map(|l| l.split("pts: ").nth(1)?.split(',').next())
        .filter_map(parse_clock_time)
        .collect();
    let (decoded, expected) = coverage(&pts);
    eprintln!("moq-gst's moqsrc decoded {decoded} of the {expected} frames in its span");
    let problems: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARNING"))
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(expected >= 96, "{expected} frames in 8 s:\n{text}");
    assert!(decoded * 100 >= expected * 95, "{decoded} of {expected}");
}

/// moq-gst's moqsink → moq-relay → our moqsrc, decoded.
#[test]
fn our_moqsrc_plays_what_moq_gst_publishes() {
    let dir = moq_gst_dir();
    let relay = Relay::start();
    let publisher = moq_gst_launch(
        &dir,
        &format!(
            "{TEST_VIDEO} ! x264enc bframes=3 key-int-max=15 speed-preset=veryfast ! h264parse \
             ! moqsink url=https://127.0.0.1:{}/{ROOT} broadcast={NAMESPACE} tls-disable-verify=true",
            relay.port
        ),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .map(Running)
    .expect("moq-gst's publisher starts");
    let receiver = relay.subscriber("");
    receiver
        .wait_frames(120, WAIT)
        .expect("plays moq-gst's broadcast");
    drop(publisher);
    let frames = receiver.frames();
    assert!(frames[0].key && frames[0].discont, "starts at a keyframe");
    let pts: Vec<u64> = frames.iter().map(|f| f.pts.useconds()).collect();
    let (received, expected) = coverage(&pts);
    let decoded = receiver.decoded();
    eprintln!("our moqsrc: {received} of the {expected} frames in its span, {decoded} decoded");
    assert!(received * 100 >= expected * 95, "{received} of {expected}");
    assert!(
        decoded + 4 >= frames.len(),
        "{decoded} of {} decoded",
        frames.len()
    );
    assert!(
        frames.windows(2).all(|w| w[1].dts >= w[0].dts),
        "DTS never decreases"
    );
}

/// The suite's draft through moq-relay: plays, and moqsrc reports the draft in use.
#[test]
fn the_draft_in_use_plays_through_the_relay_and_is_reported() {
    let relay = Relay::start();
    let _sender = relay.publisher("");
    let receiver = relay.subscriber("");
    let draft = expected_draft();
    receiver
        .wait_frames(48, WAIT)
        .unwrap_or_else(|e| panic!("draft-{draft}: {e}"));
    let messages = receiver.messages.lock().unwrap().clone();
    assert!(
        messages
            .iter()
            .any(|m| *m == format!("moq-connected draft={draft}")),
        "{messages:?}"
    );
    assert_decodable(&receiver, &format!("draft-{draft} through the relay"));
}

/// The rendition ladder published through `relay`: the publishing pipeline.
fn ladder_through(relay: &Relay) -> gst::Pipeline {
    ladder::publish_ladder(&ours(format!(
        "url={} namespace={NAMESPACE} tls-fingerprint={}",
        relay.url(),
        relay.fingerprint
    )))
    .0
}

/// A viewer of the relay's broadcast behind a link shaped by `profile`: the link and the
/// viewer.
fn viewer_behind(relay: &Relay, profile: linkem::Profile) -> (linkem::Link, Receiver) {
    let link = linkem::Link::start(linkem::LinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        forward: SocketAddr::from(([127, 0, 0, 1], relay.port)),
        downstream: Some(profile),
        upstream: None,
        seed: 1,
        log: None,
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
    let (slow_link, slow) = viewer_behind(&relay, linkem::Profile::constant(400, 150_000));
    let (open_link, open) = viewer_behind(&relay, linkem::Profile::constant(0, 1 << 20));
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
    let (link, viewer) = viewer_behind(&relay, profile);
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
    let switches: Vec<String> = viewer
        .messages
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains(" to="))
        .cloned()
        .collect();
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
    // it and answers from what it holds: asked for the largest object it sends one frame
    // before the next group (105-183 ms down over 4 runs); asked for the next group start,
    // the group under way (127 ms and 1.68 s). The bound is generous for a loaded
    // machine, and well below what a burst costs. In the held case one run in about ten
    // still stalls near a second at the switch down (983 ms seen), not yet traced; its
    // bound stays below the next-group-start case.
    let bound = Duration::from_millis(if other_on_lowest { 1200 } else { 600 });
    for (at, width, stall) in &stalls {
        assert!(
            *stall <= bound,
            "a {stall:?} stall at the switch to width {width} at {at:.1} s"
        );
    }
}

/// A planned restart of the node a viewer is on: moq-relay says GOAWAY and drains for 8 s.
/// The viewer moves to its backup within the drain window instead of waiting to be
/// force-closed: no reconnect, no freeze, every frame once.
#[test]
fn a_viewer_moves_off_a_draining_node_before_it_closes() {
    let root = Relay::start();
    let mut leaf = Relay::start_with_args(&[
        "--auth-public",
        "anon/**",
        "--cluster-connect",
        &format!("moqt://127.0.0.1:{}/", root.port),
        "--connect-tls-fingerprint",
        &root.fingerprint,
        "--drain-timeout",
        "8s",
    ]);
    let sender = root.publisher("");
    wait_announced(&sender.sink);
    let viewer = leaf.subscriber(&format!(
        "backup-urls={}?tls-fingerprint={} media-timeout=30000",
        root.url(),
        root.fingerprint
    ));
    viewer.wait_frames(48, WAIT).expect("plays");
    let before = viewer.frames().len();
    let draining = unix_now();
    leaf.terminate();
    viewer
        .wait_frames(before + 120, WAIT)
        .expect("plays on from the backup");
    let messages = viewer.messages.lock().unwrap().clone();
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    let frames = viewer.frames();
    let longest = frames
        .windows(2)
        .filter(|w| w[1].output_unix > draining)
        .map(|w| w[1].output_unix.saturating_sub(w[0].output_unix))
        .max()
        .unwrap_or_default();
    let indices: Vec<u64> = frames.iter().map(|f| f.decode_index).collect();
    eprintln!(
        "{} frames; longest pause after the drain began {longest:?}; messages {messages:?}",
        frames.len()
    );
    assert!(
        messages.iter().any(|m| m == "moq-moved"),
        "moved on GOAWAY: {messages:?}"
    );
    assert_eq!(
        messages.iter().filter(|m| *m == "moq-connected").count(),
        1,
        "moved, not reconnected after a force-close: {messages:?}"
    );
    for w in indices.windows(2) {
        assert_eq!(w[1], w[0] + 1, "every frame once, in order");
    }
    assert!(
        longest < Duration::from_millis(250),
        "a freeze of {longest:?}"
    );
}

/// A planned restart of the node the publisher is on: moqsink announces on its backup (the
/// root) as soon as the node says GOAWAY, and keeps serving the old session until the node
/// closes it. The viewer on the root plays on; when the node finally goes, moq-relay ends
/// the viewer's subscription that came through it, and the viewer subscribes again, to the
/// publisher's new session: a short gap (bounded here at 1 s).
///
/// Out of the test command: in some runs (2 of 34 on a quiet machine; 1 in 4 before) the
/// freeze lasts 2.8-13.6 s. Traced with the relays' logs: the node exits at its drain
/// deadline, and when its closing of the cluster connection does not reach the root, the
/// root keeps the viewer's subscription on that dead route (the broadcast's other
/// announcement, the publisher's new session, is not used for it) until the connection's
/// idle timeout, ~13 s later, and only then ends it (PUBLISH_DONE "internal error"); in
/// the other runs that PUBLISH_DONE comes within milliseconds of the deadline. The viewer
/// has no other server to try and waits for it. Closing the publisher's old session 2 s
/// after its move, while the node still ran, did not help (pauses of 620-840 ms, and one
/// of 13.8 s, in 6 runs): the root parks a subscription whose route went, whatever ended
/// the route. pipelines/interop.sh still runs it.
#[test]
#[ignore = "flaky (moq-relay keeps a subscription on a dead cluster route until its idle timeout); run by pipelines/interop.sh"]
fn a_publisher_moves_off_a_draining_node_before_it_closes() {
    let root = Relay::start();
    let mut leaf = Relay::start_with_args(&[
        "--auth-public",
        "anon/**",
        "--cluster-connect",
        &format!("moqt://127.0.0.1:{}/", root.port),
        "--connect-tls-fingerprint",
        &root.fingerprint,
        "--drain-timeout",
        "8s",
    ]);
    let sender = leaf.publisher(&format!(
        "backup-urls={}?tls-fingerprint={}",
        root.url(),
        root.fingerprint
    ));
    let moved = count_messages(&sender.pipeline, "moq-moved");
    wait_announced(&sender.sink);
    let viewer = root.subscriber("media-timeout=30000");
    viewer.wait_frames(48, WAIT).expect("plays");
    let before = viewer.frames().len();
    let draining = unix_now();
    leaf.terminate();
    // Past the drain deadline, when the relay has closed the publisher's old session.
    viewer
        .wait_frames(before + 24 * 12, WAIT)
        .expect("plays on from the publisher's new session");
    let messages = viewer.messages.lock().unwrap().clone();
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();
    let frames = viewer.frames();
    let longest = frames
        .windows(2)
        .filter(|w| w[1].output_unix > draining)
        .map(|w| w[1].output_unix.saturating_sub(w[0].output_unix))
        .max()
        .unwrap_or_default();
    eprintln!(
        "{} frames; longest pause after the drain began {longest:?}; viewer messages {messages:?}",
        frames.len()
    );
    assert!(*moved.lock().unwrap() > 0, "the publisher moved on GOAWAY");
    assert!(longest < Duration::from_secs(1), "a freeze of {longest:?}");
}

/// NAT rebindings between the publisher and the relay (linkem gives moqsink a new source
/// port), ten of them two seconds of playing apart: moq-relay follows the connection to
/// each new address, and the viewer plays on.
#[test]
fn a_publisher_whose_address_changes_keeps_its_relay_session() {
    const REBINDS: usize = 10;
    let relay = Relay::start();
    let link = linkem::Link::start(linkem::LinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        forward: SocketAddr::from(([127, 0, 0, 1], relay.port)),
        downstream: None,
        upstream: None,
        seed: 1,
        log: None,
    })
    .expect("link starts");
    let sender = Sender::through_relay(&ours(format!(
        "url=moqt://{}/{ROOT} namespace={NAMESPACE} tls-fingerprint={}",
        link.local_addr(),
        relay.fingerprint
    )));
    let announced = count_messages(&sender.pipeline, "moq-connected");
    wait_announced(&sender.sink);
    let viewer = relay.subscriber("media-timeout=30000");
    viewer.wait_frames(48, WAIT).expect("plays");
    let rebound = unix_now();
    for _ in 0..REBINDS {
        link.rebind();
        let before = viewer.frames().len();
        viewer
            .wait_frames(before + 48, WAIT)
            .expect("plays on after the publisher's rebinding");
    }
    let took = unix_now() - rebound;
    let messages = viewer.messages.lock().unwrap().clone();
    viewer.pipeline.set_state(gst::State::Null).unwrap();
    sender.pipeline.set_state(gst::State::Null).unwrap();
    let frames = viewer.frames();
    let pause = frames
        .windows(2)
        .filter(|w| w[1].output_unix > rebound)
        .map(|w| w[1].output_unix.saturating_sub(w[0].output_unix))
        .max()
        .unwrap_or_default();
    eprintln!(
        "{REBINDS} rebindings in {took:?}; longest pause {pause:?}; viewer messages {messages:?}"
    );
    assert_eq!(
        *announced.lock().unwrap(),
        1,
        "the publisher never reconnected"
    );
    assert!(pause < Duration::from_millis(250), "a freeze of {pause:?}");
}
