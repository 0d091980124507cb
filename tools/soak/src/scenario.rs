//! The scenarios: each starts its children, abuses the sender or the receiver for a while,
//! prints a row every 10 s and returns a report with every figure and the bounds it broke.
//!
//! RSS figures are in MB (10^6 bytes) of `VmRSS`. "Warm-up" is the RSS once the process
//! has done the same work for a while (buffers, pools, threads and allocator arenas exist);
//! growth is the largest RSS afterwards minus that value.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use moq_testkit::media::{Continuity, FrameLog, Watcher, unix_now_us};
use moq_testkit::proc::{RssSampler, mb, mb_diff};
use moq_testkit::roles::{OutputFrame, ReceiverProc, START_TIMEOUT, SenderProc};
use tokio::sync::watch;

use crate::clients::{self, ChurnCounters, StallCounters};

/// Rows of the per-scenario table.
pub(crate) const ROW_EVERY: Duration = Duration::from_secs(10);
pub(crate) const RSS_EVERY: Duration = Duration::from_secs(1);
/// A frame published this long before the end has had time to reach a subscriber.
const IN_FLIGHT: Duration = Duration::from_millis(1500);
/// The main loop's step.
const STEP: Duration = Duration::from_millis(250);

/// Delivery modes of moqsink.
pub const DELIVERIES: [&str; 4] = ["baseline", "deprioritize-b", "skip-gops", "combined"];

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

pub(crate) fn opt_mb(kib: Option<u64>) -> String {
    kib.map_or("-".into(), |k| format!("{:.1}", mb(k)))
}

/// Calls `step` every [`STEP`] until `until` or until it returns `false`; every
/// [`ROW_EVERY`] since `origin` (at whole multiples, so the rows of consecutive phases line
/// up) it passes the seconds since `origin`, for a table row. A row due when the phase
/// ends is still printed by this phase.
pub(crate) fn run_phase(
    origin: Instant,
    until: Instant,
    next_row: &mut Instant,
    mut step: impl FnMut(Option<f64>) -> Result<bool, String>,
) -> Result<(), String> {
    loop {
        let now = Instant::now();
        let finished = now >= until;
        let row = (now >= *next_row).then(|| {
            *next_row += ROW_EVERY;
            origin.elapsed().as_secs_f64()
        });
        if finished && row.is_none() {
            return Ok(());
        }
        if !step(row)? || finished {
            return Ok(());
        }
        let wake = until.min(*next_row);
        std::thread::sleep(STEP.min(wake.saturating_duration_since(Instant::now())));
    }
}

/// Continuity of a watcher's output against the sender's count at `end − IN_FLIGHT`.
pub(crate) fn healthy(watcher: &Watcher, sender: &SenderProc, end: Instant) -> Option<Continuity> {
    let frames = sender.frames_at(end.checked_sub(IN_FLIGHT)?)?;
    watcher.log().continuity(frames)
}

/// Prints what explains a watcher's breaks (its skipped frames and moqsrc's messages), in
/// seconds since `start`, when its output had any.
pub(crate) fn print_breaks(who: &str, log: &FrameLog, continuity: &Continuity, start: Instant) {
    if continuity.gaps == 0 && continuity.disordered == 0 {
        return;
    }
    println!("{who}'s breaks and messages (s since the start):");
    for (at, what) in &log.events {
        let t = match at.checked_duration_since(start) {
            Some(after) => after.as_secs_f64(),
            None => -(start - *at).as_secs_f64(),
        };
        println!("  {t:7.3} {what}");
    }
}

/// Groups the sender gave up for some subscriber (base and enhancement layers, every
/// reason: superseded, expired, over the backlog budget), from its latest stats.
fn groups_given_up(sender: &SenderProc) -> u64 {
    ["superseded", "expired", "over-budget"]
        .iter()
        .map(|why| sender.layers_stat(&format!("groups-{why}")))
        .sum()
}

pub(crate) fn fmt_pct(c: Option<Continuity>) -> String {
    c.map_or("-".into(), |c| format!("{:.2}", c.kept_pct()))
}

// ---------------------------------------------------------------------------------------
// Stalled subscriber

