//! A browser watches what moqsink publishes: moq-dev's web player (`@moq/watch`, in the page
//! tools/browser builds) in headless Chromium plays a `format=hang` broadcast with video and
//! Opus audio through moq-relay, connecting over WebTransport with the relay's self-signed
//! certificate pinned by its hash (the relay serves it at `/certificate.sha256`).
//!
//! The page is open and connected before the stream starts, so it can show the whole of it.
//! It records, for every picture it draws into its canvas, the picture's media timestamp and
//! the wall clock; the sender records when each frame reached moqsink. One machine, one clock:
//! a picture's latency is when it was drawn minus when its frame reached moqsink.
//!
//! Node.js and npm are needed (`npm ci` runs in tools/browser whenever its lock file changed),
//! and so is Chromium (`/usr/bin/chromium`, or `CHROMIUM`; pipelines/setup.sh installs it): when
//! Chromium cannot start, the test says so on the terminal and checks nothing. The relay comes
//! from `MOQ_RELAY`, `PATH` or `~/.cache/moqsink-tools/bin` (pipelines/install-moq-relay.sh).

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

/// The stream the page watches: 20 s at 24 fps, and Opus in 20 ms frames.
const FPS: u64 = 24;
const STREAM_SECONDS: u64 = 20;
const AUDIO_FRAME_MS: u64 = 20;
/// Share of the stream's pictures the page must draw.
const MIN_DRAWN: f64 = 0.9;
/// How long the page plays on after the stream ended: its last pictures are still in flight.
const TAIL: Duration = Duration::from_secs(2);
/// hang's wall clock counts from 2020-01-01T00:00:00Z (ms since the UNIX epoch).
const MOQ_EPOCH_UNIX_MS: f64 = 1_577_836_800_000.0;
/// The runner's exit status when Chromium cannot start (tools/browser/watch.mjs).
const CHROMIUM_CANNOT_START: i32 = 3;

/// moq-relay on 127.0.0.1, with a certificate of its own that WebTransport accepts by hash
/// (ECDSA, valid for two weeks).
///
/// The web player reaches the certificate's hash (HTTP) and WebTransport (QUIC) at one
/// host:port, while moq-relay binds the two listeners apart. So the test holds a TCP
/// listener on a port the system picked, starts the relay's QUIC listener on the same number
/// (UDP) and its HTTP listener on a port the relay picks, and forwards TCP from one to the
/// other. Nothing is bound and let go: a UDP number another process holds makes the relay
/// fail to start, and the next number is tried.
struct WebRelay {
    child: Child,
    port: u16,
    fingerprint: String,
}

impl WebRelay {
    fn start() -> WebRelay {
        for _ in 0..5 {
            let front = TcpListener::bind("127.0.0.1:0").expect("a TCP port on 127.0.0.1");
            let port = front.local_addr().expect("its address").port();
            let Some((child, http)) = Self::spawn(port) else {
                continue;
            };
            forward(front, http);
            let mut relay = WebRelay {
                child,
                port,
                fingerprint: String::new(),
            };
            let deadline = Instant::now() + WAIT;
            relay.fingerprint = loop {
                if let Some(fp) = http_get(port, "/certificate.sha256").and_then(|body| {
                    body.split_whitespace()
                        .find(|t| t.len() == 64 && t.chars().all(|c| c.is_ascii_hexdigit()))
                        .map(str::to_owned)
                }) {
                    break fp;
                }
                assert!(
                    Instant::now() < deadline,
                    "moq-relay did not serve its certificate's hash"
                );
                std::thread::sleep(Duration::from_millis(100));
            };
            return relay;
        }
        panic!("moq-relay could not listen on any of five UDP ports picked for it");
    }

