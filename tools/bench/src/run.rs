//! One run: a system playing the reference stream through linkem with one profile.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gst::prelude::*;
use linkem::{Link, LinkConfig, Profile};

use crate::metrics::{
    AbrSummary, AudioFrame, FrameRow, RunFacts, SKIPPED, Summary, abr_summary, av_summary,
    fluid_model, handoff_of, intact_pictures, summarize,
};
use crate::moq_gst::MoqGst;
use crate::reference::{self, Au};
use crate::systems::{Direction, Endpoints, System, abr_rendition_kbit};
use crate::webrtc::{self, WebRtc};

/// Time after the sender stops for the last frames to be rendered.
const TAIL: Duration = Duration::from_secs(3);
/// Time the sender plays on after a run's frames, which are not scored: at the end of its
/// stream an encoder with lookahead hands over all it holds in one burst, which a live
/// stream never sees, and the run's last frames would pay for it.
const RUN_OUT: Duration = Duration::from_secs(2);
/// Time the sender gets to start listening before the receiver connects.
const SENDER_START: Duration = Duration::from_secs(1);
/// How long a WebRTC sender may take to register with the signalling server (webrtcsink
/// registers once it has encoded its first pictures).
const REGISTRATION: Duration = Duration::from_secs(30);

pub fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// CPU time (user + system) of this process or of its waited-for children, s.
pub fn cpu_seconds(who: i32) -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(who, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Everything one run needs.
pub struct RunSpec<'a> {
    pub system: &'a System,
    pub profile: &'a Profile,
    pub profile_name: &'a str,
    pub seconds: u64,
    pub repetition: u32,
    pub reference: &'a Path,
    pub aus: &'a [Au],
    pub tls: &'a (String, String, String),
    pub out: &'a Path,
    /// Set up when moq-gst is among the systems.
    pub moq_gst: Option<&'a MoqGst>,
    /// Set up when webrtc-gcc is among the systems.
    pub webrtc: Option<&'a WebRtc>,
}

impl RunSpec<'_> {
    /// moq-gst's set-up when this run is moq-gst's.
    fn moq_gst(&self) -> Result<Option<&MoqGst>, String> {
        match (self.system, self.moq_gst) {
            (System::MoqGst, None) => Err("moq-gst is not set up (moq-bench --moq-gst DIR)".into()),
            (System::MoqGst, Some(m)) => Ok(Some(m)),
            _ => Ok(None),
        }
    }

    /// The WebRTC plugins when this run is webrtc-gcc's.
    fn webrtc(&self) -> Result<Option<&WebRtc>, String> {
        match (self.system, self.webrtc) {
            (System::WebRtc, None) => {
                Err("the WebRTC plugins are not set up (moq-bench --webrtc DIR)".into())
            }
            (System::WebRtc, Some(w)) => Ok(Some(w)),
            _ => Ok(None),
        }
    }
}

/// The plugin set of a system whose sender and receiver run in child processes apart from
/// ours (moq-gst's, whose elements share our names; WebRTC's).
enum Apart<'a> {
    MoqGst(&'a MoqGst),
    /// With the signalling server's address.
    WebRtc(&'a WebRtc, String),
}

impl Apart<'_> {
    fn environment<'c>(&self, command: &'c mut Command, out: &Path) -> &'c mut Command {
        match self {
            Apart::MoqGst(moq_gst) => moq_gst.environment(command, out),
            Apart::WebRtc(webrtc, signalling) => webrtc.environment(command, out, signalling),
        }
    }
}

fn run_name(spec: &RunSpec) -> String {
    format!(
        "{}__{}__{}",
        spec.system.name(),
        spec.profile_name,
        spec.repetition
    )
}

/// The per-frame records of the receiver, by frame id.
#[derive(Default)]
pub struct Seen {
    arrived: HashMap<u64, i64>,
    by_pts: HashMap<u64, u64>,
    rendered: HashMap<u64, i64>,
    /// Frames whose slices reached the decoder other than they were sent.
    damaged: HashSet<u64>,
    /// Each frame's size as it reached the decoder, without its tag.
    sizes: HashMap<u64, usize>,
    /// When moqsrc had each frame whole (its `timestamp/x-moq-received` meta).
    received: HashMap<u64, i64>,
    /// When each frame reached moqsink (its `timestamp/x-unix` meta): after a live
    /// encoder, unlike the sender's log of when the picture was handed over.
    published: HashMap<u64, i64>,
    /// moqsrc's adaptive playout as it moved (`moq-playout`): unix µs, target and buffering
    /// now, ms.
    playout: Vec<(i64, f64, f64)>,
    /// Each frame's kind as it reached the decoder (in-process receivers).
    kinds: HashMap<u64, h264::FrameKind>,
    /// Systems with renditions (in-process receivers): the rendition played first, and
    /// each switch (unix µs, rendition switched to).
    first_rendition: Option<String>,
    switches: Vec<(i64, String)>,
    /// The latency the receiver's decoder reports (its LATENCY query share), ms.
    decoder_latency_ms: Option<f64>,
    /// The receiving element's `stats` at the end (in-process receivers): moqsrc counts
    /// what it dropped and why, which tells its losses from the sender's.
    receiver_stats: Option<gst::Structure>,
    /// Systems with audio: each video frame's running time, and the audio output.
    video_pts: HashMap<u64, i64>,
    audio: Vec<AudioFrame>,
}

impl Seen {
    /// A receiver child's report: `cpu_s,S`, `decoder_latency_ms,MS` (empty when not
    /// known), then `id,arrived_us,rendered_us,damaged,size,kind` per frame (kind as
    /// [`reference::kind_name`], empty when not known).
    fn write(&self, path: &Path, cpu_s: f64) -> Result<(), String> {
        let mut out =
            std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
        let opt = |v: Option<&i64>| v.map_or(String::new(), |v| v.to_string());
        writeln!(out, "cpu_s,{cpu_s}").map_err(|e| e.to_string())?;
        let decoder = self
            .decoder_latency_ms
            .map_or(String::new(), |ms| ms.to_string());
        writeln!(out, "decoder_latency_ms,{decoder}").map_err(|e| e.to_string())?;
        for (id, arrived) in &self.arrived {
            let damaged = u8::from(self.damaged.contains(id));
            let size = self.sizes.get(id).copied().unwrap_or(0);
            let kind = self.kinds.get(id).map_or("", |k| reference::kind_name(*k));
            writeln!(
                out,
                "{id},{arrived},{},{damaged},{size},{kind}",
                opt(self.rendered.get(id))
            )
            .map_err(|e| e.to_string())?;
        }
        out.flush().map_err(|e| e.to_string())
    }

