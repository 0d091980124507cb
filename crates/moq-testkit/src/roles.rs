//! A sender and a receiver that run as child processes, and the runner's handles on them.
//!
//! In the kit so that a runner can measure each side's memory on its own, or keep a sender
//! apart from what it measures: a binary hands its `send` and `receive` subcommands to
//! [`send`] and [`receive`] (`moq-soak` does), and the runner starts that binary with
//! [`SenderProc::start`] and [`ReceiverProc::start`]. A binary with a sender pipeline of
//! its own runs it with [`serve`] and is started with [`SenderProc::spawn`] (`moq-bench
//! --fanout` does).
//!
//! `send` publishes the reference stream through moqsink and prints, one line each:
//! `listening ADDRESS FINGERPRINT` once, then every second `tick FRAMES STATS` (the frames
//! moqsink published and its `stats` structure); [`serve`] is that loop for any sender
//! pipeline. `receive` plays a moqsrc → avdec_h264 → `fakesink sync=true` pipeline, obeys
//! `pause` / `play` on stdin and prints `frame WALL_US INDEX DISCONT KEY LATENCY_US` for
//! every buffer moqsrc outputs, `render WALL_US LATENCY_US` for every picture the sink
//! renders and `state NAME WALL_US` after each state change. Latency is the wall clock
//! minus the frame's availability time at the sender (its `timestamp/x-unix` reference
//! meta); both run on one machine. Either role stops when its stdin closes, prints
//! `error TEXT` and exits with 1 on a pipeline error.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gst::prelude::*;

use crate::media::{self, NAMESPACE, availability_us, unix_now_us};
use crate::proc::Child;

/// Longest wait for a child to come up (listening, or first frame).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
const TICK: Duration = Duration::from_secs(1);

/// Commands read on stdin; `None` when stdin closed.
pub fn stdin_commands() -> mpsc::Receiver<Option<String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(Some(line.trim().to_owned())).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    rx
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The runner reading us is gone if this fails; stdin's end will stop us.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn bus_error(msg: &gst::Message) -> Option<String> {
    match msg.view() {
        gst::MessageView::Error(err) => Some(format!(
            "{} from {}: {:?}",
            err.error(),
            msg.src()
                .map_or("?".into(), |s| s.path_string().to_string()),
            err.debug()
        )),
        _ => None,
    }
}

/// The `send` role: runs until stdin closes or `quit` arrives.
pub fn send(port: u16, moqsink_props: &str) -> Result<(), String> {
    send_with(&format!("listen=127.0.0.1:{port} {moqsink_props}"))
}

/// The `send` role with moqsink's properties as given, where it serves or publishes
/// included (`url=…` for a relay).
pub fn send_with(moqsink_props: &str) -> Result<(), String> {
    media::init()?;
    let pipeline = gst::parse::launch(&media::sender_description(moqsink_props))
        .map_err(|e| format!("sender pipeline: {e}"))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "sender: not a pipeline".to_string())?;
    serve(&pipeline, true)
}

/// The sender role's loop for any pipeline with a `moqsink name=sink`: plays it, prints
/// `listening ADDRESS FINGERPRINT` (a listening sink) or `connected ADDRESS` (a sink
/// publishing through a relay, on every connection) and, with `ticks`, a `tick` line every
/// second (reading `stats` costs the sender a little CPU), and runs until stdin closes or
/// `quit` arrives. Sets the pipeline to NULL when done.
pub fn serve(pipeline: &gst::Pipeline, ticks: bool) -> Result<(), String> {
    let sink = pipeline.by_name("sink").ok_or("sender: no moqsink")?;
    let commands = stdin_commands();
    let bus = pipeline.bus().ok_or("sender: no bus")?;
    pipeline
        .set_state(gst::State::Playing)
        .map_err(|e| format!("sender does not play: {e}"))?;
    let result = (|| {
        let mut next_tick = Instant::now() + TICK;
        loop {
            match commands.try_recv() {
                Ok(Some(cmd)) if cmd == "quit" => return Ok(()),
                Ok(Some(_)) | Err(mpsc::TryRecvError::Empty) => {}
                Ok(None) | Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
            }
            let wait = next_tick.saturating_duration_since(Instant::now());
            let ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
            if let Some(msg) = bus.timed_pop(gst::ClockTime::from_nseconds(ns)) {
                if let Some(err) = bus_error(&msg) {
                    return Err(err);
                }
                if let gst::MessageView::Element(e) = msg.view()
                    && let Some(s) = e.structure()
                {
                    let address = s.get::<String>("address").unwrap_or_default();
                    match s.name().as_str() {
                        "moq-listening" => {
                            let fingerprint = s.get::<String>("fingerprint").unwrap_or_default();
                            say(&format!("listening {address} {fingerprint}"));
                        }
                        "moq-connected" => say(&format!("connected {address}")),
                        _ => {}
                    }
                }
            }
            if Instant::now() >= next_tick {
                next_tick += TICK;
                if !ticks {
                    continue;
                }
                let stats = sink.property::<gst::Structure>("stats");
                say(&format!("tick {} {stats}", published_frames(&stats)));
            }
        }
    })();
    if let Err(err) = &result {
        say(&format!("error {err}"));
    }
    let _ = pipeline.set_state(gst::State::Null);
    result
}

