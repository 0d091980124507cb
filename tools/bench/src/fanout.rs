//! `moq-bench --fanout`: how many viewers one moqsink serves.
//!
//! Through a moq-relay cluster too (`--cluster`): three nodes, the sender publishing to
//! the first, the subscribers spread over all three in turn, each node's CPU and RSS.
//!
//! One sender process (`moq-bench fanout-sender`) plays a ~1 Mbit/s H.264 clip (24 fps,
//! GoP 24, no B frames; encoded once, looped) through `appsrc ! h264parse ! moqsink`
//! (default delivery, `sync=true`: every frame published at its running time on the
//! clock), so its CPU (utime + stime from `/proc/PID/stat`) and RSS (`VmRSS`) are its own
//! and the encoder's cost is not among them. N subscribers in this process, each its own
//! QUIC connection (moq-session, nothing decoded), take the `video` track of broadcast
//! `live`, from the sink directly or through moq-relay (`/anon/live`), whose CPU and RSS
//! are measured the same way. For every object: receipt wall time − the frame header's
//! availability time (when the sender had the frame) = delivery latency.
//!
//! Per (path, build, N): after all N receive media, a warm-up, then a measurement window;
//! the objects whose frames became available in the window count, whenever they arrive
//! up to [`LATE_GRACE`] after it. Frames expected = the decode indices any subscriber saw
//! in the window, first to last; objects expected = frames × N (a subscriber that never
//! connected counts as one that lost everything).

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gst::prelude::*;
use moq_media::FrameHeader;
use moq_media::metrics::quantile;
use moq_session::tls::{self, Trust};
use moq_session::{Located, MoqUrl, SessionConfig, SubscribeOptions, TrackEvent};
use moq_testkit::proc::RssSampler;
use moq_testkit::roles::SenderProc;
use serde::Serialize;
use tokio::sync::watch;

use crate::fanout_abr::{self, AbrViewers, Second};
use crate::reference::{self, Au, Encoding};
use crate::run::{cpu_seconds, unix_us};

/// Viewer counts measured by default.
pub const DEFAULT_COUNTS: [usize; 5] = [1, 10, 50, 100, 200];
pub const DEFAULT_WARMUP_S: u64 = 3;
pub const DEFAULT_MEASURE_S: u64 = 20;
/// Objects of frames available in the window still count when they arrive this long after it.
const LATE_GRACE: Duration = Duration::from_secs(2);
/// Longest wait for all N subscribers to receive their first object.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for one network step of a subscriber (connect, SUBSCRIBE_OK).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the subscriber tasks to hand back what they recorded.
const COLLECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The latency bound the fan-out goal names, ms.
pub const P99_LIMIT_MS: f64 = 100.0;
const FPS: u64 = 24;
/// Length of the clip the sender loops: whole GoPs, so every lap starts with a keyframe.
const CLIP_SECONDS: u64 = 10;
/// Frames reach moqsink this much before their running time, so `sync=true` paces them.
const LEAD: gst::ClockTime = gst::ClockTime::from_mseconds(20);
/// The clip's bitrate unless `--clip-kbit` says otherwise, kbit/s.
pub const DEFAULT_CLIP_KBIT: u32 = 1000;
const CLIP_WIDTH: u32 = 640;
const CLIP_HEIGHT: u32 = 360;

/// x264's settings for the clip at `kbit`: 24 fps, GoP 24, no B frames, no lookahead (a
/// live encoder's settings).
pub fn clip_x264(kbit: u32) -> String {
    format!(
        "bitrate={kbit} tune=zerolatency key-int-max=24 speed-preset=veryfast option-string=scenecut=0"
    )
}
/// The relay's root open to anyone, and the broadcast.
const RELAY_ROOT: &str = "anon";
const BROADCAST: &str = "live";
const TRACK: &str = "video";

/// What `--fanout` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub counts: Vec<usize>,
    pub warmup_s: u64,
    pub measure_s: u64,
    /// Another build's moqsink (a directory with `libgstmoqt.so`, or `libgstmoqsink.so` of
    /// an older build) and its label: the
    /// direct path is also measured with it, side by side with this build's.
    pub other_sink: Option<(String, PathBuf)>,
    /// The clip's bitrate, kbit/s.
    pub clip_kbit: u32,
    pub direct: bool,
    pub relay: bool,
    /// Also through a cluster of [`CLUSTER_NODES`] moq-relay nodes.
    pub cluster: bool,
    /// Percent of the viewers that are ABR players behind links of `abr_kbit` (0: none).
    /// The sender then publishes a ladder ([`fanout_abr::ladder`]), and each cluster run
    /// is followed by the same N with that share of ABR viewers.
    pub abr_share: u32,
    pub abr_kbit: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            counts: DEFAULT_COUNTS.to_vec(),
            warmup_s: DEFAULT_WARMUP_S,
            measure_s: DEFAULT_MEASURE_S,
            other_sink: None,
            clip_kbit: DEFAULT_CLIP_KBIT,
            direct: true,
            relay: true,
            cluster: false,
            abr_share: 0,
            abr_kbit: fanout_abr::DEFAULT_ABR_KBIT,
        }
    }
}

/// How the subscribers reach the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Direct,
    Relay,
    Cluster,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Relay => "relay",
            Route::Cluster => "cluster",
        }
    }

    /// The moq-relay nodes the route goes through.
    fn nodes(self) -> usize {
        match self {
            Route::Direct => 0,
            Route::Relay => 1,
            Route::Cluster => CLUSTER_NODES,
        }
    }
}

/// Nodes of the `cluster` path: the first (where the sender publishes) and two joined to
/// it with `--cluster-connect`.
pub const CLUSTER_NODES: usize = 3;

/// A moqsink build: the directory GStreamer loads it from.
#[derive(Debug, Clone, Serialize)]
pub struct Build {
    pub label: String,
    pub plugin_dir: PathBuf,
}

impl Build {
    fn new(label: &str, dir: &Path) -> Result<Build, String> {
        // libgstmoqt.so since both elements share one plugin; libgstmoqsink.so before.
        if !["libgstmoqt.so", "libgstmoqsink.so"]
            .iter()
            .any(|lib| dir.join(lib).is_file())
        {
            return Err(format!(
                "{}: no libgstmoqt.so (build it with cargo build --release -p gst-plugin-moqt)",
                dir.display()
            ));
        }
        let plugin_dir = dir
            .canonicalize()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Build {
            label: label.to_owned(),
            plugin_dir,
        })
    }
}

/// One object as a subscriber received it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub index: u64,
    /// When the sender had the frame (its header's availability time), UNIX µs.
    pub available_us: i64,
    /// When its last byte arrived here, UNIX µs.
    pub received_us: i64,
    pub bytes: u32,
}