    fn read(path: &Path) -> Result<(Seen, f64), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut lines = text.lines();
        let cpu_s = lines
            .next()
            .and_then(|l| l.strip_prefix("cpu_s,"))
            .and_then(|v| v.parse().ok())
            .ok_or("receiver report: no cpu_s line")?;
        let decoder_latency_ms = lines
            .next()
            .and_then(|l| l.strip_prefix("decoder_latency_ms,"))
            .ok_or("receiver report: no decoder_latency_ms line")?
            .parse()
            .ok();
        let mut seen = Seen {
            decoder_latency_ms,
            ..Seen::default()
        };
        for line in lines {
            let (numbers, kind) = line
                .rsplit_once(',')
                .ok_or(format!("receiver report: bad line {line:?}"))?;
            let fields: Vec<Option<i64>> = numbers.split(',').map(|f| f.parse().ok()).collect();
            let [Some(id), Some(arrived), rendered, Some(damaged), Some(size)] = fields[..] else {
                return Err(format!("receiver report: bad line {line:?}"));
            };
            let id = id as u64;
            if let Some(kind) = reference::kind_from_name(kind) {
                seen.kinds.insert(id, kind);
            }
            seen.arrived.insert(id, arrived);
            seen.sizes.insert(id, size as usize);
            if let Some(rendered) = rendered {
                seen.rendered.insert(id, rendered);
            }
            if damaged != 0 {
                seen.damaged.insert(id);
            }
        }
        Ok((seen, cpu_s))
    }
}

/// The receiving end of a run: in this process, or (systems that run apart) a `moq-bench
/// receiver` child that writes its report when its stdin closes.
enum Receiver {
    Here {
        pipeline: gst::Pipeline,
        seen: Arc<Mutex<Seen>>,
    },
    Child {
        child: Child,
        report: PathBuf,
    },
}

impl Receiver {
    fn start(
        spec: &RunSpec,
        apart: Option<&Apart>,
        at: &Endpoints,
        report: PathBuf,
    ) -> Result<Receiver, String> {
        if let Some(apart) = apart {
            let mut command = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
            command
                .arg("receiver")
                .args(["--system", &spec.system.name()])
                .args(["--addr", &at.receiver.to_string()])
                .arg("--out")
                .arg(&report)
                .stdin(Stdio::piped());
            let child = apart
                .environment(&mut command, spec.out)
                .spawn()
                .map_err(|e| format!("cannot start the receiver: {e}"))?;
            return Ok(Receiver::Child { child, report });
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let pipeline = receiver_pipeline(spec.system, at, &seen)?;
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| format!("receiver: {e}"))?;
        Ok(Receiver::Here { pipeline, seen })
    }

    fn collect_messages(&self, errors: &mut Vec<String>) {
        if let Receiver::Here { pipeline, seen } = self {
            drain_bus(pipeline, errors, seen);
        }
    }