    /// moq-relay with QUIC on UDP `port` and HTTP where it likes; the HTTP port, once it said
    /// where both listen. `None` when it exited first (the UDP port is taken).
    fn spawn(port: u16) -> Option<(Child, u16)> {
        let args: Vec<std::ffi::OsString> = [
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--web-http-listen",
            "127.0.0.1:0",
            "--listen-tls-generate",
            "localhost,127.0.0.1",
            "--auth-public",
            "anon/**",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let (child, ports) = start_relay(&args, &["quic", "http"])?;
        assert_eq!(
            ports[0], port,
            "moq-relay's QUIC listener is where it was asked"
        );
        Some((child, ports[1]))
    }

    /// Where the page connects: `http://` makes the player fetch the certificate's hash.
    fn page_url(&self) -> String {
        format!("http://127.0.0.1:{}/anon", self.port)
    }

    fn publish_properties(&self) -> String {
        format!(
            "url=moqt://127.0.0.1:{}/anon namespace=live format=hang tls-fingerprint={}",
            self.port, self.fingerprint
        )
    }
}

impl Drop for WebRelay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Forwards every connection `front` accepts to 127.0.0.1:`port`, both ways, for as long
/// as the test runs.
fn forward(front: TcpListener, port: u16) {
    std::thread::spawn(move || {
        for client in front.incoming().map_while(Result::ok) {
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            for (mut from, mut to) in [
                (client.try_clone(), server.try_clone()),
                (server.try_clone(), client.try_clone()),
            ]
            .into_iter()
            .filter_map(|(from, to)| Some((from.ok()?, to.ok()?)))
            {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
}

/// The body of `GET path` from 127.0.0.1:`port` when it answers 200.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// tools/browser with its packages installed: `npm ci` when the lock file changed since the
/// last install.
fn page_tools() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/browser");
    let lock = std::fs::read(dir.join("package-lock.json")).expect("tools/browser's lock file");
    let stamp = dir.join("node_modules/.installed-lock.json");
    if std::fs::read(&stamp).ok().as_ref() != Some(&lock) {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .status()
            .expect("npm runs (Node.js and npm are needed for the browser test)");
        assert!(status.success(), "npm ci in {} failed", dir.display());
        std::fs::write(&stamp, &lock).expect("write the install stamp");
    }
    dir
}

/// The runner (tools/browser/watch.mjs) with the page open, reporting on its stdout.
struct Page {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

enum Opened {
    Ready(Page),
    NoChromium(String),
}

impl Page {
    fn open(relay: &WebRelay) -> Opened {
        let dir = page_tools();
        let mut child = Command::new("node")
            .arg(dir.join("watch.mjs"))
            .args(["--url", &relay.page_url(), "--name", "live", "--stdin"])
            .args(["--seconds", &(STREAM_SECONDS * 4).to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs tools/browser/watch.mjs");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped stderr");
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            collected.lock().unwrap().push_str(&text);
        });
        let mut page = Page {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        };
        match page.lines.recv_timeout(Duration::from_secs(90)) {
            Ok(line) if line == "ready" => Opened::Ready(page),
            other => {
                let status = page.wait_exit(WAIT);
                let stderr = page.stderr.lock().unwrap().clone();
                if status == Some(CHROMIUM_CANNOT_START) {
                    Opened::NoChromium(stderr)
                } else {
                    panic!(
                        "the page did not connect to the relay ({other:?}, exit {status:?}):\n{stderr}"
                    )
                }
            }
        }
    }

    /// The runner's exit status, once it exits within `within`.
    fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Give the reader threads a moment to drain the pipes.
                std::thread::sleep(Duration::from_millis(100));
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Ends the page's playback and returns what it recorded.
    fn finish(mut self) -> serde_json::Value {
        drop(self.stdin.take());
        let line = self.lines.recv_timeout(WAIT).unwrap_or_else(|e| {
            panic!(
                "no record from the page ({e}):\n{}",
                self.stderr.lock().unwrap()
            )
        });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("the page's record: {e}: {line}"))
    }
}

impl Drop for Page {
    /// Closing its stdin ends the page, and the runner removes Chromium's profile before
    /// it exits; killed only if it does not.
    fn drop(&mut self) {
        drop(self.stdin.take());
        if self.wait_exit(Duration::from_secs(15)).is_some() {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Says on the terminal, past the test harness's capture, that nothing was checked.
fn skip_loudly(why: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED browser test: Chromium cannot start, nothing was checked ***\n{why}\n\
         (install Debian's chromium package, e.g. with pipelines/setup.sh, or set CHROMIUM)\n"
    );
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Pairs of numbers from the record's `key` list.
fn pairs(record: &serde_json::Value, key: &str) -> Vec<(f64, f64)> {
    record[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_browser_plays_a_20_s_hang_broadcast_of_moqsink_through_the_relay() {
    init();
    let relay = WebRelay::start();
    let page = match Page::open(&relay) {
        Opened::Ready(page) => page,
        Opened::NoChromium(why) => return skip_loudly(&why),
    };

    let frames = STREAM_SECONDS * FPS;
    let audio_frames = STREAM_SECONDS * 1000 / AUDIO_FRAME_MS;
    let description = format!(
        "videotestsrc is-live=true pattern=ball num-buffers={frames} \
           ! video/x-raw,format=I420,width=320,height=240,framerate={FPS}/1 ! mix.sink_0 \
         videotestsrc is-live=true pattern=snow num-buffers={frames} \
           ! video/x-raw,format=I420,width=96,height=96,framerate={FPS}/1 ! mix.sink_1 \
         compositor name=mix sink_1::xpos=100 sink_1::ypos=80 \
           ! video/x-raw,format=I420,width=320,height=240,framerate={FPS}/1 \
           ! x264enc bitrate=600 bframes=3 key-int-max=15 speed-preset=veryfast option-string=scenecut=0 \
           ! h264parse ! m.video_0 \
         audiotestsrc is-live=true wave=ticks samplesperbuffer={} num-buffers={audio_frames} \
           ! audio/x-raw,rate=48000,channels=2 ! opusenc bitrate=64000 frame-size={AUDIO_FRAME_MS} \
           ! m.audio_0 \
         moqsink name=m sync=false {}",
        48 * AUDIO_FRAME_MS,
        relay.publish_properties()
    );
    let sender = launch(&description);
    let sink = sender.by_name("m").expect("moqsink");
    let video_sent = Arrivals::record(&sink.static_pad("video_0").expect("video pad"));
    let audio_sent = Arrivals::record(&sink.static_pad("audio_0").expect("audio pad"));
    sender.set_state(gst::State::Playing).expect("sender plays");
    wait_eos(&sender, Duration::from_secs(STREAM_SECONDS) + WAIT).expect("the stream ends");
    std::thread::sleep(TAIL);
    let record = page.finish();
    sender.set_state(gst::State::Null).expect("sender stops");

    let (video_sent, audio_sent) = (video_sent.stamped(), audio_sent.stamped());
    let reached: HashMap<i64, i64> = video_sent.iter().copied().collect();
    // The first draw of each of the stream's pictures.
    let mut drawn: HashMap<i64, f64> = HashMap::new();
    for (pts_us, wall_ms) in pairs(&record, "frames") {
        if reached.contains_key(&(pts_us as i64)) {
            drawn.entry(pts_us as i64).or_insert(wall_ms);
        }
    }
    let mut latency_ms: Vec<f64> = drawn
        .iter()
        .map(|(pts, wall_ms)| wall_ms - reached[pts] as f64 / 1000.0)
        .collect();
    latency_ms.sort_by(f64::total_cmp);
    eprintln!(
        "{} over {}; rendition {}; catalog {}",
        record["transport"], record["userAgent"], record["track"], record["catalog"]
    );
    let first_drawn = drawn.keys().min().copied().unwrap_or(i64::MAX);
    eprintln!(
        "the page drew {} of the {} pictures moqsink sent ({:.1}%); {} came before its first",
        drawn.len(),
        video_sent.len(),
        100.0 * drawn.len() as f64 / video_sent.len().max(1) as f64,
        video_sent
            .iter()
            .filter(|(pts, _)| *pts < first_drawn)
            .count()
    );
    if !latency_ms.is_empty() {
        eprintln!(
            "latency, frame reaching moqsink to picture drawn: median {:.0} ms, p90 {:.0} ms, max {:.0} ms",
            percentile(&latency_ms, 0.5),
            percentile(&latency_ms, 0.9),
            percentile(&latency_ms, 1.0)
        );
    }

    // Audio: the player's playhead against when the frame under it reached moqsink.
    let audio_played = pairs(&record, "audio");
    let mut audio_latency_ms: Vec<f64> = audio_played
        .iter()
        .filter_map(|&(playhead_us, wall_ms)| {
            let playhead = playhead_us as i64;
            let (pts, reached) = audio_sent.iter().rev().find(|(pts, _)| *pts <= playhead)?;
            (playhead - pts < (AUDIO_FRAME_MS * 1000) as i64)
                .then(|| wall_ms - (reached + playhead - pts) as f64 / 1000.0)
        })
        .collect();
    audio_latency_ms.sort_by(f64::total_cmp);
    let audio_span_s = audio_played
        .first()
        .zip(audio_played.last())
        .map_or(0.0, |(a, b)| (b.0 - a.0) / 1e6);
    eprintln!(
        "audio: {} Opus frames sent, the page's playhead moved over {audio_span_s:.1} s{}",
        audio_sent.len(),
        if audio_latency_ms.is_empty() {
            String::new()
        } else {
            format!(
                ", latency median {:.0} ms",
                percentile(&audio_latency_ms, 0.5)
            )
        }
    );

    assert!(
        video_sent.len() as u64 >= frames,
        "the sender sent {} of {frames} pictures",
        video_sent.len()
    );
    assert!(
        drawn.len() as f64 >= MIN_DRAWN * video_sent.len() as f64,
        "the page drew {} of {} pictures; its log:\n{}",
        drawn.len(),
        video_sent.len(),
        record["log"]
    );
    // The root clock the page read from the catalog maps media time to when moqsink's
    // first frame (of either track) reached it.
    let clock = &record["catalog"]["clock"];
    let zero_ms = MOQ_EPOCH_UNIX_MS
        + clock["wall"]
            .as_f64()
            .expect("the catalog has a root clock")
            * 1000.0
            / clock["timescale"].as_f64().unwrap_or(1e6);
    let firsts_ms = [&video_sent, &audio_sent].map(|sent| (sent[0].1 - sent[0].0) as f64 / 1000.0);
    assert!(
        firsts_ms.iter().any(|first| (zero_ms - first).abs() < 20.0),
        "catalog clock {zero_ms:.1} ms; first video and audio frames {firsts_ms:.1?} ms"
    );
}