/// Delivery figures of one run over its window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// Frames the sender made available in the window (per subscriber).
    pub frames: u64,
    pub objects_expected: u64,
    pub objects_received: u64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub latency_max_ms: Option<f64>,
    /// The highest per-subscriber p99.
    pub worst_subscriber_p99_ms: Option<f64>,
    /// Media bitrate of the window's frames (object payloads), kbit/s.
    pub stream_kbit: f64,
}

/// Delivery over `[from_us, to_us)` (availability times) for `requested` subscribers, of
/// which those in `subscribers` recorded something.
pub fn delivery(
    subscribers: &[Vec<Sample>],
    requested: usize,
    from_us: i64,
    to_us: i64,
) -> Delivery {
    let in_window = |s: &&Sample| s.available_us >= from_us && s.available_us < to_us;
    let mut sizes: HashMap<u64, u32> = HashMap::new();
    for s in subscribers.iter().flatten().filter(in_window) {
        sizes.insert(s.index, s.bytes);
    }
    let frames = match (sizes.keys().min(), sizes.keys().max()) {
        (Some(first), Some(last)) => last - first + 1,
        _ => 0,
    };
    let (mut all, mut received, mut worst) = (Vec::new(), 0u64, None::<i64>);
    for samples in subscribers {
        let window: Vec<&Sample> = samples.iter().filter(in_window).collect();
        let mut indices: Vec<u64> = window.iter().map(|s| s.index).collect();
        indices.sort_unstable();
        indices.dedup();
        received += indices.len() as u64;
        let mut latencies: Vec<i64> = window
            .iter()
            .map(|s| s.received_us - s.available_us)
            .collect();
        if let Some(p99) = quantile(&mut latencies, 0.99) {
            worst = Some(worst.map_or(p99, |w| w.max(p99)));
        }
        all.extend(latencies);
    }
    let ms = |us: Option<i64>| us.map(|us| us as f64 / 1000.0);
    let seconds = (to_us - from_us) as f64 / 1e6;
    let bytes: u64 = sizes.values().map(|b| u64::from(*b)).sum();
    Delivery {
        frames,
        objects_expected: frames * requested as u64,
        objects_received: received,
        latency_p50_ms: ms(quantile(&mut all, 0.5)),
        latency_p99_ms: ms(quantile(&mut all, 0.99)),
        latency_max_ms: ms(all.iter().max().copied()),
        worst_subscriber_p99_ms: ms(worst),
        stream_kbit: if seconds > 0.0 {
            bytes as f64 * 8.0 / seconds / 1000.0
        } else {
            0.0
        },
    }
}

/// CPU time a process spent, in clock ticks: utime + stime (fields 14 and 15 of
/// `/proc/PID/stat`, all its threads), from that file's text.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces or parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU seconds process `pid` has used, `None` once it is gone.
fn process_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    Some(stat_cpu_ticks(&stat)? as f64 / hz)
}

/// CPU time over wall time, in % of one core.
pub fn core_pct(cpu_s: f64, wall_s: f64) -> f64 {
    if wall_s > 0.0 {
        100.0 * cpu_s / wall_s
    } else {
        0.0
    }
}

/// CPU µs per object, `None` without objects.
pub fn us_per_object(cpu_s: f64, objects: u64) -> Option<f64> {
    (objects > 0).then(|| cpu_s * 1e6 / objects as f64)
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// Maps `Instant`s onto the wall clock (UNIX µs) from one reading of both.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    instant: Instant,
    unix_us: i64,
}

impl WallClock {
    fn now() -> WallClock {
        WallClock {
            instant: Instant::now(),
            unix_us: unix_us(),
        }
    }

    pub fn unix_us(&self, at: Instant) -> i64 {
        match at.checked_duration_since(self.instant) {
            Some(after) => self.unix_us + after.as_micros() as i64,
            None => self.unix_us - self.instant.duration_since(at).as_micros() as i64,
        }
    }
}

/// The figures of one (path, build, N).
#[derive(Debug, Clone, Serialize)]
pub struct FanoutRun {
    pub path: String,
    pub build: String,
    pub subscribers: usize,
    /// Subscribers that received media before the warm-up.
    pub connected: usize,
    /// Subscribers whose session or track ended before the run did.
    pub dropped: usize,
    pub window_s: f64,
    #[serde(flatten)]
    pub delivery: Delivery,
    pub received_ratio: Option<f64>,
    pub frames_lost: u64,
    pub sender_cpu_pct: f64,
    /// Sender CPU per object the subscribers received in the window.
    pub sender_cpu_us_per_object: Option<f64>,
    pub sender_rss_mb: Option<f64>,
    /// Every relay node together (the sum of their CPU and of their RSS).
    pub relay_cpu_pct: Option<f64>,
    pub relay_cpu_us_per_object: Option<f64>,
    pub relay_rss_mb: Option<f64>,
    /// Each node of a cluster, the sender's first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeLoad>,
    /// This process (the N subscribers) in % of one core: a saturated receiving side
    /// shows up as latency too.
    pub subscribers_cpu_pct: f64,
    pub bad_headers: u64,
    /// The first few distinct subscriber errors.
    pub subscriber_errors: Vec<String>,
    /// The ABR viewers beside the `subscribers` raw ones, in a run with some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abr: Option<AbrViewers>,
}

/// One relay node of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeLoad {
    /// Subscribers sent to it.
    pub subscribers: usize,
    pub cpu_pct: f64,
    pub rss_mb: Option<f64>,
}

/// The smallest N at which a (path, build) had p99 over [`P99_LIMIT_MS`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Threshold {
    pub path: String,
    pub build: String,
    pub first_n_over: Option<usize>,
    pub largest_n: usize,
}

/// Per (path, build) in the order first seen: the smallest N whose p99 was over the
/// limit (a run without latencies counts as over), and the largest N measured.
pub fn thresholds(runs: &[FanoutRun], limit_ms: f64) -> Vec<Threshold> {
    let mut out: Vec<Threshold> = Vec::new();
    for run in runs {
        let over = run.delivery.latency_p99_ms.is_none_or(|p99| p99 > limit_ms);
        let at = match out
            .iter()
            .position(|t| t.path == run.path && t.build == run.build)
        {
            Some(at) => at,
            None => {
                out.push(Threshold {
                    path: run.path.clone(),
                    build: run.build.clone(),
                    first_n_over: None,
                    largest_n: 0,
                });
                out.len() - 1
            }
        };
        let t = &mut out[at];
        t.largest_n = t.largest_n.max(run.subscribers);
        if over {
            t.first_n_over = Some(
                t.first_n_over
                    .map_or(run.subscribers, |n| n.min(run.subscribers)),
            );
        }
    }
    out
}