    /// Stops the receiver; returns what it saw and the CPU time of a receiver child, s.
    fn finish(self) -> Result<(Seen, f64), String> {
        match self {
            Receiver::Here { pipeline, seen } => {
                seen.lock().unwrap().decoder_latency_ms = decoder_latency_ms(&pipeline);
                if let Some(src) = pipeline.by_name("src")
                    && src.find_property("stats").is_some()
                {
                    let stats: gst::Structure = src.property("stats");
                    let mut seen = seen.lock().unwrap();
                    if seen.first_rendition.is_none() && src.find_property("rendition").is_some() {
                        seen.first_rendition = stats.get::<String>("rendition").ok();
                    }
                    seen.receiver_stats = Some(stats);
                }
                let _ = pipeline.set_state(gst::State::Null);
                let seen = std::mem::take(&mut *seen.lock().unwrap());
                Ok((seen, 0.0))
            }
            Receiver::Child { mut child, report } => {
                drop(child.stdin.take());
                let deadline = Instant::now() + Duration::from_secs(15);
                while child.try_wait().map_err(|e| e.to_string())?.is_none() {
                    if Instant::now() > deadline {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err("the receiver did not stop".into());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Seen::read(&report)
            }
        }
    }
}

/// Takes the receiver's bus messages: errors into `errors`, rendition switches (moqsrc's
/// `moq-rendition`) and playout targets (`moq-playout`) into `seen` with when they were
/// taken.
fn drain_bus(pipeline: &gst::Pipeline, errors: &mut Vec<String>, seen: &Mutex<Seen>) {
    let bus = pipeline.bus().expect("bus");
    while let Some(msg) = bus.pop() {
        match msg.view() {
            gst::MessageView::Error(e) => errors.push(format!("{} ({:?})", e.error(), e.debug())),
            gst::MessageView::Element(e) => {
                let Some(s) = e.structure() else {
                    continue;
                };
                let mut seen = seen.lock().unwrap();
                match s.name().as_str() {
                    "moq-rendition" => {
                        if let (Ok(from), Ok(to)) = (s.get::<String>("from"), s.get::<String>("to"))
                        {
                            seen.first_rendition.get_or_insert(from);
                            seen.switches.push((unix_us(), to));
                        }
                    }
                    "moq-playout" => {
                        if let (Ok(target), Ok(delay)) =
                            (s.get::<f64>("target-ms"), s.get::<f64>("delay-ms"))
                        {
                            seen.playout.push((unix_us(), target, delay));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// The receiver child: plays `system` from `addr` until stdin closes, then writes its report.
pub fn receiver(system: &System, addr: SocketAddr, report: &Path) -> Result<(), String> {
    let at = Endpoints {
        sender: addr,
        receiver: addr,
        fingerprint: String::new(),
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let pipeline = receiver_pipeline(system, &at, &seen)?;
    pipeline
        .set_state(gst::State::Playing)
        .map_err(|e| format!("receiver: {e}"))?;
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut rest);
    let mut errors = Vec::new();
    drain_bus(&pipeline, &mut errors, &seen);
    if !errors.is_empty() {
        eprintln!("receiver errors: {errors:?}");
    }
    let decoder = decoder_latency_ms(&pipeline);
    let _ = pipeline.set_state(gst::State::Null);
    let mut seen = seen.lock().unwrap();
    seen.decoder_latency_ms = decoder;
    seen.write(report, cpu_seconds(libc::RUSAGE_SELF))
}

/// The minimum latency the decoder adds to what is upstream of it, as the receiver
/// pipeline's LATENCY queries report it (B-frame reordering, in frames of the stream).
fn decoder_latency_ms(pipeline: &gst::Pipeline) -> Option<f64> {
    let reported = |element: &str, pad: &str| {
        let pad = pipeline.by_name(element)?.static_pad(pad)?;
        let mut query = gst::query::Latency::new();
        pad.peer_query(&mut query).then(|| query.result().1)
    };
    let upstream = reported("decoder", "sink")?;
    let total = reported("sink", "sink")?;
    Some(total.saturating_sub(upstream).nseconds() as f64 / 1e6)
}

/// Links tsdemux's video pad to the parser, and its replacement when tsdemux announces the
/// program again (after losses it does): the end of the pad replaced is not the end of the
/// stream.
fn follow_demuxer_pads(pipeline: &gst::Pipeline) -> Result<(), String> {
    let demux = pipeline.by_name("demux").ok_or("no tsdemux named demux")?;
    let parse = pipeline
        .by_name("parse")
        .and_then(|p| p.static_pad("sink"))
        .ok_or("no parser")?;
    demux.connect_pad_added(move |_, pad| {
        if !pad.name().starts_with("video") {
            return;
        }
        if let Some(old) = parse.peer() {
            let _ = old.unlink(&parse);
        }
        pad.add_probe(gst::PadProbeType::EVENT_DOWNSTREAM, |_, info| {
            match info.event().map(|e| e.type_()) {
                Some(gst::EventType::Eos) => gst::PadProbeReturn::Drop,
                _ => gst::PadProbeReturn::Ok,
            }
        });
        if let Err(e) = pad.link(&parse) {
            eprintln!("receiver: linking {} failed: {e:?}", pad.name());
        }
    });
    Ok(())
}

fn receiver_pipeline(
    system: &System,
    at: &Endpoints,
    seen: &Arc<Mutex<Seen>>,
) -> Result<gst::Pipeline, String> {
    let link = match system.demuxes_ts() {
        true => " ",
        false => " ! ",
    };
    // The queue after the probe: a frame counts as arrived when the system delivered it,
    // not when the sink's wait on the clock let the streaming thread go on.
    let description = format!(
        "{}{link}h264parse name=parse ! video/x-h264,stream-format=byte-stream,alignment=au ! identity name=probe \
         ! queue max-size-buffers=0 max-size-bytes=0 max-size-time=0 ! avdec_h264 name=decoder \
         ! fakesink name=sink sync=true signal-handoffs=true",
        system.receiver(at)
    );
    let pipeline = gst::parse::launch(&description)
        .map_err(|e| format!("receiver pipeline {description:?}: {e}"))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline")?;
    if system.demuxes_ts() {
        follow_demuxer_pads(&pipeline)?;
    }
    if *system == System::WebRtc {
        webrtc::configure_receiver(&pipeline, at.receiver)?;
    }
    pipeline
        .by_name("sink")
        .ok_or("no sink")?
        .set_property("ts-offset", system.render_offset_ms() * 1_000_000);
    let probe_seen = seen.clone();
    let received_caps = gst::Caps::new_empty_simple("timestamp/x-moq-received");
    let published_caps = gst::Caps::new_empty_simple("timestamp/x-unix");
    pipeline
        .by_name("probe")
        .and_then(|p| p.static_pad("src"))
        .ok_or("no probe pad")?
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(buffer) = info.buffer()
                && let Ok(map) = buffer.map_readable()
                && let Some(tag) = reference::read_tag(&map)
            {
                let id = tag.id;
                let meta = |caps: &gst::Caps| {
                    buffer
                        .iter_meta::<gst::ReferenceTimestampMeta>()
                        .find(|m| m.reference().can_intersect(caps))
                        .map(|m| m.timestamp().useconds() as i64)
                };
                let (received, published) = (meta(&received_caps), meta(&published_caps));
                let mut seen = probe_seen.lock().unwrap();
                seen.arrived.entry(id).or_insert_with(unix_us);
                if let Some(received) = received {
                    seen.received.entry(id).or_insert(received);
                }
                if let Some(published) = published {
                    seen.published.entry(id).or_insert(published);
                }
                seen.sizes
                    .entry(id)
                    .or_insert(map.len().saturating_sub(reference::TAG_BYTES));
                if let Ok(au) = h264::classify(&map, h264::StreamFormat::ByteStream) {
                    seen.kinds.entry(id).or_insert(au.kind);
                }
                if !tag.intact {
                    seen.damaged.insert(id);
                }
                if let Some(pts) = buffer.pts() {
                    seen.by_pts.insert(pts.nseconds(), id);
                    seen.video_pts.insert(id, pts.useconds() as i64);
                }
            }
            gst::PadProbeReturn::Ok
        });
    if system.has_audio() {
        let audio_seen = seen.clone();
        pipeline
            .by_name("adec")
            .and_then(|d| d.static_pad("sink"))
            .ok_or("no audio decoder")?
            .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
                if let Some(frame) = info.buffer().and_then(|b| audio_frame(b)) {
                    audio_seen.lock().unwrap().audio.push(frame);
                }
                gst::PadProbeReturn::Ok
            });
    }
    let render_seen = seen.clone();
    pipeline
        .by_name("sink")
        .ok_or("no sink")?
        .connect("handoff", false, move |values| {
            let buffer = values[1].get::<gst::Buffer>().expect("handoff buffer");
            let now = unix_us();
            let mut seen = render_seen.lock().unwrap();
            if let Some(id) = buffer
                .pts()
                .and_then(|p| seen.by_pts.get(&p.nseconds()).copied())
            {
                seen.rendered.entry(id).or_insert(now);
            }
            None
        });
    Ok(pipeline)
}

/// An audio buffer as an [`AudioFrame`]: its offset is its position in the track.
fn audio_frame(buffer: &gst::BufferRef) -> Option<AudioFrame> {
    Some(AudioFrame {
        index: buffer.offset(),
        pts_us: buffer.pts()?.useconds() as i64,
        duration_us: buffer.duration().map_or(0, |d| d.useconds() as i64),
    })
}

fn spawn_sender(
    spec: &RunSpec,
    apart: Option<&Apart>,
    addr: SocketAddr,
    avail: &Path,
) -> Result<Child, String> {
    let mut command = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    if let Some(apart) = apart {
        apart.environment(&mut command, spec.out);
    }
    command
        .arg("sender")
        .args(["--system", &spec.system.name()])
        .args(["--addr", &addr.to_string()])
        .arg("--reference")
        .arg(spec.reference)
        .args(["--seconds", &(spec.seconds + RUN_OUT.as_secs()).to_string()])
        .args(["--cert", &spec.tls.0, "--key", &spec.tls.1])
        .arg("--out")
        .arg(avail)
        .spawn()
        .map_err(|e| format!("cannot start the sender: {e}"))
}

/// Waits until a WebRTC sender has said (by creating `registered`) that the signalling
/// server knows it, and a little longer for its announcement as a producer to be handled:
/// webrtcsrc looks for a producer once, when it connects.
fn wait_for_registration(sender: &mut Child, registered: &Path) -> Result<(), String> {
    let deadline = Instant::now() + REGISTRATION;
    while !registered.exists() {
        if let Some(status) = sender.try_wait().map_err(|e| e.to_string())? {
            return Err(format!(
                "the WebRTC sender exited before it registered ({status})"
            ));
        }
        if Instant::now() > deadline {
            let _ = sender.kill();
            let _ = sender.wait();
            return Err(format!(
                "the WebRTC sender did not register with the signalling server in {} s",
                REGISTRATION.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(SENDER_START / 2);
    Ok(())
}

/// Plays one run and returns its summary; writes the per-frame CSV and the link log.
pub fn run(spec: &RunSpec) -> Result<Summary, String> {
    let name = run_name(spec);
    let frames_dir = spec.out.join("frames");
    let links_dir = spec.out.join("links");
    std::fs::create_dir_all(&frames_dir).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&links_dir).map_err(|e| e.to_string())?;
    let avail_path = frames_dir.join(format!("{name}.sender.csv"));

    let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
    let (shaped, reverse) = (Some(spec.profile.clone()), spec.profile.reverse().cloned());
    let direction = spec.system.direction();
    let endpoint = moq_testkit::free_local_addr()?;
    let link = Link::start(LinkConfig {
        listen: local(0),
        forward: endpoint,
        downstream: if direction == Direction::SenderServes {
            shaped.clone()
        } else {
            reverse.clone()
        },
        upstream: if direction == Direction::SenderServes {
            reverse
        } else {
            shaped
        },
        seed: u64::from(spec.repetition) + 1,
        log: Some(links_dir.join(format!("{name}.csv"))),
    })
    .map_err(|e| format!("linkem: {e}"))?;
    let at = match direction {
        Direction::SenderServes => Endpoints {
            sender: endpoint,
            receiver: link.local_addr(),
            fingerprint: spec.tls.2.clone(),
        },
        Direction::SenderPushes => Endpoints {
            sender: link.local_addr(),
            receiver: endpoint,
            fingerprint: spec.tls.2.clone(),
        },
    };

    let children_cpu = cpu_seconds(libc::RUSAGE_CHILDREN);
    let own_cpu = cpu_seconds(libc::RUSAGE_SELF);
    let relay = match spec.moq_gst()? {
        Some(moq_gst) => Some(moq_gst.start_relay(endpoint, &spec.tls.0, &spec.tls.1)?),
        None => None,
    };
    let signalling = match spec.webrtc()? {
        Some(webrtc) => Some(webrtc.start_signalling()?),
        None => None,
    };
    let apart = match (spec.moq_gst()?, spec.webrtc()?, &signalling) {
        (Some(moq_gst), _, _) => Some(Apart::MoqGst(moq_gst)),
        (_, Some(webrtc), Some(signalling)) => Some(Apart::WebRtc(webrtc, signalling.uri.clone())),
        _ => None,
    };
    let registered = sender_file(&avail_path, "registered");
    if spec.system == &System::WebRtc {
        let _ = std::fs::remove_file(&registered);
    }
    let mut sender = spawn_sender(spec, apart.as_ref(), at.sender, &avail_path)?;
    match spec.system {
        System::WebRtc => wait_for_registration(&mut sender, &registered)?,
        _ => std::thread::sleep(SENDER_START),
    }
    let receiver = Receiver::start(
        spec,
        apart.as_ref(),
        &at,
        frames_dir.join(format!("{name}.receiver.csv")),
    )?;
    let deadline = Instant::now() + Duration::from_secs(spec.seconds) + Duration::from_secs(30);
    let mut errors = Vec::new();
    let sender_status = loop {
        if let Some(status) = sender.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = sender.kill();
            return Err(format!("{name}: the sender did not finish"));
        }
        receiver.collect_messages(&mut errors);
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(TAIL);
    receiver.collect_messages(&mut errors);
    let (seen, receiver_child_cpu) = receiver.finish()?;
    if let Some(stats) = &seen.receiver_stats {
        std::fs::write(
            frames_dir.join(format!("{name}.receiver-stats.txt")),
            format!("{stats}\n"),
        )
        .map_err(|e| e.to_string())?;
    }
    drop(relay);
    drop(signalling);
    // A receiver child's CPU counts as the receiver's; moq-relay's and the signalling
    // server's as the sender side's.
    let receiver_cpu = cpu_seconds(libc::RUSAGE_SELF) - own_cpu + receiver_child_cpu;
    let sender_cpu = cpu_seconds(libc::RUSAGE_CHILDREN) - children_cpu - receiver_child_cpu;
    let trace_start_us = link
        .trace_start()
        .map(|t| unix_us() - t.elapsed().as_micros() as i64);
    let totals = link.stop();
    if !sender_status.success() {
        return Err(format!("{name}: the sender failed ({sender_status})"));
    }
    if !errors.is_empty() {
        eprintln!("{name}: receiver errors: {errors:?}");
    }

    // A live-encoding sender's frames have the sizes its (first) encoder gave them; with
    // renditions, a frame received has the size of the rendition it came in.
    let sizes = read_sizes(&sender_file(&avail_path, "sizes"))?;
    let received_sizes = matches!(spec.system, System::Abr { .. });
    // A live encoder's frames are not the reference's kinds: which pictures reference
    // which (for `intact`) is what arrived. A frame that never did counts as referenced,
    // as every frame of these encoders (no B frames) is, unless the encoder never gave
    // it out: its rate control skipped it (openh264's frame skip).
    let live = spec.system.encodes_live();
    let handoffs = read_handoffs(&sender_file(&avail_path, "handoffs"))?;
    let scored = reference::due_within(spec.aus, Duration::from_secs(spec.seconds));
    let rows = read_sender_rows(&avail_path, spec.aus)?
        .into_iter()
        .filter(|row| (row.id as usize) < scored)
        .map(|mut row| {
            row.arrived_us = seen.arrived.get(&row.id).copied();
            row.rendered_us = seen.rendered.get(&row.id).copied();
            row.damaged = seen.damaged.contains(&row.id);
            row.received_us = seen.received.get(&row.id).copied();
            row.published_us = seen.published.get(&row.id).copied();
            row.handed_off_us = handoff_of(row.available_us, &handoffs);
            if let Some(size) = sizes.get(&row.id) {
                row.size = *size;
            }
            if received_sizes && let Some(size) = seen.sizes.get(&row.id) {
                row.size = *size;
            }
            if live {
                let kind = seen.kinds.get(&row.id).copied();
                row.kind = reference::kind_name(kind.unwrap_or(h264::FrameKind::Reference));
                let encoded = sizes.is_empty() || sizes.contains_key(&row.id);
                if !encoded && row.arrived_us.is_none() {
                    row.kind = SKIPPED;
                    row.size = 0;
                }
            }
            row
        })
        .collect::<Vec<_>>();
    write_rows(&frames_dir.join(format!("{name}.csv")), &rows)?;
    if !seen.playout.is_empty() {
        write_playout(
            &frames_dir.join(format!("{name}.playout.csv")),
            &seen.playout,
        )?;
    }
    check_media_crossed_link(spec.system, &rows, &totals)?;
    let av = if spec.system.has_audio() {
        write_av_log(
            &frames_dir.join(format!("{name}.av-received.csv")),
            &seen.audio,
            &seen.video_pts,
        )?;
        let (sent_audio, sent_video) = read_av_log(&sender_file(&avail_path, "av"))?;
        Some(av_summary(
            &sent_audio,
            &seen.audio,
            &sent_video,
            &seen.video_pts,
        ))
    } else {
        None
    };

    let sizes: Vec<usize> = rows.iter().map(|r| r.size).collect();
    let profile = spec.profile;
    let limited = (0..spec.seconds).all(|s| profile.rate_kbit_at(Duration::from_secs(s)) > 0);
    let link_kbit = if limited {
        (0..spec.seconds * 10)
            .map(|d| profile.rate_kbit_at(Duration::from_millis(d * 100)) as f64)
            .sum::<f64>()
            / (spec.seconds * 10) as f64
    } else {
        0.0
    };
    let fluid = if limited {
        fluid_model(&sizes, 24.0, |t| {
            profile.rate_kbit_at(Duration::from_secs_f64(t)) as f64
        })
    } else {
        Vec::new()
    };
    let facts = RunFacts {
        system: spec.system.name(),
        profile: spec.profile_name.to_owned(),
        repetition: spec.repetition,
        link_kbit,
        wire_bytes: totals.downstream.bytes_out + totals.upstream.bytes_out,
        sender_cpu_s: sender_cpu,
        receiver_cpu_s: receiver_cpu,
        fluid_latency_s: fluid,
        trace_start_us,
        configured_latency_ms: spec.system.configured_latency_ms(),
        decoder_latency_ms: seen.decoder_latency_ms,
    };
    let mut summary = summarize(&rows, &facts);
    summary.av = av;
    if matches!(spec.system, System::Abr { .. }) {
        summary.abr = Some(rendition_log(
            &frames_dir.join(format!("{name}.renditions.csv")),
            &seen,
            &rows,
            trace_start_us.unwrap_or(0),
        )?);
    }
    Ok(summary)
}

/// A system whose path its own machinery chooses (WebRTC's ICE) must have sent its media
/// through linkem: at least half of the bytes of the frames that arrived must have left
/// linkem downstream.
fn check_media_crossed_link(
    system: &System,
    rows: &[FrameRow],
    totals: &linkem::Totals,
) -> Result<(), String> {
    if *system != System::WebRtc {
        return Ok(());
    }
    let arrived: u64 = rows
        .iter()
        .filter(|r| r.arrived_us.is_some())
        .map(|r| r.size as u64)
        .sum();
    if totals.downstream.bytes_out * 2 < arrived {
        return Err(format!(
            "{}: {arrived} bytes of frames arrived but linkem forwarded {} downstream: the media \
             went around the emulated link",
            system.name(),
            totals.downstream.bytes_out
        ));
    }
    Ok(())
}

/// Writes the renditions a viewer played (`unix_us,track,kbit`: the first from the link
/// trace's start, then each switch) and sums them up over the frames rendered.
fn rendition_log(
    path: &Path,
    seen: &Seen,
    rows: &[FrameRow],
    start_us: i64,
) -> Result<AbrSummary, String> {
    let kbit = |track: &str| {
        abr_rendition_kbit(track).ok_or(format!("moq-abr: unknown rendition {track:?}"))
    };
    let first = seen
        .first_rendition
        .as_deref()
        .ok_or("moq-abr: the viewer never said which rendition it played")?;
    let mut timeline = vec![(start_us, first.to_owned())];
    timeline.extend(seen.switches.iter().cloned());
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
    writeln!(out, "unix_us,track,kbit").map_err(|e| e.to_string())?;
    let mut kbits = Vec::with_capacity(timeline.len());
    for (at, track) in &timeline {
        let k = kbit(track)?;
        writeln!(out, "{at},{track},{k}").map_err(|e| e.to_string())?;
        kbits.push((*at, k));
    }
    out.flush().map_err(|e| e.to_string())?;
    let rendered = rows.iter().filter_map(|r| r.rendered_us);
    let (from, to) = (rendered.clone().min(), rendered.max());
    Ok(abr_summary(
        &kbits,
        from.unwrap_or(start_us),
        to.unwrap_or(start_us),
    ))
}

/// What the receiver output of a system with audio, in the sender's log format (`AvLog`).
fn write_av_log(
    path: &Path,
    audio: &[AudioFrame],
    video: &HashMap<u64, i64>,
) -> Result<(), String> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
    for a in audio {
        writeln!(out, "a,{},{},{}", a.index, a.pts_us, a.duration_us).map_err(|e| e.to_string())?;
    }
    let mut ids: Vec<_> = video.iter().collect();
    ids.sort();
    for (id, pts) in ids {
        writeln!(out, "v,{id},{pts}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

/// The sender's A/V log (`AvLog`): audio frames, and video frames' running times by id.
fn read_av_log(path: &Path) -> Result<(Vec<AudioFrame>, HashMap<u64, i64>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut audio, mut video) = (Vec::new(), HashMap::new());
    for line in text.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        let num = |i: usize| -> Result<i64, String> {
            fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .ok_or(format!("A/V log: bad line {line:?}"))
        };
        match fields.first() {
            Some(&"a") => audio.push(AudioFrame {
                index: num(1)? as u64,
                pts_us: num(2)?,
                duration_us: num(3)?,
            }),
            Some(&"v") => {
                video.insert(num(1)? as u64, num(2)?);
            }
            _ => return Err(format!("A/V log: bad line {line:?}")),
        }
    }
    Ok((audio, video))
}

fn read_sender_rows(path: &Path, aus: &[Au]) -> Result<Vec<FrameRow>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::io::BufReader::new(file)
        .lines()
        .map(|line| {
            let line = line.map_err(|e| e.to_string())?;
            let (id, at) = line.split_once(',').ok_or("bad sender row")?;
            let id: u64 = id.parse().map_err(|_| "bad id")?;
            let au = aus.get(id as usize).ok_or("id beyond the reference")?;
            Ok(FrameRow {
                id,
                kind: reference::kind_name(au.kind),
                size: au.data.len(),
                available_us: at.parse().map_err(|_| "bad time")?,
                arrived_us: None,
                rendered_us: None,
                damaged: false,
                handed_off_us: None,
                received_us: None,
                published_us: None,
            })
        })
        .collect()
}

/// The sender's hand-off log (`written_us,taken_us` per media object QUIC took), sorted
/// by when each object was written; empty when the system does not report one.
fn read_handoffs(path: &Path) -> Result<Vec<(i64, i64)>, String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(Vec::new());
    };
    let mut handoffs = text
        .lines()
        .map(|line| {
            let (written, taken) = line.split_once(',').ok_or("bad hand-off row")?;
            Ok((
                written.parse().map_err(|_| "bad hand-off time")?,
                taken.parse().map_err(|_| "bad hand-off time")?,
            ))
        })
        .collect::<Result<Vec<(i64, i64)>, String>>()?;
    handoffs.sort_unstable();
    Ok(handoffs)
}

/// `id,bytes` lines, if the file exists.
fn read_sizes(path: &Path) -> Result<HashMap<u64, usize>, String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(HashMap::new());
    };
    text.lines()
        .map(|line| {
            let (id, size) = line.split_once(',').ok_or("bad size row")?;
            Ok((
                id.parse().map_err(|_| "bad id")?,
                size.parse().map_err(|_| "bad size")?,
            ))
        })
        .collect()
}

/// moqsrc's playout as it moved: `unix_us,target_ms,delay_ms`.
fn write_playout(path: &Path, playout: &[(i64, f64, f64)]) -> Result<(), String> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
    writeln!(out, "unix_us,target_ms,delay_ms").map_err(|e| e.to_string())?;
    for (at, target, delay) in playout {
        writeln!(out, "{at},{target:.1},{delay:.1}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

fn write_rows(path: &PathBuf, rows: &[FrameRow]) -> Result<(), String> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
    let opt = |v: Option<i64>| v.map_or(String::new(), |v| v.to_string());
    writeln!(
        out,
        "id,kind,size,available_us,arrived_us,rendered_us,damaged,intact,handed_off_us,received_us,published_us"
    )
    .map_err(|e| e.to_string())?;
    for (r, intact) in rows.iter().zip(intact_pictures(rows)) {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{}",
            r.id,
            r.kind,
            r.size,
            r.available_us,
            opt(r.arrived_us),
            opt(r.rendered_us),
            u8::from(r.damaged),
            u8::from(intact && r.rendered_us.is_some()),
            opt(r.handed_off_us),
            opt(r.received_us),
            opt(r.published_us)
        )
        .map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

/// The sender process: plays the reference out live into the system's sender pipeline and
/// writes `id,available_us` for every frame it hands over.
pub fn sender(
    system: &System,
    addr: SocketAddr,
    reference: &Path,
    seconds: u64,
    cert: &str,
    key: &str,
    out: &Path,
) -> Result<(), String> {
    let aus = reference::load(reference).map_err(|e| e.to_string())?;
    let at = Endpoints {
        sender: addr,
        receiver: addr,
        fingerprint: String::new(),
    };
    let description = format!(
        "appsrc name=src is-live=true format=time do-timestamp=false \
         caps=video/x-h264,stream-format=byte-stream,alignment=au,width=320,height=240,framerate=24/1 ! {}",
        system.sender(&at, cert, key)
    );
    let pipeline = gst::parse::launch(&description)
        .map_err(|e| format!("sender pipeline {description:?}: {e}"))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline")?;
    let src = pipeline
        .by_name("src")
        .and_downcast::<gst_app::AppSrc>()
        .ok_or("no appsrc")?;
    let log = Arc::new(Mutex::new(std::io::BufWriter::new(
        std::fs::File::create(out).map_err(|e| e.to_string())?,
    )));
    let live = system
        .encodes_live()
        .then(|| LiveEncoding::attach(&pipeline, system, &log, out, addr));
    let live = live.transpose()?;
    let av = system
        .has_audio()
        .then(|| AvLog::attach(&pipeline, &sender_file(out, "av")));
    let av = av.transpose()?;
    let handoffs = system
        .reports_stages()
        .then(|| log_handoffs(&pipeline, &sender_file(out, "handoffs")));
    let handoffs = handoffs.transpose()?;
    pipeline
        .set_state(gst::State::Playing)
        .map_err(|e| format!("sender: {e}"))?;
    let base = reference::start_ns(&aus);
    let start = Instant::now();
    let running0 = pipeline
        .current_running_time()
        .unwrap_or(gst::ClockTime::ZERO);
    let playing = reference::due_within(&aus, Duration::from_secs(seconds));
    for (id, au) in aus.iter().enumerate().take(playing) {
        let due = Duration::from_nanos(au.dts_ns - base);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        let mut buffer = gst::Buffer::from_mut_slice(reference::tag(&au.data, id as u64));
        let pts = running0 + gst::ClockTime::from_nseconds(au.pts_ns - base);
        {
            let b = buffer.get_mut().expect("writable");
            b.set_dts(running0 + gst::ClockTime::from_nseconds(au.dts_ns - base));
            b.set_pts(pts);
            b.set_duration(gst::ClockTime::from_nseconds(1_000_000_000 / 24));
            if au.kind != h264::FrameKind::Key {
                b.set_flags(gst::BufferFlags::DELTA_UNIT);
            }
        }
        match &live {
            // Available when the decoded picture reaches the encoders (see `LiveEncoding`).
            Some(live) => live.expect(pts, id as u64),
            None => {
                writeln!(log.lock().unwrap(), "{id},{}", unix_us()).map_err(|e| e.to_string())?
            }
        }
        src.push_buffer(buffer)
            .map_err(|e| format!("sender push: {e:?}"))?;
    }
    let _ = src.end_of_stream();
    if system.has_audio() {
        // The live audio source ends with the video.
        pipeline.send_event(gst::event::Eos::new());
    }
    let bus = pipeline.bus().expect("bus");
    let _ = bus.timed_pop_filtered(
        gst::ClockTime::from_seconds(5),
        &[gst::MessageType::Eos, gst::MessageType::Error],
    );
    let _ = pipeline.set_state(gst::State::Null);
    if let Some(live) = live {
        live.finish()?;
    }
    for log in av.map(|av| av.0).into_iter().chain(handoffs) {
        log.lock().unwrap().flush().map_err(|e| e.to_string())?;
    }
    log.lock().unwrap().flush().map_err(|e| e.to_string())
}

/// What reaches moqsink's pads in a system with audio, in running time: `a,index,pts_us,
/// duration_us` per audio frame (`index` counts the track's frames from 0, as moqsrc's
/// buffer offsets do), `v,id,pts_us` per video frame (by the reference's frame id).
struct AvLog(SharedLog);

impl AvLog {
    fn attach(pipeline: &gst::Pipeline, path: &Path) -> Result<AvLog, String> {
        let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
        let log: SharedLog = Arc::new(Mutex::new(std::io::BufWriter::new(file)));
        let sink = pipeline.by_name("m").ok_or("A/V sender: no moqsink m")?;
        let pad = |name: &str| {
            sink.static_pad(name)
                .ok_or(format!("A/V sender: no pad {name}"))
        };
        let audio_log = log.clone();
        let index = std::sync::atomic::AtomicU64::new(0);
        pad("audio_0")?.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(b) = info.buffer()
                && let Some(pts) = b.pts()
            {
                let duration = b.duration().map_or(0, |d| d.useconds());
                let index = index.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = writeln!(
                    audio_log.lock().unwrap(),
                    "a,{index},{},{duration}",
                    pts.useconds()
                );
            }
            gst::PadProbeReturn::Ok
        });
        let video_log = log.clone();
        pad("video_0")?.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(b) = info.buffer()
                && let Some(pts) = b.pts()
                && let Ok(map) = b.map_readable()
                && let Some(tag) = reference::read_tag(&map)
            {
                let _ = writeln!(video_log.lock().unwrap(), "v,{},{}", tag.id, pts.useconds());
            }
            gst::PadProbeReturn::Ok
        });
        Ok(AvLog(log))
    }
}

/// Logs `written_us,taken_us` of every media object moqsink `sink` hands to QUIC (its
/// `object-handoff` signal; the sender pipeline enables it).
fn log_handoffs(pipeline: &gst::Pipeline, path: &Path) -> Result<SharedLog, String> {
    let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
    let log: SharedLog = Arc::new(Mutex::new(std::io::BufWriter::new(file)));
    let sink = pipeline.by_name("sink").ok_or("sender: no moqsink sink")?;
    let writer = log.clone();
    sink.connect("object-handoff", false, move |values| {
        let track = values[1].get::<String>().unwrap_or_default();
        if track.starts_with("video")
            && let (Ok(written), Ok(taken)) = (values[4].get::<u64>(), values[5].get::<u64>())
        {
            let _ = writeln!(writer.lock().unwrap(), "{written},{taken}");
        }
        None
    });
    Ok(log)
}

/// Path of a sender side file next to its availability log (`….sender.csv`).
pub fn sender_file(avail: &Path, what: &str) -> PathBuf {
    let name = avail
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    avail.with_file_name(name.replace("sender.csv", &format!("{what}.csv")))
}

/// A PTS relative to the first, in 100 µs units: frames are tens of ms apart, and the
/// encoder may round its time base.
fn relative_key(pts: gst::ClockTime, first: gst::ClockTime) -> u64 {
    (pts.saturating_sub(first).nseconds() + 50_000) / 100_000
}

type SharedLog = Arc<Mutex<std::io::BufWriter<std::fs::File>>>;

/// The instrumentation of a sender whose encoders are in the loop (adaptive, renditions,
/// WebRTC): a frame is available when its decoded picture reaches the encoders (the
/// encoder's own latency counts, the harness's decoding does not); each encoded AU is
/// tagged with the frame id after its encoder, and the first encoder's sizes logged
/// (`….sizes.csv`); with rate control, the encoder target, the path estimate, the
/// encoder's bitrate and what moqsink gave up so far (objects, and groups by why) are
/// sampled every 100 ms (`….rate.csv`).
struct LiveEncoding {
    ids: Arc<Mutex<HashMap<u64, u64>>>,
    sizes: SharedLog,
    sampler: Option<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

/// Frame ids by PTS relative to the first, for one encoder's output.
type EncodedIds = Arc<Mutex<HashMap<u64, u64>>>;

impl LiveEncoding {
    /// `addr` is where the sender listens: for WebRTC, the port its ICE agent binds.
    fn attach(
        pipeline: &gst::Pipeline,
        system: &System,
        log: &SharedLog,
        avail: &Path,
        addr: SocketAddr,
    ) -> Result<LiveEncoding, String> {
        let create = |what| -> Result<SharedLog, String> {
            let file =
                std::fs::File::create(sender_file(avail, what)).map_err(|e| e.to_string())?;
            Ok(Arc::new(Mutex::new(std::io::BufWriter::new(file))))
        };
        let ids: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
        let sizes = create("sizes")?;
        let pad = |name: &str| {
            pipeline
                .by_name(name)
                .and_then(|e| e.static_pad("src"))
                .ok_or(format!("live-encoding sender: no {name}"))
        };
        // The encoder moves the timestamps (x264enc starts its output at 1000 h), so the
        // encoded AU is matched by its PTS relative to the first one on each side.
        let taggers = system.live_taggers();
        let encoded: Vec<EncodedIds> = taggers.iter().map(|_| EncodedIds::default()).collect();
        // webrtcsink's encoders start with the session, not with the first picture: its
        // encoder's input is matched by the PTS the picture had here (webrtcsink keeps the
        // timestamps and the pipeline's base time).
        let at_raw = (*system == System::WebRtc).then(EncodedIds::default);
        let (raw_ids, raw_log, raw_encoded) = (ids.clone(), log.clone(), encoded.clone());
        let raw_at_raw = at_raw.clone();
        let raw_first = std::sync::OnceLock::new();
        pad("raw")?.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            let Some(pts) = info.buffer().and_then(|b| b.pts()) else {
                return gst::PadProbeReturn::Ok;
            };
            if let Some(id) = raw_ids.lock().unwrap().remove(&pts.nseconds()) {
                let first = *raw_first.get_or_init(|| pts);
                let relative = relative_key(pts, first);
                for ids in &raw_encoded {
                    ids.lock().unwrap().insert(relative, id);
                }
                if let Some(at_raw) = &raw_at_raw {
                    at_raw.lock().unwrap().insert(pts.nseconds(), id);
                }
                let _ = writeln!(raw_log.lock().unwrap(), "{id},{}", unix_us());
            }
            gst::PadProbeReturn::Ok
        });
        for (i, (tagger, encoded)) in taggers.iter().zip(encoded).enumerate() {
            let tag_sizes = (i == 0).then(|| sizes.clone());
            pad(tagger)?.add_probe(gst::PadProbeType::BUFFER, tag_probe(encoded, tag_sizes));
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = match (system.is_adaptive(), at_raw) {
            (true, _) => Some(sample_rates(
                pipeline,
                create("rate")?,
                system.encoder().unwrap_or_default().bitrate_unit(),
                stop.clone(),
            )?),
            (false, Some(at_raw)) => Some(attach_webrtc(
                pipeline,
                addr.port(),
                at_raw,
                &sizes,
                create("rate")?,
                sender_file(avail, "registered"),
                stop.clone(),
            )?),
            (false, None) => None,
        };
        Ok(LiveEncoding {
            ids,
            sizes,
            sampler,
            stop,
        })
    }