/// A `u64` field of a stats structure, 0 when absent.
pub fn stat(stats: &gst::StructureRef, name: &str) -> u64 {
    stats
        .get::<u64>(name)
        .or_else(|_| stats.get::<u32>(name).map(u64::from))
        .unwrap_or(0)
}

/// A per-layer counter of moqsink's `stats` (`base-WHAT` and `enhancement-WHAT`) summed
/// over both layers of the video.
pub fn layers_stat(stats: &gst::StructureRef, what: &str) -> u64 {
    ["base", "enhancement"]
        .iter()
        .map(|layer| stat(stats, &format!("{layer}-{what}")))
        .sum()
}

/// Frames moqsink published (every kind): the next decode index.
pub fn published_frames(stats: &gst::StructureRef) -> u64 {
    ["key", "reference", "non-reference"]
        .iter()
        .map(|k| stat(stats, &format!("frames-{k}")))
        .sum()
}

/// The `receive` role: plays until stdin closes or `quit` arrives.
pub fn receive(url: &str, fingerprint: &str, moqsrc_props: &str) -> Result<(), String> {
    media::init()?;
    let description = format!(
        "moqsrc name=src url={url} tls-fingerprint={fingerprint} {moqsrc_props} \
         ! h264parse name=parse ! avdec_h264 ! fakesink name=out sync=true signal-handoffs=true"
    );
    let pipeline = gst::parse::launch(&description)
        .map_err(|e| format!("receiver pipeline: {e}"))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "receiver: not a pipeline".to_string())?;
    // moqsrc's pads appear with the catalog: its output is watched at the parser.
    pipeline
        .by_name("parse")
        .and_then(|parse| parse.static_pad("sink"))
        .ok_or("receiver: no parser sink pad")?
        .add_probe(gst::PadProbeType::BUFFER, |_, info| {
            if let Some(buffer) = info.buffer() {
                let now = unix_now_us();
                let latency = availability_us(buffer).map_or("-".into(), |a| (now - a).to_string());
                say(&format!(
                    "frame {now} {} {} {} {latency}",
                    buffer.offset(),
                    u8::from(buffer.flags().contains(gst::BufferFlags::DISCONT)),
                    u8::from(!buffer.flags().contains(gst::BufferFlags::DELTA_UNIT)),
                ));
            }
            gst::PadProbeReturn::Ok
        });
    pipeline
        .by_name("out")
        .ok_or("receiver: no fakesink")?
        .connect("handoff", false, |values| {
            let now = unix_now_us();
            let latency = values
                .get(1)
                .and_then(|v| v.get::<gst::Buffer>().ok())
                .and_then(|b| availability_us(&b))
                .map_or("-".into(), |a| (now - a).to_string());
            say(&format!("render {now} {latency}"));
            None
        });
    let commands = stdin_commands();
    let bus = pipeline.bus().ok_or("receiver: no bus")?;
    pipeline
        .set_state(gst::State::Playing)
        .map_err(|e| format!("receiver does not play: {e}"))?;
    say(&format!("state playing {}", unix_now_us()));
    let result = (|| {
        loop {
            match commands.try_recv() {
                Ok(Some(cmd)) => match cmd.as_str() {
                    "quit" => return Ok(()),
                    "pause" | "play" => {
                        let (state, name) = if cmd == "pause" {
                            (gst::State::Paused, "paused")
                        } else {
                            (gst::State::Playing, "playing")
                        };
                        pipeline
                            .set_state(state)
                            .map_err(|e| format!("receiver cannot go to {name}: {e}"))?;
                        say(&format!("state {name} {}", unix_now_us()));
                    }
                    other => say(&format!("unknown command {other:?}")),
                },
                Err(mpsc::TryRecvError::Empty) => {}
                Ok(None) | Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
            }
            if let Some(msg) = bus.timed_pop(gst::ClockTime::from_mseconds(20))
                && let Some(err) = bus_error(&msg)
            {
                return Err(err);
            }
        }
    })();
    if let Err(err) = &result {
        say(&format!("error {err}"));
    }
    let _ = pipeline.set_state(gst::State::Null);
    result
}