#[derive(Debug, Clone)]
pub struct StalledOptions {
    /// The `moq-soak` binary, which plays the sender.
    pub exe: PathBuf,
    /// moqsink `delivery`.
    pub delivery: String,
    /// How long the peer stays stalled (warm-up included).
    pub seconds: u64,
    /// RSS warm-up: seconds after the stall began.
    pub warmup: u64,
    /// Default `subscriber-stall-timeout`: the sender disconnects the peer, which comes back and
    /// stalls again. Otherwise `subscriber-stall-timeout=3600000`, so the backlog budget alone must
    /// bound the memory.
    pub reconnect: bool,
    /// No stalled peer at all: the same run as a control, to tell what the stalled peer
    /// costs from what the sender's memory does anyway.
    pub no_peer: bool,
    /// More moqsink properties (`key=value ...`).
    pub moqsink_props: String,
    pub max_rss_growth_mb: f64,
    pub min_healthy_pct: f64,
}

impl StalledOptions {
    pub fn new(exe: PathBuf) -> StalledOptions {
        StalledOptions {
            exe,
            delivery: "baseline".into(),
            seconds: 600,
            warmup: 20,
            reconnect: false,
            no_peer: false,
            moqsink_props: String::new(),
            max_rss_growth_mb: 20.0,
            min_healthy_pct: 99.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct StalledReport {
    pub delivery: String,
    pub reconnect: bool,
    pub no_peer: bool,
    pub seconds: f64,
    pub sender_kbit: Option<f64>,
    pub rss_start_kib: u64,
    pub rss_warmup_kib: u64,
    pub rss_max_kib: u64,
    pub rss_end_kib: u64,
    pub rss_growth_mb: f64,
    pub healthy: Continuity,
    pub healthy_first_key: bool,
    /// Sessions in which the peer got every SUBSCRIBE_OK and then stalled.
    pub stalls: u64,
    pub disconnects: u64,
    pub peer_failures: u64,
    pub peer_last_error: Option<String>,
    pub groups_over_budget: u64,
    pub streams_reset: u64,
    pub violations: Vec<String>,
}

impl StalledReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn summary(&self) -> String {
        format!(
            "summary stalled-subscriber delivery={} timeout={} peer={} seconds={:.0} sender_kbit_s={} \
             sender_rss_start_mb={:.1} sender_rss_warmup_mb={:.1} sender_rss_max_mb={:.1} \
             sender_rss_end_mb={:.1} sender_rss_growth_mb={:.1} healthy_kept_pct={:.2} \
             healthy_received={} healthy_expected={} healthy_gaps={} stalls={} disconnects={} \
             peer_failures={} groups_over_budget={} streams_reset={} result={}",
            self.delivery,
            if self.reconnect { "default" } else { "3600" },
            if self.no_peer { "none" } else { "stalled" },
            self.seconds,
            self.sender_kbit.map_or("-".into(), |k| format!("{k:.0}")),
            mb(self.rss_start_kib),
            mb(self.rss_warmup_kib),
            mb(self.rss_max_kib),
            mb(self.rss_end_kib),
            self.rss_growth_mb,
            self.healthy.kept_pct(),
            self.healthy.received,
            self.healthy.expected,
            self.healthy.gaps,
            self.stalls,
            self.disconnects,
            self.peer_failures,
            self.groups_over_budget,
            self.streams_reset,
            verdict(&self.violations),
        )
    }
}

pub(crate) fn verdict(violations: &[String]) -> String {
    if violations.is_empty() {
        "PASS".into()
    } else {
        format!("FAIL ({})", violations.join("; "))
    }
}

/// A subscriber that never reads, beside a healthy one, for `seconds`.
pub fn stalled_subscriber(opts: &StalledOptions) -> Result<StalledReport, String> {
    if !DELIVERIES.contains(&opts.delivery.as_str()) {
        return Err(format!(
            "unknown delivery {:?} (one of {DELIVERIES:?})",
            opts.delivery
        ));
    }
    let mut props = format!("delivery={}", opts.delivery);
    if !opts.reconnect {
        props.push_str(" subscriber-stall-timeout=3600000");
    }
    if !opts.moqsink_props.is_empty() {
        props = format!("{props} {}", opts.moqsink_props);
    }
    println!(
        "== stalled-subscriber: delivery={} {} for {} s (moqsink {props})",
        opts.delivery,
        if opts.no_peer {
            "no stalled peer (control run)"
        } else if opts.reconnect {
            "peer reconnects after every disconnect"
        } else {
            "peer stays connected"
        },
        opts.seconds
    );
    let mut sender = SenderProc::start(&opts.exe, &props)?;
    let rss = RssSampler::start(sender.pid(), RSS_EVERY);
    let watcher = Watcher::start(&sender.url(), &sender.fingerprint)?;
    watcher.wait_first_frame(START_TIMEOUT)?;

    let mut tracks = vec!["catalog", "video"];
    if matches!(opts.delivery.as_str(), "deprioritize-b" | "combined") {
        tracks.push("video-enh");
    }
    let rt = runtime()?;
    let counters = Arc::new(StallCounters::default());
    let (stop_tx, stop) = watch::channel(false);
    let peer = (!opts.no_peer).then(|| {
        rt.spawn(clients::stall(
            sender.url(),
            tracks,
            opts.reconnect,
            counters.clone(),
            stop,
        ))
    });
    let deadline = Instant::now() + START_TIMEOUT;
    while peer.is_some() && counters.stalls.load(Ordering::Relaxed) == 0 {
        if Instant::now() > deadline {
            return Err(format!(
                "stalled peer: never subscribed: {}",
                counters.last_error().unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = Instant::now();
    let rss_start = rss.sample_now().ok_or("sender exited")?;
    println!(
        "   t  sender-MB  max-MB  published  healthy  kept-%  stalled  disconnects  subscribers  over-budget  resets"
    );
    let mut next_row = start + ROW_EVERY;
    let warmup_at = start + Duration::from_secs(opts.warmup);
    let end = start + Duration::from_secs(opts.seconds);
    let mut rss_warmup = None;
    run_phase(start, end, &mut next_row, |row| {
        sender.poll()?;
        if let Some(err) = watcher.error() {
            return Err(format!("healthy subscriber: {err}"));
        }
        if rss_warmup.is_none() && Instant::now() >= warmup_at {
            rss_warmup = rss.sample_now();
        }
        if let Some(t) = row {
            println!(
                "{t:4.0}  {:>9}  {:>6}  {:>9}  {:>7}  {:>6}  {:>7}  {:>11}  {:>11}  {:>11}  {:>6}",
                opt_mb(rss.latest()),
                opt_mb(rss.max_since(start)),
                sender.latest().map_or(0, |t| t.frames),
                watcher.frames(),
                fmt_pct(healthy(&watcher, &sender, Instant::now())),
                if counters.connected.load(Ordering::Relaxed) == 1 {
                    "yes"
                } else {
                    "no"
                },
                counters.disconnects.load(Ordering::Relaxed),
                sender.stat("subscribers"),
                sender.layers_stat("groups-over-budget"),
                sender.layers_stat("streams-reset"),
            );
        }
        Ok(true)
    })?;
    let finished = Instant::now();
    sender.poll()?;
    let rss_end = rss.sample_now().ok_or("sender exited")?;
    let _ = stop_tx.send(true);
    if let Some(peer) = peer {
        let _ = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), peer).await });
    }
    let healthy_c =
        healthy(&watcher, &sender, finished).ok_or("no sender count to compare with")?;
    let log = watcher.stop();
    let rss_warmup = rss_warmup.ok_or("the run ended before the warm-up")?;
    let rss_max = rss.max_since(warmup_at).unwrap_or(rss_end);
    let growth = mb_diff(rss_max, rss_warmup);
    let mut violations = Vec::new();
    if growth >= opts.max_rss_growth_mb {
        violations.push(format!(
            "sender RSS grew {growth:.1} MB (bound {} MB)",
            opts.max_rss_growth_mb
        ));
    }
    if healthy_c.kept_pct() < opts.min_healthy_pct {
        violations.push(format!(
            "healthy subscriber kept {:.2}% (bound {}%)",
            healthy_c.kept_pct(),
            opts.min_healthy_pct
        ));
    }
    let stalls = counters.stalls.load(Ordering::Relaxed);
    let disconnects = counters.disconnects.load(Ordering::Relaxed);
    if !opts.reconnect && disconnects > 0 {
        violations.push(format!(
            "the stalled peer was disconnected ({}) although subscriber-stall-timeout=3600000",
            counters.last_error().unwrap_or_default()
        ));
    }
    let report = StalledReport {
        delivery: opts.delivery.clone(),
        reconnect: opts.reconnect,
        no_peer: opts.no_peer,
        seconds: finished.duration_since(start).as_secs_f64(),
        sender_kbit: sender.kbit_per_s(),
        rss_start_kib: rss_start,
        rss_warmup_kib: rss_warmup,
        rss_max_kib: rss_max,
        rss_end_kib: rss_end,
        rss_growth_mb: growth,
        healthy: healthy_c,
        healthy_first_key: log.first_key == Some(true),
        stalls,
        disconnects,
        peer_failures: counters.failures.load(Ordering::Relaxed),
        peer_last_error: counters.last_error(),
        groups_over_budget: sender.layers_stat("groups-over-budget"),
        streams_reset: sender.layers_stat("streams-reset"),
        violations,
    };
    println!("{}", report.summary());
    Ok(report)
}

// ---------------------------------------------------------------------------------------
// Paused receiver

#[derive(Debug, Clone)]
pub struct PausedOptions {
    /// The `moq-soak` binary, which plays the sender and the receiver.
    pub exe: PathBuf,
    /// Playing before the pause.
    pub play_seconds: u64,
    pub pause_seconds: u64,
    /// Playing after the resume.
    pub after_seconds: u64,
    pub max_rss_growth_mb: f64,
    /// The first frame after PLAY must be at most this old (live edge).
    pub max_resume_latency_ms: f64,
    /// ... and come at most this long after PLAY.
    pub max_resume_wait_ms: f64,
}

impl PausedOptions {
    pub fn new(exe: PathBuf) -> PausedOptions {
        PausedOptions {
            exe,
            play_seconds: 10,
            pause_seconds: 60,
            after_seconds: 10,
            max_rss_growth_mb: 10.0,
            max_resume_latency_ms: 1500.0,
            max_resume_wait_ms: 5000.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PausedReport {
    pub pause_seconds: f64,
    pub rss_before_kib: u64,
    /// Largest RSS from the pause to the end.
    pub rss_max_kib: u64,
    pub rss_end_kib: u64,
    pub rss_growth_mb: f64,
    /// The first buffer moqsrc output after PLAY.
    pub first_after: Option<OutputFrame>,
    /// From PLAY to that buffer.
    pub resume_wait_ms: Option<f64>,
    /// Latency of the first picture rendered after PLAY.
    pub first_render_latency_ms: Option<f64>,
    /// Pictures rendered after PLAY with a latency above the bound: ones that were
    /// already in the decoder or the sink when the pipeline paused.
    pub stale_renders: usize,
    /// From PLAY to the first picture rendered within the latency bound, and its latency.
    pub live_render_wait_ms: Option<f64>,
    pub live_render_latency_ms: Option<f64>,
    /// Buffers moqsrc output while paused (a live source should output none).
    pub frames_while_paused: usize,
    pub frames_after: usize,
    /// Median latency of moqsrc's output before the pause and after the resume.
    pub latency_before_ms: Option<f64>,
    pub latency_after_ms: Option<f64>,
    pub violations: Vec<String>,
}

impl PausedReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn summary(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let first = self.first_after;
        format!(
            "summary paused-receiver pause_s={:.0} receiver_rss_before_mb={:.1} receiver_rss_max_mb={:.1} \
             receiver_rss_end_mb={:.1} receiver_rss_growth_mb={:.1} resume_first_index={} \
             resume_first_discont={} resume_first_key={} resume_first_latency_ms={} \
             play_to_first_frame_ms={} first_render_latency_ms={} stale_renders={} \
             play_to_live_render_ms={} live_render_latency_ms={} \
             frames_while_paused={} frames_after={} latency_before_ms={} latency_after_ms={} result={}",
            self.pause_seconds,
            mb(self.rss_before_kib),
            mb(self.rss_max_kib),
            mb(self.rss_end_kib),
            self.rss_growth_mb,
            first.map_or("-".into(), |f| f.index.to_string()),
            first.is_some_and(|f| f.discont),
            first.is_some_and(|f| f.key),
            ms(first.and_then(|f| f.latency_us).map(|l| l as f64 / 1000.0)),
            ms(self.resume_wait_ms),
            ms(self.first_render_latency_ms),
            self.stale_renders,
            ms(self.live_render_wait_ms),
            ms(self.live_render_latency_ms),
            self.frames_while_paused,
            self.frames_after,
            ms(self.latency_before_ms),
            ms(self.latency_after_ms),
            verdict(&self.violations),
        )
    }
}

fn median_latency_ms(frames: &[OutputFrame]) -> Option<f64> {
    let mut l: Vec<i64> = frames.iter().filter_map(|f| f.latency_us).collect();
    if l.is_empty() {
        return None;
    }
    l.sort_unstable();
    Some(l[l.len() / 2] as f64 / 1000.0)
}

/// A receiver that plays, pauses for `pause_seconds`, then plays again.
pub fn paused_receiver(opts: &PausedOptions) -> Result<PausedReport, String> {
    println!(
        "== paused-receiver: play {} s, PAUSED {} s, play {} s",
        opts.play_seconds, opts.pause_seconds, opts.after_seconds
    );
    let mut sender = SenderProc::start(&opts.exe, "")?;
    let mut receiver = ReceiverProc::start(&opts.exe, &sender.url(), &sender.fingerprint)?;
    let rss = RssSampler::start(receiver.pid(), RSS_EVERY);
    receiver.wait_until(START_TIMEOUT, "first frame", |r| !r.frames.is_empty())?;
    let start = Instant::now();
    println!("   t  phase    receiver-MB  max-MB  output  rendered  latency-ms");
    let mut next_row = start + ROW_EVERY;
    // One phase of the run: poll both children, print rows.
    let mut phase = |name: &str,
                     seconds: u64,
                     sender: &mut SenderProc,
                     receiver: &mut ReceiverProc|
     -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(seconds);
        run_phase(start, until, &mut next_row, |row| {
            sender.poll()?;
            receiver.poll()?;
            if let Some(t) = row {
                let last = receiver.frames.last().and_then(|f| f.latency_us);
                println!(
                    "{t:4.0}  {name:<7}  {:>11}  {:>6}  {:>6}  {:>8}  {:>10}",
                    opt_mb(rss.latest()),
                    opt_mb(rss.max_since(start)),
                    receiver.frames.len(),
                    receiver.renders.len(),
                    last.map_or("-".into(), |l| format!("{:.0}", l as f64 / 1000.0)),
                );
            }
            Ok(true)
        })
    };
    phase("playing", opts.play_seconds, &mut sender, &mut receiver)?;
    let before = receiver.frames.len();
    let rss_before = rss.sample_now().ok_or("receiver exited")?;
    let paused_at = Instant::now();
    receiver.command("pause")?;
    receiver.wait_until(Duration::from_secs(10), "PAUSED", |r| {
        r.states.iter().any(|(s, _)| s == "paused")
    })?;
    let paused_us = receiver
        .states
        .iter()
        .find(|(s, _)| s == "paused")
        .map_or(0, |(_, t)| *t);
    phase("paused", opts.pause_seconds, &mut sender, &mut receiver)?;
    let play_us = unix_now_us();
    let pause_seconds = paused_at.elapsed().as_secs_f64();
    receiver.command("play")?;
    let wait = Duration::from_millis(opts.max_resume_wait_ms as u64) + Duration::from_secs(5);
    receiver.wait_until(wait, "a frame after PLAY", |r| {
        r.frames.last().is_some_and(|f| f.wall_us >= play_us)
    })?;
    phase("resumed", opts.after_seconds, &mut sender, &mut receiver)?;
    let rss_end = rss.sample_now().ok_or("receiver exited")?;
    let rss_max = rss.max_since(paused_at).unwrap_or(rss_end);
    let growth = mb_diff(rss_max, rss_before);

    let first_after = receiver
        .frames
        .iter()
        .find(|f| f.wall_us >= play_us)
        .copied();
    let resume_wait_ms = first_after.map(|f| (f.wall_us - play_us) as f64 / 1000.0);
    let renders_after: Vec<_> = receiver
        .renders
        .iter()
        .filter(|r| r.wall_us >= play_us)
        .collect();
    let first_render_latency_ms = renders_after
        .first()
        .and_then(|r| r.latency_us)
        .map(|l| l as f64 / 1000.0);
    let bound_us = (opts.max_resume_latency_ms * 1000.0) as i64;
    let stale_renders = renders_after
        .iter()
        .filter(|r| r.latency_us.is_some_and(|l| l > bound_us))
        .count();
    let live_render = renders_after
        .iter()
        .find(|r| r.latency_us.is_some_and(|l| l <= bound_us));
    let live_render_wait_ms = live_render.map(|r| (r.wall_us - play_us) as f64 / 1000.0);
    let live_render_latency_ms = live_render
        .and_then(|r| r.latency_us)
        .map(|l| l as f64 / 1000.0);
    let frames_while_paused = receiver
        .frames
        .iter()
        .filter(|f| f.wall_us >= paused_us && f.wall_us < play_us)
        .count();
    let after: Vec<OutputFrame> = receiver
        .frames
        .iter()
        .filter(|f| f.wall_us >= play_us)
        .copied()
        .collect();

    let mut violations = Vec::new();
    if growth >= opts.max_rss_growth_mb {
        violations.push(format!(
            "receiver RSS grew {growth:.1} MB (bound {} MB)",
            opts.max_rss_growth_mb
        ));
    }
    match first_after {
        None => violations.push("no frame after PLAY".into()),
        Some(f) => {
            if !f.discont || !f.key {
                violations.push(format!(
                    "the first buffer after PLAY is not a DISCONT keyframe (discont {}, key {})",
                    f.discont, f.key
                ));
            }
            match f.latency_us {
                Some(l) if (l as f64 / 1000.0) < opts.max_resume_latency_ms => {}
                Some(l) => violations.push(format!(
                    "the first frame after PLAY is {:.0} ms old (bound {} ms): not the live edge",
                    l as f64 / 1000.0,
                    opts.max_resume_latency_ms
                )),
                None => {
                    violations.push("the first frame after PLAY has no availability time".into())
                }
            }
        }
    }
    if let Some(wait) = resume_wait_ms
        && wait > opts.max_resume_wait_ms
    {
        violations.push(format!(
            "the first frame came {wait:.0} ms after PLAY (bound {} ms)",
            opts.max_resume_wait_ms
        ));
    }
    let report = PausedReport {
        pause_seconds,
        rss_before_kib: rss_before,
        rss_max_kib: rss_max,
        rss_end_kib: rss_end,
        rss_growth_mb: growth,
        first_after,
        resume_wait_ms,
        first_render_latency_ms,
        stale_renders,
        live_render_wait_ms,
        live_render_latency_ms,
        frames_while_paused,
        frames_after: after.len(),
        latency_before_ms: median_latency_ms(&receiver.frames[..before]),
        latency_after_ms: median_latency_ms(&after),
        violations,
    };
    println!("{}", report.summary());
    Ok(report)
}

// ---------------------------------------------------------------------------------------
// Subscriber churn

#[derive(Debug, Clone)]
pub struct ChurnOptions {
    /// The `moq-soak` binary, which plays the sender.
    pub exe: PathBuf,
    /// Measured cycles.
    pub cycles: u64,
    /// Cycles run before the RSS baseline, so allocator pools and caches that a first
    /// burst of sessions creates are in the baseline.
    pub warmup_cycles: u64,
    pub concurrency: usize,
    /// Seconds of plain streaming before the first cycle.
    pub warmup: u64,
    /// Seconds after each batch of cycles for closed sessions to be gone (idle timeout 5 s).
    pub settle: u64,
    /// Upper bound on the time the cycles may take.
    pub max_seconds: u64,
    pub max_rss_growth_mb: f64,
}

impl ChurnOptions {
    pub fn new(exe: PathBuf) -> ChurnOptions {
        ChurnOptions {
            exe,
            cycles: 1000,
            warmup_cycles: 200,
            concurrency: 4,
            warmup: 10,
            settle: 8,
            max_seconds: 1800,
            max_rss_growth_mb: 5.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ChurnReport {
    pub cycles: u64,
    pub failed: u64,
    pub last_error: Option<String>,
    pub cycles_per_s: f64,
    pub warmup_cycles: u64,
    pub warmup_cycles_per_s: f64,
    /// Before any cycle.
    pub rss_start_kib: u64,
    /// After the warm-up cycles and a settle.
    pub rss_baseline_kib: u64,
    /// Largest during and after the measured cycles.
    pub rss_max_kib: u64,
    pub rss_end_kib: u64,
    /// Max minus baseline: the bounded figure.
    pub rss_growth_mb: f64,
    /// Max minus the RSS before any cycle, allocator warm-up included.
    pub rss_growth_from_start_mb: f64,
    pub subscribers_end: u64,
    pub continuous: Continuity,
    pub continuous_first_key: bool,
    /// Groups the sender gave up over the run, for any subscriber: with none, a frame the
    /// continuous subscriber lacks was lost on its side.
    pub sender_groups_given_up: u64,
    pub violations: Vec<String>,
}

impl ChurnReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn summary(&self) -> String {
        format!(
            "summary churn cycles={} failed={} cycles_per_s={:.1} warmup_cycles={} \
             sender_rss_start_mb={:.1} sender_rss_baseline_mb={:.1} sender_rss_max_mb={:.1} \
             sender_rss_end_mb={:.1} sender_rss_growth_mb={:.1} sender_rss_growth_from_start_mb={:.1} \
             subscribers_end={} continuous_received={} continuous_expected={} continuous_lost={} \
             continuous_gaps={} continuous_disordered={} sender_groups_given_up={} result={}",
            self.cycles,
            self.failed,
            self.cycles_per_s,
            self.warmup_cycles,
            mb(self.rss_start_kib),
            mb(self.rss_baseline_kib),
            mb(self.rss_max_kib),
            mb(self.rss_end_kib),
            self.rss_growth_mb,
            self.rss_growth_from_start_mb,
            self.subscribers_end,
            self.continuous.received,
            self.continuous.expected,
            self.continuous.missing(),
            self.continuous.gaps,
            self.continuous.disordered,
            self.sender_groups_given_up,
            verdict(&self.violations),
        )
    }
}

/// The continuous subscriber of the churn scenario must get every frame, so nothing that
/// gives frames up for latency is in play: the sender sends every GoP in order (with
/// moqsink's default, a GoP whose tail has waited 200 ms unsent gives way to the next) and
/// the subscriber waits up to half a second for a missing frame (moqsrc's default, 100 ms).
/// A scheduling pause of a loaded machine then costs latency, not a frame; a frame missing
/// is the churn's doing.
const CHURN_SENDER: &str = "delivery=baseline";
const CHURN_SUBSCRIBER: &str = "latency=500";

/// Many short-lived subscribers beside a continuous one.
pub fn churn(opts: &ChurnOptions) -> Result<ChurnReport, String> {
    println!(
        "== churn: {} warm-up + {} measured connect/subscribe/drop cycles, {} at a time \
         (moqsink {CHURN_SENDER}, continuous moqsrc {CHURN_SUBSCRIBER})",
        opts.warmup_cycles, opts.cycles, opts.concurrency
    );
    let mut sender = SenderProc::start(&opts.exe, CHURN_SENDER)?;
    let rss = RssSampler::start(sender.pid(), RSS_EVERY);
    let watcher = Watcher::start_with(&sender.url(), &sender.fingerprint, CHURN_SUBSCRIBER)?;
    watcher.wait_first_frame(START_TIMEOUT)?;
    let rt = runtime()?;
    let counters = Arc::new(ChurnCounters::default());
    let (stop_tx, stop) = watch::channel(false);
    let start = Instant::now();
    let deadline = start + Duration::from_secs(opts.warmup + opts.max_seconds);
    println!(
        "   t  phase           sender-MB  max-MB  cycles  failed  subscribers  continuous  lost"
    );
    let mut next_row = start + ROW_EVERY;
    // One phase of the run: poll the sender and the continuous subscriber, print rows,
    // until `until` or until `cycles_until` cycles are done.
    let mut phase = |name: &str,
                     until: Instant,
                     cycles_until: Option<u64>,
                     sender: &mut SenderProc|
     -> Result<(), String> {
        run_phase(start, until, &mut next_row, |row| {
            sender.poll()?;
            if let Some(err) = watcher.error() {
                return Err(format!("continuous subscriber: {err}"));
            }
            if let Some(t) = row {
                let lost = healthy(&watcher, sender, Instant::now())
                    .map_or("-".into(), |c| c.missing().to_string());
                println!(
                    "{t:4.0}  {name:<14}  {:>9}  {:>6}  {:>6}  {:>6}  {:>11}  {:>10}  {:>4}",
                    opt_mb(rss.latest()),
                    opt_mb(rss.max_since(start)),
                    counters.done.load(Ordering::Relaxed),
                    counters.failed.load(Ordering::Relaxed),
                    sender.stat("subscribers"),
                    watcher.frames(),
                    lost,
                );
            }
            Ok(cycles_until.is_none_or(|n| counters.done.load(Ordering::Relaxed) < n))
        })
    };
    // Cycles run on the runtime while `phase` watches; `finish` reports how long they took.
    let spawn_cycles = |n: u64, sender: &SenderProc| {
        let target = counters.done.load(Ordering::Relaxed) + n;
        let job = rt.spawn(clients::churn(
            sender.url(),
            sender.fingerprint.clone(),
            n,
            opts.concurrency,
            Duration::ZERO,
            counters.clone(),
            stop.clone(),
        ));
        (job, target, Instant::now())
    };
    let finish =
        |(job, target, began): (tokio::task::JoinHandle<Result<(), String>>, u64, Instant),
         n: u64|
         -> Result<f64, String> {
            let took = began.elapsed().as_secs_f64();
            let done = counters.done.load(Ordering::Relaxed);
            if done < target {
                let _ = stop_tx.send(true);
                let _ =
                    rt.block_on(async { tokio::time::timeout(Duration::from_secs(20), job).await });
                return Err(format!(
                    "churn: only {} of {n} cycles within {} s",
                    n - (target - done),
                    opts.max_seconds
                ));
            }
            rt.block_on(job).map_err(|e| format!("churn task: {e}"))??;
            Ok(took)
        };
    let settle = Duration::from_secs(opts.settle);
    phase(
        "streaming",
        start + Duration::from_secs(opts.warmup),
        None,
        &mut sender,
    )?;
    let rss_start = rss.sample_now().ok_or("sender exited")?;
    let job = spawn_cycles(opts.warmup_cycles, &sender);
    phase("warm-up cycles", deadline, Some(job.1), &mut sender)?;
    let warmup_took = finish(job, opts.warmup_cycles)?;
    phase("settle", Instant::now() + settle, None, &mut sender)?;
    let rss_baseline = rss.sample_now().ok_or("sender exited")?;
    let failed_before = counters.failed.load(Ordering::Relaxed);
    let measured_from = Instant::now();
    let job = spawn_cycles(opts.cycles, &sender);
    phase("cycles", deadline, Some(job.1), &mut sender)?;
    let took = finish(job, opts.cycles)?;
    phase("settle", Instant::now() + settle, None, &mut sender)?;
    let finished = Instant::now();
    sender.poll()?;
    let rss_end = rss.sample_now().ok_or("sender exited")?;
    let rss_max = rss.max_since(measured_from).unwrap_or(rss_end);
    let continuous =
        healthy(&watcher, &sender, finished).ok_or("no sender count to compare with")?;
    let log = watcher.stop();
    print_breaks("the continuous subscriber", &log, &continuous, start);
    let failed = counters.failed.load(Ordering::Relaxed) - failed_before;
    let growth = mb_diff(rss_max, rss_baseline);
    let mut violations = Vec::new();
    if growth >= opts.max_rss_growth_mb {
        violations.push(format!(
            "sender RSS grew {growth:.1} MB (bound {} MB)",
            opts.max_rss_growth_mb
        ));
    }
    if continuous.missing() > 0 || continuous.gaps > 0 || continuous.disordered > 0 {
        violations.push(format!(
            "the continuous subscriber lost {} frames ({} gaps, {} out of order)",
            continuous.missing(),
            continuous.gaps,
            continuous.disordered
        ));
    }
    if log.first_key != Some(true) {
        violations.push("the continuous subscriber did not start at a DISCONT keyframe".into());
    }
    if failed > 0 {
        violations.push(format!(
            "{failed} of {} cycles failed (last: {})",
            opts.cycles,
            counters.last_error().unwrap_or_default()
        ));
    }
    let report = ChurnReport {
        cycles: opts.cycles,
        failed,
        last_error: counters.last_error(),
        cycles_per_s: opts.cycles as f64 / took,
        warmup_cycles: opts.warmup_cycles,
        warmup_cycles_per_s: opts.warmup_cycles as f64 / warmup_took.max(1e-9),
        rss_start_kib: rss_start,
        rss_baseline_kib: rss_baseline,
        rss_max_kib: rss_max,
        rss_end_kib: rss_end,
        rss_growth_mb: growth,
        rss_growth_from_start_mb: mb_diff(rss_max, rss_start),
        subscribers_end: sender.stat("subscribers"),
        continuous,
        continuous_first_key: log.first_key == Some(true),
        sender_groups_given_up: groups_given_up(&sender),
        violations,
    };
    println!("{}", report.summary());
    Ok(report)
}