    /// The frame `id` is pushed with this PTS.
    fn expect(&self, pts: gst::ClockTime, id: u64) {
        self.ids.lock().unwrap().insert(pts.nseconds(), id);
    }

    fn finish(mut self) -> Result<(), String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
        self.sizes
            .lock()
            .unwrap()
            .flush()
            .map_err(|e| e.to_string())
    }
}

/// A probe after an encoder that replaces each AU by the AU tagged with its frame id
/// (found in `encoded`), logging its size to `sizes` if given. The AU is in the stream
/// format the pad's caps say.
fn tag_probe(
    encoded: EncodedIds,
    sizes: Option<SharedLog>,
) -> impl Fn(&gst::Pad, &mut gst::PadProbeInfo) -> gst::PadProbeReturn + Send + Sync + 'static {
    let first = std::sync::OnceLock::new();
    move |pad, info| {
        let Some(gst::PadProbeData::Buffer(buffer)) = &mut info.data else {
            return gst::PadProbeReturn::Ok;
        };
        let id = buffer.pts().and_then(|pts| {
            let first = *first.get_or_init(|| pts);
            encoded.lock().unwrap().remove(&relative_key(pts, first))
        });
        let (Some(id), Ok(map)) = (id, buffer.map_readable()) else {
            return gst::PadProbeReturn::Ok;
        };
        if let Some(sizes) = &sizes {
            let _ = writeln!(sizes.lock().unwrap(), "{id},{}", map.len());
        }
        let format = pad
            .current_caps()
            .map_or(h264::StreamFormat::ByteStream, |caps| stream_format(&caps));
        let mut tagged = gst::Buffer::from_mut_slice(reference::tag_in(&map, id, format));
        drop(map);
        if let Some(b) = tagged.get_mut() {
            b.set_pts(buffer.pts());
            b.set_dts(buffer.dts());
            b.set_duration(buffer.duration());
            b.set_flags(buffer.flags());
        }
        *buffer = tagged;
        gst::PadProbeReturn::Ok
    }
}