/// What the sender reported in one `tick` line.
#[derive(Debug, Clone)]
pub struct SenderTick {
    pub at: Instant,
    pub frames: u64,
    pub stats: gst::Structure,
}

/// The runner's handle on a sender child (the `send` role, or a [`serve`] loop).
pub struct SenderProc {
    child: Child,
    pub address: SocketAddr,
    pub fingerprint: String,
    /// Every `tick` so far (one a second).
    pub ticks: Vec<SenderTick>,
}

impl SenderProc {
    /// Starts `exe send --port 0 --moqsink-props PROPS` (a binary that hands `send` to
    /// [`send`]) and waits until it listens.
    pub fn start(exe: &Path, moqsink_props: &str) -> Result<SenderProc, String> {
        media::init()?;
        let args = vec![
            "send".to_string(),
            "--port".into(),
            "0".into(),
            "--moqsink-props".into(),
            moqsink_props.into(),
        ];
        SenderProc::spawn(exe, args)
    }

    /// Starts `exe args...`, a program that prints what [`serve`] prints, and waits until
    /// its moqsink listens (`listening ADDRESS FINGERPRINT`) or has connected to a relay
    /// (`connected ADDRESS`: the relay's address, no fingerprint).
    pub fn spawn(exe: &Path, args: Vec<String>) -> Result<SenderProc, String> {
        // A wrapper (e.g. `heaptrack -o /tmp/sender`) for looking into the sender's heap;
        // the RSS figures are then the wrapper's, not the sender's.
        let mut child = match std::env::var("MOQ_SOAK_SENDER_WRAPPER") {
            Ok(wrapper) if !wrapper.trim().is_empty() => {
                let mut words = wrapper.split_whitespace().map(String::from);
                let program = words.next().unwrap_or_default();
                let mut all: Vec<String> = words.collect();
                all.push(exe.display().to_string());
                all.extend(args);
                Child::spawn("sender", Path::new(&program), &all)?
            }
            _ => Child::spawn("sender", exe, &args)?,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "sender: neither listening nor connected after {START_TIMEOUT:?}; stderr:\n{}",
                    child.stderr_tail()
                ));
            }
            let Some(line) = child.next_line(left)? else {
                continue;
            };
            let mut words = line.text.split_whitespace();
            match words.next() {
                Some(ready @ ("listening" | "connected")) => {
                    let address = words
                        .next()
                        .and_then(|a| a.parse().ok())
                        .ok_or_else(|| format!("sender: bad line {:?}", line.text))?;
                    let fingerprint = match ready {
                        "listening" => words.next().unwrap_or_default().to_owned(),
                        _ => String::new(),
                    };
                    return Ok(SenderProc {
                        child,
                        address,
                        fingerprint,
                        ticks: Vec::new(),
                    });
                }
                Some("error") => return Err(format!("sender: {}", line.text)),
                _ => {}
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn url(&self) -> String {
        format!("moqt://{}/{NAMESPACE}", self.address)
    }

    /// Reads what the sender printed since the last call.
    pub fn poll(&mut self) -> Result<(), String> {
        for line in self.child.pending_lines()? {
            let Some((kind, rest)) = line.text.split_once(' ') else {
                continue;
            };
            match kind {
                "tick" => {
                    let (frames, stats) = rest.split_once(' ').unwrap_or((rest, ""));
                    let (Ok(frames), Ok(stats)) = (frames.parse(), stats.parse::<gst::Structure>())
                    else {
                        return Err(format!("sender: bad line {:?}", line.text));
                    };
                    self.ticks.push(SenderTick {
                        at: line.at,
                        frames,
                        stats,
                    });
                }
                "error" => return Err(format!("sender: {rest}")),
                _ => {}
            }
        }
        Ok(())
    }

    pub fn latest(&self) -> Option<&SenderTick> {
        self.ticks.last()
    }

    /// Frames published as reported by the last tick read at or before `at`.
    pub fn frames_at(&self, at: Instant) -> Option<u64> {
        self.ticks
            .iter()
            .take_while(|t| t.at <= at)
            .last()
            .map(|t| t.frames)
    }

    /// A counter of the latest stats, 0 before the first tick.
    pub fn stat(&self, name: &str) -> u64 {
        self.latest().map_or(0, |t| stat(&t.stats, name))
    }

    /// A per-layer counter of the latest stats over both layers ([`layers_stat`]).
    pub fn layers_stat(&self, what: &str) -> u64 {
        self.latest().map_or(0, |t| layers_stat(&t.stats, what))
    }

    /// Media bitrate (kbit/s) over the ticks read so far.
    pub fn kbit_per_s(&self) -> Option<f64> {
        let (first, last) = (self.ticks.first()?, self.ticks.last()?);
        let bytes = |t: &SenderTick| -> u64 {
            ["key", "reference", "non-reference"]
                .iter()
                .map(|k| stat(&t.stats, &format!("bytes-{k}")))
                .sum()
        };
        let seconds = last.at.duration_since(first.at).as_secs_f64();
        (seconds > 0.0).then(|| (bytes(last) - bytes(first)) as f64 * 8.0 / seconds / 1000.0)
    }
}