/// The clip the sender loops.
#[derive(Debug, Clone, Serialize)]
pub struct ClipFacts {
    pub width: u32,
    pub height: u32,
    pub fps: u64,
    pub gop: u64,
    pub frames: usize,
    pub kbit: f64,
    pub x264: String,
}

/// Everything `fanout.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub clip: ClipFacts,
    pub warmup_s: u64,
    pub measure_s: u64,
    pub late_grace_s: f64,
    pub cpus: usize,
    pub builds: Vec<Build>,
    pub load_before: Option<[f64; 3]>,
    pub load_after: Option<[f64; 3]>,
    pub p99_limit_ms: f64,
    pub runs: Vec<FanoutRun>,
    pub first_p99_over_limit: Vec<Threshold>,
    pub failures: Vec<String>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// The printed table and the threshold lines.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "{:<7} {:<10} {:>4} {:>5} {:>7} {:>7} {:>9} {:>12} {:>5} {:>8} {:>10} {:>7} {:>8} {:>7} {:>9}\n",
        "path",
        "build",
        "N",
        "conn",
        "p50 ms",
        "p99 ms",
        "worst p99",
        "recv/expect",
        "lost",
        "snd CPU%",
        "snd µs/obj",
        "snd MB",
        "rly CPU%",
        "rly MB",
        "subs CPU%"
    );
    for r in &report.runs {
        let d = &r.delivery;
        out += &format!(
            "{:<7} {:<10} {:>4} {:>5} {:>7} {:>7} {:>9} {:>12} {:>5} {:>8.1} {:>10} {:>7} {:>8} {:>7} {:>9.1}\n",
            r.path,
            r.build,
            r.subscribers,
            r.connected,
            opt(d.latency_p50_ms, 1),
            opt(d.latency_p99_ms, 1),
            opt(d.worst_subscriber_p99_ms, 1),
            r.received_ratio
                .map_or("–".into(), |q| format!("{:.2}%", q * 100.0)),
            r.frames_lost,
            r.sender_cpu_pct,
            opt(r.sender_cpu_us_per_object, 1),
            opt(r.sender_rss_mb, 1),
            opt(r.relay_cpu_pct, 1),
            opt(r.relay_rss_mb, 1),
            r.subscribers_cpu_pct,
        );
        if !r.nodes.is_empty() {
            let each = |f: &dyn Fn(&NodeLoad) -> String| {
                r.nodes.iter().map(f).collect::<Vec<_>>().join(" / ")
            };
            out += &format!(
                "  nodes: subscribers {}, CPU% {}, MB {}\n",
                each(&|n| n.subscribers.to_string()),
                each(&|n| format!("{:.1}", n.cpu_pct)),
                each(&|n| opt(n.rss_mb, 1)),
            );
        }
        if let Some(abr) = &r.abr {
            out += &fanout_abr::table_line(abr);
        }
    }
    for t in &report.first_p99_over_limit {
        out += &format!(
            "p99 > {:.0} ms first at: {} / {}: {}\n",
            report.p99_limit_ms,
            t.path,
            t.build,
            t.first_n_over
                .map_or(format!("none up to {}", t.largest_n), |n| format!(
                    "N = {n}"
                ))
        );
    }
    let load = |l: Option<[f64; 3]>| {
        l.map_or("unknown".into(), |[a, b, c]| {
            format!("{a:.2} {b:.2} {c:.2}")
        })
    };
    out += &format!(
        "load average before {}, after {}\n",
        load(report.load_before),
        load(report.load_after)
    );
    out
}

/// `--key value` pairs of a child's command line.
pub(crate) fn key_values(
    mut args: impl Iterator<Item = String>,
) -> Result<HashMap<String, String>, String> {
    let mut map = HashMap::new();
    while let Some(key) = args.next() {
        let value = args.next().ok_or(format!("{key} needs a value"))?;
        map.insert(key, value);
    }
    Ok(map)
}

/// Points this process's GStreamer at `plugin_dir` alone (with its own `registry` file),
/// initialises it and checks that `element` comes from there.
pub(crate) fn load_plugin(plugin_dir: &str, registry: &str, element: &str) -> Result<(), String> {
    let plugin_dir = PathBuf::from(plugin_dir);
    // SAFETY: single-threaded here, before GStreamer or any runtime starts.
    unsafe {
        std::env::set_var("GST_PLUGIN_PATH", &plugin_dir);
        std::env::set_var("GST_REGISTRY", registry);
    }
    gst::init().map_err(|e| e.to_string())?;
    let factory = gst::ElementFactory::find(element).ok_or(format!("no {element}"))?;
    let loaded = factory
        .plugin()
        .and_then(|p| p.filename())
        .ok_or(format!("{element} has no plugin file"))?;
    if !loaded.starts_with(&plugin_dir) {
        return Err(format!(
            "{element} comes from {}, not {}",
            loaded.display(),
            plugin_dir.display()
        ));
    }
    Ok(())
}