/// The H.264 stream format of `caps`: AVC with the length size of its `codec_data` (avcC),
/// else byte-stream.
fn stream_format(caps: &gst::CapsRef) -> h264::StreamFormat {
    let Some(s) = caps.structure(0) else {
        return h264::StreamFormat::ByteStream;
    };
    if !matches!(s.get::<&str>("stream-format"), Ok("avc" | "avc3")) {
        return h264::StreamFormat::ByteStream;
    }
    let length_size = s
        .get::<gst::Buffer>("codec_data")
        .ok()
        .and_then(|b| b.map_readable().ok().and_then(|m| m.get(4).copied()))
        .map_or(4, |byte| (byte & 0x03) + 1);
    h264::StreamFormat::Avc { length_size }
}

/// The WebRTC sender's instrumentation ([`webrtc::configure_sender`]): `registered` is
/// created when the sender is known to the signalling server; each session's encoder takes
/// the frame ids of its input from `at_raw` (by the PTS the picture had at `raw`) and tags
/// its output with them, logging sizes to `sizes`; the encoder's bitrate (as GCC set it)
/// and `rtpgccbwe`'s estimate are sampled into `rates` every 100 ms until `stop`.
fn attach_webrtc(
    pipeline: &gst::Pipeline,
    ice_port: u16,
    at_raw: EncodedIds,
    sizes: &SharedLog,
    rates: SharedLog,
    registered: PathBuf,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, String> {
    type Slot = Arc<Mutex<Option<gst::Element>>>;
    let (encoder, gcc): (Slot, Slot) = Default::default();
    let (encoder_slot, gcc_slot, sizes) = (encoder.clone(), gcc.clone(), sizes.clone());
    webrtc::configure_sender(
        pipeline,
        ice_port,
        move || {
            if let Err(e) = std::fs::write(&registered, b"") {
                eprintln!("webrtc sender: {}: {e}", registered.display());
            }
        },
        move |enc| {
            let encoded = EncodedIds::default();
            let (input, output) = (enc.static_pad("sink"), enc.static_pad("src"));
            let (Some(input), Some(output)) = (input, output) else {
                eprintln!("webrtc sender: the encoder has no sink or src pad");
                return;
            };
            input.add_probe(
                gst::PadProbeType::BUFFER,
                encoder_input_probe(at_raw.clone(), encoded.clone()),
            );
            output.add_probe(
                gst::PadProbeType::BUFFER,
                tag_probe(encoded, Some(sizes.clone())),
            );
            *encoder_slot.lock().unwrap() = Some(enc.clone());
        },
        move |bwe| *gcc_slot.lock().unwrap() = Some(bwe.clone()),
    )?;
    Ok(std::thread::spawn(move || {
        let mut rates = rates.lock().unwrap();
        let _ = writeln!(rates, "unix_us,target_bps,estimated_bps,encoder_kbit");
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let kbit = encoder
                .lock()
                .unwrap()
                .as_ref()
                .map(|e| e.property::<u32>("bitrate"));
            let estimated = gcc
                .lock()
                .unwrap()
                .as_ref()
                .map_or(0, |g| g.property::<u32>("estimated-bitrate"));
            if let Some(kbit) = kbit {
                let target = u64::from(kbit) * 1000;
                let _ = writeln!(rates, "{},{target},{estimated},{kbit}", unix_us());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = rates.flush();
    }))
}

/// A probe before a webrtcsink encoder: the frame id of each picture, found in `at_raw` by
/// its PTS, goes to `encoded` under its PTS relative to the encoder's first picture (as
/// [`tag_probe`] looks it up after the encoder).
fn encoder_input_probe(
    at_raw: EncodedIds,
    encoded: EncodedIds,
) -> impl Fn(&gst::Pad, &mut gst::PadProbeInfo) -> gst::PadProbeReturn + Send + Sync + 'static {
    let first = std::sync::OnceLock::new();
    move |_, info| {
        if let Some(pts) = info.buffer().and_then(|b| b.pts()) {
            let first = *first.get_or_init(|| pts);
            if let Some(id) = at_raw.lock().unwrap().remove(&pts.nseconds()) {
                encoded.lock().unwrap().insert(relative_key(pts, first), id);
            }
        }
        gst::PadProbeReturn::Ok
    }
}

/// Samples the adaptive sender's encoder target, moqsink's estimate and the encoder's
/// bitrate (its property in units of `unit` bit/s) into `rates` every 100 ms until `stop`.
fn sample_rates(
    pipeline: &gst::Pipeline,
    rates: SharedLog,
    unit: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let (sink, enc) = (
        pipeline.by_name("sink").ok_or("adaptive sender: no sink")?,
        pipeline.by_name("enc").ok_or("adaptive sender: no enc")?,
    );
    Ok(std::thread::spawn(move || {
        let mut rates = rates.lock().unwrap();
        let _ = writeln!(
            rates,
            "unix_us,target_bps,estimated_bps,encoder_kbit,objects_dropped,groups_superseded,\
             groups_expired,groups_over_budget"
        );
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let target: u64 = sink.property("target-bitrate");
            let estimated: u64 = sink.property("estimated-bitrate");
            let encoder: u32 = enc.property("bitrate");
            let encoder = u64::from(encoder) * unit / 1000;
            // What the sender gave up so far (the video's layers, every subscriber), by why.
            let stats: gst::Structure = sink.property("stats");
            let given_up = [
                "objects-dropped",
                "groups-superseded",
                "groups-expired",
                "groups-over-budget",
            ]
            .map(|what| moq_testkit::roles::layers_stat(&stats, what).to_string())
            .join(",");
            let _ = writeln!(
                rates,
                "{},{target},{estimated},{encoder},{given_up}",
                unix_us()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = rates.flush();
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_childs_report_round_trips() {
        let mut seen = Seen::default();
        seen.arrived.insert(3, 1_000);
        seen.rendered.insert(3, 1_500);
        seen.sizes.insert(3, 1200);
        seen.kinds.insert(3, h264::FrameKind::Key);
        seen.arrived.insert(4, 1_040);
        seen.damaged.insert(4);
        seen.decoder_latency_ms = Some(41.5);
        let path =
            std::env::temp_dir().join(format!("moq-bench-report-{}.csv", std::process::id()));
        seen.write(&path, 2.5).unwrap();
        let (back, cpu_s) = Seen::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(cpu_s, 2.5);
        assert_eq!(back.decoder_latency_ms, Some(41.5));
        assert_eq!(back.rendered.get(&3), Some(&1_500));
        assert_eq!(back.kinds.get(&3), Some(&h264::FrameKind::Key));
        assert_eq!(back.kinds.get(&4), None, "a kind not known stays unknown");
        assert!(back.damaged.contains(&4) && !back.damaged.contains(&3));
        assert_eq!((back.arrived.len(), back.sizes.get(&3)), (2, Some(&1200)));
    }
}