/// One buffer moqsrc output in the receiver child.
#[derive(Debug, Clone, Copy)]
pub struct OutputFrame {
    pub wall_us: i64,
    pub index: u64,
    pub discont: bool,
    pub key: bool,
    pub latency_us: Option<i64>,
}

/// One picture the receiver child's sink rendered.
#[derive(Debug, Clone, Copy)]
pub struct Render {
    pub wall_us: i64,
    pub latency_us: Option<i64>,
}

/// The runner's handle on a `receive` child.
pub struct ReceiverProc {
    child: Child,
    pub frames: Vec<OutputFrame>,
    pub renders: Vec<Render>,
    /// (state, wall µs) after every state change.
    pub states: Vec<(String, i64)>,
}

impl ReceiverProc {
    /// Starts `exe receive --url URL --fingerprint HEX` (a binary that hands `receive` to
    /// [`receive`]).
    pub fn start(exe: &Path, url: &str, fingerprint: &str) -> Result<ReceiverProc, String> {
        let args = vec![
            "receive".to_string(),
            "--url".into(),
            url.into(),
            "--fingerprint".into(),
            fingerprint.into(),
        ];
        Ok(ReceiverProc {
            child: Child::spawn("receiver", exe, &args)?,
            frames: Vec::new(),
            renders: Vec::new(),
            states: Vec::new(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn command(&mut self, text: &str) -> Result<(), String> {
        self.child.command(text)
    }

    /// Reads what the receiver printed since the last call.
    pub fn poll(&mut self) -> Result<(), String> {
        for line in self.child.pending_lines()? {
            self.parse(&line.text)?;
        }
        Ok(())
    }

    fn parse(&mut self, text: &str) -> Result<(), String> {
        let bad = || format!("receiver: bad line {text:?}");
        let words: Vec<&str> = text.split_whitespace().collect();
        let latency = |w: &str| w.parse::<i64>().ok();
        match words.as_slice() {
            ["frame", wall, index, discont, key, lat] => self.frames.push(OutputFrame {
                wall_us: wall.parse().map_err(|_| bad())?,
                index: index.parse().map_err(|_| bad())?,
                discont: *discont == "1",
                key: *key == "1",
                latency_us: latency(lat),
            }),
            ["render", wall, lat] => self.renders.push(Render {
                wall_us: wall.parse().map_err(|_| bad())?,
                latency_us: latency(lat),
            }),
            ["state", name, wall] => self
                .states
                .push((name.to_string(), wall.parse().map_err(|_| bad())?)),
            ["error", ..] => return Err(format!("receiver: {text}")),
            _ => {}
        }
        Ok(())
    }

    /// Waits until `done` holds, polling; fails after `timeout`.
    pub fn wait_until(
        &mut self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&ReceiverProc) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll()?;
            if done(self) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "receiver: {what}: not after {timeout:?}; stderr:\n{}",
                    self.child.stderr_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