/// `moq-bench fanout-sender --reference CLIP --plugin-dir DIR --registry FILE --sink PROPS
/// [--renditions CLIP:KBIT,..]`: loops the clip live into `moqsink name=sink PROPS` loaded
/// from DIR (only DIR's moqsink: GStreamer gets its own registry file), with the
/// renditions' clips beside it as alternates (the reference first, as track `video`),
/// printing what [`moq_testkit::roles::serve`] prints, until stdin closes.
pub fn sender_main(args: impl Iterator<Item = String>) -> Result<(), String> {
    let args = key_values(args).map_err(|e| format!("fanout-sender: {e}"))?;
    let get = |key: &str| {
        args.get(key)
            .cloned()
            .ok_or(format!("fanout-sender: {key} missing"))
    };
    load_plugin(&get("--plugin-dir")?, &get("--registry")?, "moqsink")
        .map_err(|e| format!("fanout-sender: {e}"))?;
    let load = |path: &str| {
        reference::load(Path::new(path)).map_err(|e| format!("fanout-sender: {path}: {e}"))
    };
    // (clip, kbit): the reference, then each rendition; kbit 0 for a clip alone.
    let mut clips = vec![(load(&get("--reference")?)?, 0u32)];
    if let Some(renditions) = args.get("--renditions") {
        for item in renditions.split(',') {
            let (path, kbit) = item
                .rsplit_once(':')
                .and_then(|(p, k)| Some((p, k.parse::<u32>().ok()?)))
                .ok_or(format!("fanout-sender: bad rendition {item:?}"))?;
            clips.push((load(path)?, kbit));
        }
        let top = args
            .get("--reference-kbit")
            .and_then(|k| k.parse().ok())
            .ok_or("fanout-sender: --renditions needs --reference-kbit")?;
        clips[0].1 = top;
    }
    let mut description = String::new();
    let mut pads = String::new();
    for (i, (_, kbit)) in clips.iter().enumerate() {
        description.push_str(&format!(
            "appsrc name=src{i} is-live=true format=time do-timestamp=false \
             caps=video/x-h264,stream-format=byte-stream,alignment=au,width={CLIP_WIDTH},height={CLIP_HEIGHT},framerate={FPS}/1 \
             ! h264parse ! sink.video_{i} "
        ));
        if clips.len() > 1 {
            pads.push_str(&format!(
                "video_{i}::alt-group=1 video_{i}::bitrate={} ",
                u64::from(*kbit) * 1000
            ));
        }
    }
    description.push_str(&format!("moqsink name=sink {pads}{}", get("--sink")?));
    let pipeline = gst::parse::launch(&description)
        .map_err(|e| format!("fanout-sender pipeline {description:?}: {e}"))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "fanout-sender: not a pipeline")?;
    let sources = (0..clips.len())
        .map(|i| {
            pipeline
                .by_name(&format!("src{i}"))
                .and_downcast::<gst_app::AppSrc>()
                .ok_or("fanout-sender: no appsrc".to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let clips: Vec<Vec<Au>> = clips.into_iter().map(|(clip, _)| clip).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let player = {
        let (pipeline, stop) = (pipeline.clone(), stop.clone());
        std::thread::Builder::new()
            .name("play-out".into())
            .spawn(move || play_out(&pipeline, &sources, &clips, &stop))
            .map_err(|e| e.to_string())?
    };
    let served = moq_testkit::roles::serve(&pipeline, false);
    stop.store(true, Ordering::Relaxed);
    let played = player
        .join()
        .unwrap_or_else(|_| Err("the play-out thread panicked".into()));
    served.and(played)
}

/// Pushes each clip into its source, lap after lap, one frame every 1/24 s on the wall
/// clock, stamped on the pipeline's running time (ahead by [`LEAD`]) alike in every clip,
/// until `stop`. The clips are as long as the first. A push that fails while not stopping
/// prints `error …`, which the runner reads as the sender's failure.
fn play_out(
    pipeline: &gst::Pipeline,
    sources: &[gst_app::AppSrc],
    clips: &[Vec<Au>],
    stop: &AtomicBool,
) -> Result<(), String> {
    let fail = |e: String| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "error {e}");
        let _ = out.flush();
        Err(e)
    };
    let clip = &clips[0];
    if clip.is_empty() || clips.iter().any(|c| c.len() != clip.len()) {
        return fail("empty clip, or renditions of another length".into());
    }
    // The sink completes its state change only with a first buffer: wait for the clock
    // (given out as the pipeline goes to PLAYING), not for the PLAYING state.
    let deadline = Instant::now() + Duration::from_secs(10);
    let running0 = loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if let Some(now) = pipeline.current_running_time() {
            break now + LEAD;
        }
        if Instant::now() > deadline {
            return fail("the sender pipeline has no clock 10 s after it was started".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let base = clips
        .iter()
        .flatten()
        .map(|a| a.dts_ns.min(a.pts_ns))
        .min()
        .unwrap_or(0);
    let frame_ns = |k: u64| k * 1_000_000_000 / FPS;
    let lap_ns = frame_ns(clip.len() as u64);
    // Made once; each push is a shallow copy sharing the bytes.
    let buffers: Vec<Vec<gst::Buffer>> = clips
        .iter()
        .map(|clip| {
            clip.iter()
                .map(|au| gst::Buffer::from_mut_slice(au.data.clone()))
                .collect()
        })
        .collect();
    let start = Instant::now();
    for k in 0u64.. {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if let Some(wait) = Duration::from_nanos(frame_ns(k)).checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        let i = (k % clip.len() as u64) as usize;
        let lap = k / clip.len() as u64;
        let at = |t: u64| running0 + gst::ClockTime::from_nseconds(lap * lap_ns + t - base);
        for ((src, clip), buffers) in sources.iter().zip(clips).zip(&buffers) {
            let au = &clip[i];
            let mut buffer = buffers[i].copy();
            if let Some(b) = buffer.get_mut() {
                b.set_pts(at(au.pts_ns));
                b.set_dts(at(au.dts_ns));
                b.set_duration(gst::ClockTime::from_nseconds(frame_ns(1)));
                if au.kind != h264::FrameKind::Key {
                    b.set_flags(gst::BufferFlags::DELTA_UNIT);
                }
            }
            if let Err(e) = src.push_buffer(buffer) {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                return fail(format!("sender push: {e:?}"));
            }
        }
    }
    Ok(())
}

/// What one subscriber recorded.
#[derive(Debug, Default)]
struct SubscriberLog {
    samples: Vec<Sample>,
    bad_headers: u64,
    /// Why it ended before it was stopped.
    error: Option<String>,
}

/// Subscribers that received a first object, and those that ended (with an error).
#[derive(Debug, Default)]
struct Progress {
    flowing: AtomicUsize,
    ended: AtomicUsize,
}

/// Connects, subscribes to the video track and records every object until it fails.
async fn record(
    url: &MoqUrl,
    located: &Located,
    trust: &Trust,
    clock: WallClock,
    progress: &Progress,
    log: &mut SubscriberLog,
) -> String {
    let config = SessionConfig {
        path: Some(located.setup_path.clone()),
        ..SessionConfig::default()
    };
    let session =
        match tokio::time::timeout(STEP_TIMEOUT, moq_session::connect(url, trust, config)).await {
            Ok(Ok(session)) => session,
            Ok(Err(e)) => return format!("connect: {e}"),
            Err(_) => return "connect timed out".into(),
        };
    let subscribe = session.subscribe(
        located.namespace.clone(),
        TRACK,
        SubscribeOptions::default(),
    );
    let mut subscription = match tokio::time::timeout(STEP_TIMEOUT, subscribe).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return format!("subscribe: {e}"),
        Err(_) => return "subscribe timed out".into(),
    };
    loop {
        match subscription.next().await {
            Some(TrackEvent::Object(object)) => {
                let received_us = clock.unix_us(object.received);
                match FrameHeader::decode(&object.payload) {
                    Ok((header, _)) => log.samples.push(Sample {
                        index: header.decode_index,
                        available_us: header.availability_us as i64,
                        received_us,
                        bytes: u32::try_from(object.payload.len()).unwrap_or(u32::MAX),
                    }),
                    Err(_) => log.bad_headers += 1,
                }
                if log.samples.len() + log.bad_headers as usize == 1 {
                    progress.flowing.fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(TrackEvent::Ended { status, reason }) => {
                return format!("track ended ({status}: {reason})");
            }
            Some(TrackEvent::GroupEnd { .. }) => {}
            None => {
                return match session.close_reason() {
                    Some(reason) => format!("session closed: {reason}"),
                    None => "subscription ended".into(),
                };
            }
        }
    }
}

/// One subscriber, until `stop` turns true.
async fn subscriber(
    url: MoqUrl,
    located: Located,
    trust: Trust,
    clock: WallClock,
    progress: Arc<Progress>,
    mut stop: watch::Receiver<bool>,
) -> SubscriberLog {
    let mut log = SubscriberLog::default();
    let ended = {
        let work = record(&url, &located, &trust, clock, &progress, &mut log);
        tokio::select! {
            error = work => Some(error),
            _ = stop.changed() => None,
        }
    };
    if let Some(error) = ended {
        progress.ended.fetch_add(1, Ordering::Relaxed);
        log.error = Some(error);
    }
    log
}

/// What every run shares.
struct Context {
    exe: PathBuf,
    out: PathBuf,
    clip: PathBuf,
    /// The clips of the other renditions and their rates, when some viewers run ABR.
    renditions: Vec<(PathBuf, u32)>,
    clip_kbit: u32,
    runtime: tokio::runtime::Runtime,
    /// moq-relay's binary, and the certificate it serves (cert, key, fingerprint).
    relay: Option<(PathBuf, (String, String, String))>,
}

/// Sleeps `duration`, reading the sender's output every half second (it reports its
/// errors there).
fn wait_watching(sender: &mut SenderProc, duration: Duration) -> Result<(), String> {
    let end = Instant::now() + duration;
    loop {
        sender.poll()?;
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(500)));
    }
}

/// `count` moq-relay nodes on free ports, with their addresses: the first, and the
/// others joined to it as a cluster.
fn start_nodes(
    ctx: &Context,
    count: usize,
) -> Result<Vec<(crate::moq_gst::Relay, SocketAddr)>, String> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let Some((binary, (cert, key, fingerprint))) = &ctx.relay else {
        return Err("no moq-relay set up".into());
    };
    let mut nodes: Vec<(crate::moq_gst::Relay, SocketAddr)> = Vec::new();
    for _ in 0..count {
        let at = moq_testkit::free_local_addr()?;
        let join: Vec<String> = match nodes.first() {
            None => Vec::new(),
            Some((_, root)) => vec![
                "--cluster-connect".into(),
                format!("moqt://{root}/"),
                "--connect-tls-fingerprint".into(),
                fingerprint.clone(),
            ],
        };
        nodes.push((
            crate::moq_gst::Relay::start(binary, at, cert, key, &join)?,
            at,
        ));
    }
    Ok(nodes)
}

/// One run: `n` viewers through `route`, of which `abr_viewers` are ABR players.
fn run_one(
    ctx: &Context,
    route: Route,
    build: &Build,
    n: usize,
    abr_viewers: usize,
    options: &Options,
) -> Result<FanoutRun, String> {
    let relays = start_nodes(ctx, route.nodes())?;
    let sink = match relays.first() {
        None => "listen=127.0.0.1:0 sync=true".to_owned(),
        Some((_, at)) => {
            format!("url=moqt://{at}/{RELAY_ROOT}/{BROADCAST} tls-insecure=true sync=true")
        }
    };
    let registry = ctx.out.join(format!("fanout-registry-{}.bin", build.label));
    let args: Vec<String> = vec![
        "fanout-sender".into(),
        "--reference".into(),
        ctx.clip.display().to_string(),
        "--plugin-dir".into(),
        build.plugin_dir.display().to_string(),
        "--registry".into(),
        registry.display().to_string(),
        "--sink".into(),
        sink,
    ];
    let mut args = args;
    if !ctx.renditions.is_empty() {
        let renditions: Vec<String> = ctx
            .renditions
            .iter()
            .map(|(path, kbit)| format!("{}:{kbit}", path.display()))
            .collect();
        args.extend([
            "--renditions".into(),
            renditions.join(","),
            "--reference-kbit".into(),
            ctx.clip_kbit.to_string(),
        ]);
    }
    let mut sender = SenderProc::spawn(&ctx.exe, args)?;
    // Where the subscribers go, in turn, and the certificate they expect there.
    let (urls, fingerprint) = match &ctx.relay {
        Some((_, (_, _, fingerprint))) if !relays.is_empty() => (
            relays
                .iter()
                .map(|(_, at)| format!("moqt://{at}/{RELAY_ROOT}/{BROADCAST}"))
                .collect(),
            fingerprint.clone(),
        ),
        _ => (
            vec![format!("moqt://{}/{BROADCAST}", sender.address)],
            sender.fingerprint.clone(),
        ),
    };
    let targets = urls
        .iter()
        .map(|url| {
            let url = MoqUrl::parse(url).map_err(|e| e.to_string())?;
            let located = url.locate(None).map_err(|e| e.to_string())?;
            Ok((url, located))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let trust =
        Trust::Fingerprint(tls::parse_fingerprint(&fingerprint).map_err(|e| e.to_string())?);

    let mut players = match abr_viewers {
        0 => None,
        k => Some(moq_testkit::proc::Child::spawn(
            "ABR viewers",
            &ctx.exe,
            &[
                "fanout-abr-viewers".into(),
                "--urls".into(),
                urls.join(","),
                "--fingerprint".into(),
                fingerprint.clone(),
                "--count".into(),
                k.to_string(),
                "--kbit".into(),
                options.abr_kbit.to_string(),
                "--plugin-dir".into(),
                build.plugin_dir.display().to_string(),
                "--registry".into(),
                registry.display().to_string(),
            ],
        )?),
    };
    let n = n - abr_viewers;
    let clock = WallClock::now();
    let progress = Arc::new(Progress::default());
    let (stop, stopped) = watch::channel(false);
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (url, located) = &targets[i % targets.len()];
            ctx.runtime.spawn(subscriber(
                url.clone(),
                located.clone(),
                trust.clone(),
                clock,
                progress.clone(),
                stopped.clone(),
            ))
        })
        .collect();
    let collect = |tasks: Vec<tokio::task::JoinHandle<SubscriberLog>>| {
        let _ = stop.send(true);
        ctx.runtime.block_on(async {
            let mut logs = Vec::new();
            for task in tasks {
                match tokio::time::timeout(COLLECT_TIMEOUT, task).await {
                    Ok(Ok(log)) => logs.push(log),
                    Ok(Err(e)) => logs.push(SubscriberLog {
                        error: Some(format!("subscriber task: {e}")),
                        ..SubscriberLog::default()
                    }),
                    Err(_) => logs.push(SubscriberLog {
                        error: Some("subscriber did not stop".into()),
                        ..SubscriberLog::default()
                    }),
                }
            }
            logs
        })
    };
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let connected = loop {
        if let Err(e) = sender.poll() {
            collect(tasks);
            return Err(e);
        }
        let flowing = progress.flowing.load(Ordering::Relaxed);
        let ended = progress.ended.load(Ordering::Relaxed);
        if flowing >= n || flowing + ended >= n || Instant::now() > deadline {
            break flowing;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if connected == 0 {
        let logs = collect(tasks);
        let first = logs.iter().find_map(|l| l.error.clone());
        return Err(format!(
            "no subscriber received media within {CONNECT_TIMEOUT:?} ({})",
            first.unwrap_or_else(|| "no error reported".into())
        ));
    }
    let ended_before = progress.ended.load(Ordering::Relaxed);
    if let Err(e) = wait_watching(&mut sender, Duration::from_secs(options.warmup_s)) {
        collect(tasks);
        return Err(e);
    }

    let relay_pids: Vec<u32> = relays.iter().map(|(r, _)| r.pid()).collect();
    let cpu = |pid: u32| process_cpu_s(pid).ok_or(format!("process {pid} is gone"));
    let from_us = unix_us();
    let started = Instant::now();
    let sender_cpu0 = cpu(sender.pid())?;
    let relay_cpu0 = relay_pids
        .iter()
        .map(|p| cpu(*p))
        .collect::<Result<Vec<_>, _>>()?;
    let own_cpu0 = cpu_seconds(libc::RUSAGE_SELF);
    let players_cpu0 = players.as_ref().and_then(|p| process_cpu_s(p.pid()));
    let sender_rss = RssSampler::start(sender.pid(), Duration::from_secs(1));
    let relay_rss: Vec<RssSampler> = relay_pids
        .iter()
        .map(|pid| RssSampler::start(*pid, Duration::from_secs(1)))
        .collect();
    let watched = wait_watching(&mut sender, Duration::from_secs(options.measure_s));
    let to_us = unix_us();
    let wall_s = started.elapsed().as_secs_f64();
    let sender_cpu = cpu(sender.pid()).map(|c| c - sender_cpu0);
    let relay_cpu: Result<Vec<f64>, String> = relay_pids
        .iter()
        .zip(&relay_cpu0)
        .map(|(pid, before)| cpu(*pid).map(|c| c - before))
        .collect();
    let own_cpu = cpu_seconds(libc::RUSAGE_SELF) - own_cpu0;
    let players_cpu_pct = players
        .as_ref()
        .and_then(|p| Some(process_cpu_s(p.pid())? - players_cpu0?))
        .map(|cpu_s| core_pct(cpu_s, wall_s));
    sender_rss.sample_now();
    let sender_mb = sender_rss.max_since(started).map(moq_testkit::proc::mb);
    let relay_mb: Vec<Option<f64>> = relay_rss
        .iter()
        .map(|r| {
            r.sample_now();
            r.max_since(started).map(moq_testkit::proc::mb)
        })
        .collect();
    let late = watched.and_then(|()| wait_watching(&mut sender, LATE_GRACE));
    let logs = collect(tasks);
    let abr = match players.as_mut() {
        None => None,
        Some(players) => {
            let mut seconds = Vec::new();
            let mut errors = Vec::new();
            for line in players.pending_lines()? {
                match line.text.split_once(' ') {
                    Some(("second", rest)) => seconds.extend(Second::parse(rest)),
                    Some(("error", rest)) if errors.len() < 5 => errors.push(rest.to_owned()),
                    _ => {}
                }
            }
            Some(AbrViewers {
                cpu_pct: players_cpu_pct,
                errors,
                ..fanout_abr::summarize(
                    &seconds,
                    abr_viewers,
                    options.abr_kbit,
                    &fanout_abr::ladder(ctx.clip_kbit),
                    from_us,
                    to_us,
                )
            })
        }
    };
    drop(players);
    drop(sender);
    drop(relays);
    late?;
    let (sender_cpu, relay_cpu) = (sender_cpu?, relay_cpu?);
    let relay_cpu_total = (!relay_cpu.is_empty()).then(|| relay_cpu.iter().sum::<f64>());
    let relay_mb_total = (!relay_mb.is_empty())
        .then(|| relay_mb.iter().copied().sum::<Option<f64>>())
        .flatten();
    let nodes = if relay_cpu.len() > 1 {
        relay_cpu
            .iter()
            .zip(&relay_mb)
            .enumerate()
            .map(|(at, (cpu_s, rss_mb))| NodeLoad {
                subscribers: (at..n).step_by(relay_cpu.len()).count(),
                cpu_pct: core_pct(*cpu_s, wall_s),
                rss_mb: *rss_mb,
            })
            .collect()
    } else {
        Vec::new()
    };

    let samples: Vec<Vec<Sample>> = logs.iter().map(|l| l.samples.clone()).collect();
    let delivery = delivery(&samples, n, from_us, to_us);
    let mut errors: Vec<String> = Vec::new();
    for error in logs.iter().filter_map(|l| l.error.clone()) {
        if errors.len() < 5 && !errors.contains(&error) {
            errors.push(error);
        }
    }
    let ended_after = logs.iter().filter(|l| l.error.is_some()).count();
    Ok(FanoutRun {
        path: if abr_viewers > 0 {
            format!("{}-abr", route.name())
        } else {
            route.name().into()
        },
        build: build.label.clone(),
        subscribers: n,
        connected,
        dropped: ended_after.saturating_sub(ended_before),
        window_s: (to_us - from_us) as f64 / 1e6,
        received_ratio: (delivery.objects_expected > 0)
            .then(|| delivery.objects_received as f64 / delivery.objects_expected as f64),
        frames_lost: delivery
            .objects_expected
            .saturating_sub(delivery.objects_received),
        sender_cpu_pct: core_pct(sender_cpu, wall_s),
        sender_cpu_us_per_object: us_per_object(sender_cpu, delivery.objects_received),
        sender_rss_mb: sender_mb,
        relay_cpu_pct: relay_cpu_total.map(|c| core_pct(c, wall_s)),
        relay_cpu_us_per_object: relay_cpu_total
            .and_then(|c| us_per_object(c, delivery.objects_received)),
        relay_rss_mb: relay_mb_total,
        nodes,
        subscribers_cpu_pct: core_pct(own_cpu, wall_s),
        bad_headers: logs.iter().map(|l| l.bad_headers).sum(),
        subscriber_errors: errors,
        delivery,
        abr,
    })
}

/// The clip at `kbit`: `DIR/fanout-clip-KBITk.bin` when it is there and whole, else
/// encoded now.
fn clip(out: &Path, kbit: u32) -> Result<(PathBuf, Vec<Au>), String> {
    let path = out.join(format!("fanout-clip-{kbit}k.bin"));
    let frames = (CLIP_SECONDS * FPS) as usize;
    let whole = |aus: &[Au]| {
        aus.len() == frames
            && aus.first().is_some_and(|a| a.kind == h264::FrameKind::Key)
            && aus.iter().all(|a| a.pts_ns == a.dts_ns)
    };
    if let Ok(aus) = reference::load(&path)
        && whole(&aus)
    {
        return Ok((path, aus));
    }
    eprintln!("encoding the {CLIP_SECONDS} s fan-out clip");
    let encoding = Encoding {
        width: CLIP_WIDTH,
        height: CLIP_HEIGHT,
        patch: (160, 240, 100),
        x264: &clip_x264(kbit),
    };
    let aus = reference::encode_with(CLIP_SECONDS, &encoding)?;
    if !whole(&aus) {
        return Err("the fan-out clip does not start with a keyframe or has B frames".into());
    }
    reference::save(&aus, &path).map_err(|e| e.to_string())?;
    Ok((path, aus))
}

/// Runs the fan-out benchmark into `out`: `fanout.json`, and the table on stdout.
pub fn run(out: &Path, workspace: &Path, options: &Options) -> Result<(), String> {
    let load_before = load_average();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe_dir = exe.parent().ok_or("no binary directory")?;
    let mut builds = vec![Build::new("current", exe_dir)?];
    if let Some((label, dir)) = &options.other_sink {
        builds.push(Build::new(label, dir)?);
    }
    let (clip_path, aus) = clip(out, options.clip_kbit)?;
    let bytes: usize = aus.iter().map(|a| a.data.len()).sum();
    let clip_facts = ClipFacts {
        width: CLIP_WIDTH,
        height: CLIP_HEIGHT,
        fps: FPS,
        gop: FPS,
        frames: aus.len(),
        kbit: bytes as f64 * 8.0 / (aus.len() as f64 / FPS as f64) / 1000.0,
        x264: clip_x264(options.clip_kbit),
    };
    eprintln!(
        "fan-out clip: {} frames, {:.0} kbit/s",
        clip_facts.frames, clip_facts.kbit
    );
    let mut renditions = Vec::new();
    if options.abr_share > 0 {
        for kbit in fanout_abr::ladder(options.clip_kbit).into_iter().skip(1) {
            renditions.push((clip(out, kbit)?.0, kbit));
        }
    }
    let relay = if options.relay || options.cluster {
        let binary = moq_testkit::relay::find(workspace)?;
        let dir = out.join("fanout-relay");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Some((binary, moq_testkit::relay::certificate(&dir)?))
    } else {
        None
    };
    let ctx = Context {
        exe: exe.clone(),
        out: out.to_path_buf(),
        clip: clip_path,
        renditions,
        clip_kbit: options.clip_kbit,
        runtime: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("subscribers")
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?,
        relay,
    };
    // Interleaved per N, so a drift of the machine touches every build alike.
    // (route, build, viewers, of which ABR players)
    let mut plan: Vec<(Route, &Build, usize, usize)> = Vec::new();
    for &n in &options.counts {
        if options.direct {
            for build in &builds {
                plan.push((Route::Direct, build, n, 0));
            }
        }
        if options.relay {
            plan.push((Route::Relay, &builds[0], n, 0));
        }
        if options.cluster {
            plan.push((Route::Cluster, &builds[0], n, 0));
            let abr = fanout_abr::abr_count(n, options.abr_share);
            if abr > 0 {
                plan.push((Route::Cluster, &builds[0], n, abr));
            }
        }
    }
    let mut report = Report {
        clip: clip_facts,
        warmup_s: options.warmup_s,
        measure_s: options.measure_s,
        late_grace_s: LATE_GRACE.as_secs_f64(),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        builds: builds.clone(),
        load_before,
        load_after: None,
        p99_limit_ms: P99_LIMIT_MS,
        runs: Vec::new(),
        first_p99_over_limit: Vec::new(),
        failures: Vec::new(),
    };
    let write = |report: &Report| -> Result<(), String> {
        let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
        std::fs::write(out.join("fanout.json"), json).map_err(|e| e.to_string())
    };
    for (route, build, n, abr) in plan {
        eprintln!(
            "== fan-out {} / {}: {n} subscribers, {abr} of them ABR players",
            route.name(),
            build.label
        );
        match run_one(&ctx, route, build, n, abr, options) {
            Ok(run) => {
                let d = &run.delivery;
                eprintln!(
                    "   p50 {} ms, p99 {} ms, received {}/{}, sender {:.1}% CPU, {} µs/object",
                    opt(d.latency_p50_ms, 1),
                    opt(d.latency_p99_ms, 1),
                    d.objects_received,
                    d.objects_expected,
                    run.sender_cpu_pct,
                    opt(run.sender_cpu_us_per_object, 1)
                );
                report.runs.push(run);
            }
            Err(e) => {
                eprintln!("   FAILED: {e}");
                report
                    .failures
                    .push(format!("{} / {} / {n}: {e}", route.name(), build.label));
            }
        }
        report.first_p99_over_limit = thresholds(&report.runs, P99_LIMIT_MS);
        write(&report)?;
    }
    report.load_after = load_average();
    write(&report)?;
    print!("{}", table(&report));
    if !report.failures.is_empty() {
        return Err(format!(
            "{} fan-out run(s) failed: {:?}",
            report.failures.len(),
            report.failures
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(index: u64, available_ms: i64, latency_ms: i64) -> Sample {
        Sample {
            index,
            available_us: available_ms * 1000,
            received_us: (available_ms + latency_ms) * 1000,
            bytes: 5000,
        }
    }

    #[test]
    fn delivery_counts_the_window_and_its_losses() {
        // Frames every 40 ms from 0; the window is [400, 800) ms: frames 10..=19.
        let a: Vec<Sample> = (0..30).map(|i| sample(i, i as i64 * 40, 5)).collect();
        // The second subscriber lost frames 12 and 13, and frame 15 took 300 ms.
        let b: Vec<Sample> = (0..30)
            .filter(|i| !(12..14).contains(i))
            .map(|i| sample(i, i as i64 * 40, if i == 15 { 300 } else { 10 }))
            .collect();
        // Three requested, one never connected.
        let d = delivery(&[a, b, Vec::new()], 3, 400_000, 800_000);
        assert_eq!(d.frames, 10);
        assert_eq!((d.objects_expected, d.objects_received), (30, 18));
        assert_eq!(d.latency_p50_ms, Some(5.0));
        assert_eq!(d.latency_max_ms, Some(300.0));
        assert_eq!(d.latency_p99_ms, Some(300.0));
        assert_eq!(d.worst_subscriber_p99_ms, Some(300.0));
        // 10 frames of 5000 bytes in 0.4 s.
        assert!((d.stream_kbit - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn delivery_without_objects() {
        let d = delivery(&[Vec::new(), Vec::new()], 2, 0, 1_000_000);
        assert_eq!(
            (d.frames, d.objects_expected, d.objects_received),
            (0, 0, 0)
        );
        assert_eq!(d.latency_p99_ms, None);
        assert_eq!(d.worst_subscriber_p99_ms, None);
    }

    #[test]
    fn duplicate_objects_count_once() {
        let a = vec![sample(1, 0, 5), sample(1, 0, 6), sample(2, 40, 5)];
        let d = delivery(&[a], 1, 0, 1_000_000);
        assert_eq!((d.frames, d.objects_received), (2, 2));
    }

    #[test]
    fn per_object_cpu_and_core_share() {
        // 2 s of CPU over 20 s of wall time, 100 subscribers x 480 frames.
        assert_eq!(core_pct(2.0, 20.0), 10.0);
        let per = us_per_object(2.0, 48_000).unwrap();
        assert!((per - 41.666_666).abs() < 1e-3, "{per}");
        assert_eq!(us_per_object(1.0, 0), None);
        assert_eq!(core_pct(1.0, 0.0), 0.0);
    }

    #[test]
    fn cpu_ticks_from_proc_stat() {
        // A command name with a space and a parenthesis; utime 1234, stime 56.
        let stat = "4242 (moq bench) x) S 1 4242 4242 0 -1 4194304 1375 0 0 0 1234 56 0 0 20 0 9 0 \
                    12345 123456789 2222 18446744073709551615 1 1 0 0 0 0 0 4096 17095 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(stat_cpu_ticks(stat), Some(1290));
        assert_eq!(stat_cpu_ticks("4242 (cut short) S 1"), None);
        assert_eq!(stat_cpu_ticks("garbage"), None);
        // This process's own file parses.
        assert!(process_cpu_s(std::process::id()).is_some());
    }

    #[test]
    fn wall_clock_maps_instants_both_ways() {
        let clock = WallClock::now();
        let later = clock.instant + Duration::from_millis(1500);
        assert_eq!(clock.unix_us(later), clock.unix_us + 1_500_000);
        if let Some(earlier) = clock.instant.checked_sub(Duration::from_millis(2)) {
            assert_eq!(clock.unix_us(earlier), clock.unix_us - 2000);
        }
    }

    fn run(path: &str, build: &str, n: usize, p99: Option<f64>) -> FanoutRun {
        FanoutRun {
            path: path.into(),
            build: build.into(),
            subscribers: n,
            connected: n,
            dropped: 0,
            window_s: 20.0,
            delivery: Delivery {
                frames: 480,
                objects_expected: 480 * n as u64,
                objects_received: 480 * n as u64 - 2,
                latency_p50_ms: p99.map(|p| p / 4.0),
                latency_p99_ms: p99,
                latency_max_ms: p99,
                worst_subscriber_p99_ms: p99.map(|p| p + 1.0),
                stream_kbit: 1000.0,
            },
            received_ratio: Some(1.0 - 2.0 / (480.0 * n as f64)),
            frames_lost: 2,
            sender_cpu_pct: 12.5,
            sender_cpu_us_per_object: Some(26.04),
            sender_rss_mb: Some(40.0),
            relay_cpu_pct: (path == "relay").then_some(30.0),
            relay_cpu_us_per_object: None,
            relay_rss_mb: (path == "relay").then_some(20.0),
            nodes: Vec::new(),
            subscribers_cpu_pct: 50.0,
            bad_headers: 0,
            subscriber_errors: Vec::new(),
            abr: None,
        }
    }

    #[test]
    fn thresholds_find_the_first_n_over_the_limit() {
        let runs = vec![
            run("direct", "current", 1, Some(3.0)),
            run("relay", "current", 1, Some(4.0)),
            run("direct", "current", 100, Some(150.0)),
            run("relay", "current", 100, Some(40.0)),
            run("direct", "current", 50, Some(101.0)),
            run("direct", "before", 200, None),
        ];
        let t = thresholds(&runs, 100.0);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].path.as_str(), t[0].first_n_over, t[0].largest_n),
            ("direct", Some(50), 100)
        );
        assert_eq!(
            (t[1].path.as_str(), t[1].first_n_over, t[1].largest_n),
            ("relay", None, 100)
        );
        // A run without latencies delivered nothing: over.
        assert_eq!(
            (t[2].build.as_str(), t[2].first_n_over),
            ("before", Some(200))
        );
    }

    fn report_of(runs: Vec<FanoutRun>) -> Report {
        Report {
            clip: ClipFacts {
                width: 640,
                height: 360,
                fps: 24,
                gop: 24,
                frames: 240,
                kbit: 1000.0,
                x264: clip_x264(DEFAULT_CLIP_KBIT),
            },
            warmup_s: 3,
            measure_s: 20,
            late_grace_s: 2.0,
            cpus: 2,
            builds: Vec::new(),
            load_before: None,
            load_after: None,
            p99_limit_ms: 100.0,
            first_p99_over_limit: thresholds(&runs, 100.0),
            runs,
            failures: Vec::new(),
        }
    }

    #[test]
    fn table_has_a_row_per_run_and_the_thresholds() {
        let runs = vec![
            run("direct", "current", 10, Some(20.0)),
            run("relay", "current", 10, Some(120.0)),
        ];
        let mut report = report_of(runs);
        report.load_before = Some([0.1, 0.2, 0.3]);
        let text = table(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("path"), "{text}");
        assert!(lines[1].starts_with("direct  current      10"), "{text}");
        assert!(
            lines[1].contains(" 20.0 ") && lines[1].contains(" 21.0 "),
            "{text}"
        );
        assert!(lines[1].contains("99.96%"), "{text}");
        assert!(
            lines[2].contains(" 30.0 ") && lines[2].contains(" 20.0 "),
            "{text}"
        );
        assert!(text.contains("p99 > 100 ms first at: direct / current: none up to 10"));
        assert!(text.contains("p99 > 100 ms first at: relay / current: N = 10"));
        assert!(text.contains("load average before 0.10 0.20 0.30, after unknown"));
        // The JSON carries the delivery figures at the top level of each run.
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["runs"][1]["latency_p99_ms"], 120.0);
        assert_eq!(json["runs"][0]["path"], "direct");
        assert_eq!(json["first_p99_over_limit"][1]["first_n_over"], 10);
        assert!(
            json["runs"][0].get("nodes").is_none(),
            "no nodes outside a cluster"
        );
    }

    #[test]
    fn a_cluster_run_shows_each_node() {
        let mut cluster = run("cluster", "current", 1000, Some(80.0));
        cluster.nodes = [(334, 40.0), (333, 35.5), (333, 36.0)]
            .into_iter()
            .map(|(subscribers, cpu_pct)| NodeLoad {
                subscribers,
                cpu_pct,
                rss_mb: Some(90.0),
            })
            .collect();
        let report = report_of(vec![cluster]);
        let text = table(&report);
        assert!(
            text.contains("  nodes: subscribers 334 / 333 / 333, CPU% 40.0 / 35.5 / 36.0, MB 90.0 / 90.0 / 90.0"),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["runs"][0]["nodes"][2]["cpu_pct"], 36.0);
    }
}
