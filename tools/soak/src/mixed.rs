//! Everything at once, through a moq-relay cluster, for as long as asked (an hour in
//! `pipelines/soak.sh hour`): the publisher and a continuous viewer on nodes that are
//! restarted in turn as a deploy restarts them (SIGTERM, GOAWAY, drain, start again), and on
//! the node that stays up, subscriber churn, a subscriber that stalls and comes back, and a
//! viewer behind a congested link.
//!
//! What is bounded: the memory of the sender and of the node that stays up, and the
//! continuous viewer's frames (each once, in order, nearly all of them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use moq_testkit::media::{Continuity, NAMESPACE, Watcher};
use moq_testkit::proc::{RssSampler, mb, mb_diff};
use moq_testkit::relay::{self, Relay};
use moq_testkit::roles::{START_TIMEOUT, SenderProc};
use tokio::sync::watch;

use crate::clients::{self, ChurnCounters, StallCounters};
use crate::scenario::{
    ROW_EVERY, RSS_EVERY, fmt_pct, healthy, opt_mb, print_breaks, run_phase, runtime, verdict,
};

/// The relay's root open to anyone, which the broadcast is published under.
const RELAY_ROOT: &str = "anon";
/// How long a stopping node waits for its sessions to leave.
const DRAIN: &str = "8s";
/// How long a stopping node may take to exit: its drain and a margin.
const EXIT: Duration = Duration::from_secs(20);
/// The congested viewer's link: a drop-tail queue of this many bytes.
const CONGESTED_QUEUE_BYTES: usize = 60_000;

#[derive(Debug, Clone)]
pub struct MixedOptions {
    /// The `moq-soak` binary, which plays the sender.
    pub exe: PathBuf,
    pub seconds: u64,
    /// A node is restarted this often (the two restarted nodes in turn).
    pub restart_every: u64,
    /// RSS warm-up: seconds after the start.
    pub warmup: u64,
    /// The congested viewer's link rate (the stream is ~600 kbit/s).
    pub congested_kbit: u64,
    /// Each churn cycle is followed by this pause.
    pub churn_pause_ms: u64,
    pub max_rss_growth_mb: f64,
    pub min_viewer_pct: f64,
}

impl MixedOptions {
    pub fn new(exe: PathBuf) -> MixedOptions {
        MixedOptions {
            exe,
            seconds: 3600,
            restart_every: 300,
            warmup: 120,
            congested_kbit: 400,
            churn_pause_ms: 1000,
            max_rss_growth_mb: 10.0,
            min_viewer_pct: 99.9,
        }
    }
}

#[derive(Debug, Clone)]
pub struct MixedReport {
    pub seconds: f64,
    pub restarts: u64,
    /// Restarts whose node did not exit within [`EXIT`] and was killed.
    pub restarts_killed: u64,
    /// The longest time a stopped node took to exit (its sessions leaving).
    pub longest_exit: Duration,
    pub sender_rss_warmup_kib: u64,
    pub sender_rss_max_kib: u64,
    pub sender_rss_growth_mb: f64,
    pub root_rss_warmup_kib: u64,
    pub root_rss_max_kib: u64,
    pub root_rss_growth_mb: f64,
    pub viewer: Continuity,
    pub congested_frames: usize,
    pub churn_cycles: u64,
    pub churn_failed: u64,
    pub stalled_sessions: u64,
    pub violations: Vec<String>,
}

impl MixedReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn summary(&self) -> String {
        format!(
            "summary mixed seconds={:.0} restarts={} restarts_killed={} longest_exit_s={:.1} \
             sender_rss_warmup_mb={:.1} sender_rss_max_mb={:.1} sender_rss_growth_mb={:.1} \
             relay_rss_warmup_mb={:.1} relay_rss_max_mb={:.1} relay_rss_growth_mb={:.1} \
             viewer_kept_pct={:.3} viewer_received={} viewer_expected={} viewer_gaps={} \
             viewer_disordered={} congested_frames={} churn_cycles={} churn_failed={} \
             stalled_sessions={} result={}",
            self.seconds,
            self.restarts,
            self.restarts_killed,
            self.longest_exit.as_secs_f64(),
            mb(self.sender_rss_warmup_kib),
            mb(self.sender_rss_max_kib),
            self.sender_rss_growth_mb,
            mb(self.root_rss_warmup_kib),
            mb(self.root_rss_max_kib),
            self.root_rss_growth_mb,
            self.viewer.kept_pct(),
            self.viewer.received,
            self.viewer.expected,
            self.viewer.gaps,
            self.viewer.disordered,
            self.congested_frames,
            self.churn_cycles,
            self.churn_failed,
            self.stalled_sessions,
            verdict(&self.violations),
        )
    }
}

/// The broadcast's root on a node, with its certificate pinned (for `backup-urls`).
fn pinned(at: SocketAddr, fingerprint: &str) -> String {
    format!("moqt://{at}/{RELAY_ROOT}?tls-fingerprint={fingerprint}")
}

/// Node 0 stays up; nodes 1 and 2 are restarted in turn. Every pair of nodes is linked,
/// so the cluster stays whole while one node is down.
fn start_cluster(
    binary: &std::path::Path,
    cert: &str,
    key: &str,
    fingerprint: &str,
) -> Result<Vec<Relay>, String> {
    let mut nodes: Vec<Relay> = Vec::new();
    for _ in 0..3 {
        let mut more: Vec<String> = vec!["--drain-timeout".into(), DRAIN.into()];
        for node in &nodes {
            more.extend([
                "--cluster-connect".into(),
                format!("moqt://{}/", node.addr()),
                "--connect-tls-fingerprint".into(),
                fingerprint.into(),
            ]);
        }
        nodes.push(Relay::start(
            binary,
            moq_testkit::free_local_addr()?,
            cert,
            key,
            &more,
        )?);
    }
    Ok(nodes)
}

/// The whole cluster run; see the module's documentation.
pub fn mixed(opts: &MixedOptions) -> Result<MixedReport, String> {
    println!(
        "== mixed: {} s through a three-node moq-relay cluster; a node restarted every {} s, \
         churn every {} ms, a stalled subscriber, a viewer behind {} kbit/s",
        opts.seconds, opts.restart_every, opts.churn_pause_ms, opts.congested_kbit
    );
    let workspace = std::env::current_dir().map_err(|e| e.to_string())?;
    let binary = relay::find(&workspace)?;
    let dir = std::env::temp_dir().join(format!("moq-soak-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (cert, key, fingerprint) = relay::certificate(&dir)?;
    let mut nodes = start_cluster(&binary, &cert, &key, &fingerprint)?;
    let addrs: Vec<SocketAddr> = nodes.iter().map(Relay::addr).collect();
    let url = |i: usize| format!("moqt://{}/{RELAY_ROOT}", addrs[i]);
    let backups = |of: &[usize]| {
        let urls: Vec<String> = of.iter().map(|&i| pinned(addrs[i], &fingerprint)).collect();
        format!("backup-urls={}", urls.join(","))
    };

    let mut sender = SenderProc::spawn(
        &opts.exe,
        vec![
            "send".into(),
            "--url".into(),
            url(1),
            "--moqsink-props".into(),
            format!(
                "namespace={NAMESPACE} tls-fingerprint={fingerprint} {}",
                backups(&[2, 0])
            ),
        ],
    )?;
    let sender_rss = RssSampler::start(sender.pid(), RSS_EVERY);
    let root_rss = RssSampler::start(nodes[0].pid(), RSS_EVERY);
    let viewer = Watcher::start_with(
        &url(2),
        &fingerprint,
        &format!(
            "namespace={NAMESPACE} media-timeout=60000 {}",
            backups(&[1, 0])
        ),
    )?;
    viewer.wait_first_frame(START_TIMEOUT)?;
    let link = linkem::Link::start(linkem::LinkConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        forward: addrs[0],
        downstream: Some(linkem::Profile::constant(
            opts.congested_kbit,
            CONGESTED_QUEUE_BYTES,
        )),
        upstream: None,
        seed: 1,
        log: None,
    })
    .map_err(|e| format!("linkem: {e}"))?;
    let congested = Watcher::start_with(
        &format!("moqt://{}/{RELAY_ROOT}", link.local_addr()),
        &fingerprint,
        &format!("namespace={NAMESPACE} media-timeout=60000"),
    )?;

    let rt = runtime()?;
    let (stop_tx, stop) = watch::channel(false);
    let churn = Arc::new(ChurnCounters::default());
    let churn_job = rt.spawn(clients::churn(
        url(0),
        fingerprint.clone(),
        u64::MAX,
        1,
        Duration::from_millis(opts.churn_pause_ms),
        churn.clone(),
        stop.clone(),
    ));
    let stalls = Arc::new(StallCounters::default());
    let stall_job = rt.spawn(clients::stall(
        url(0),
        vec!["catalog", "video"],
        true,
        stalls.clone(),
        stop,
    ));

    let start = Instant::now();
    let warmup_at = start + Duration::from_secs(opts.warmup);
    let end = start + Duration::from_secs(opts.seconds);
    let restart_every = Duration::from_secs(opts.restart_every.max(1));
    let mut next_restart = start + restart_every;
    let mut restarts = 0u64;
    let mut restarts_killed = 0u64;
    let mut longest_exit = Duration::ZERO;
    let mut warmup = None;
    println!(
        "   t  sender-MB  relay-MB  published  viewer  kept-%  congested  churn  failed  stalled  restarts"
    );
    let mut next_row = start + ROW_EVERY;
    run_phase(start, end, &mut next_row, |row| {
        sender.poll()?;
        if let Some(err) = viewer.error() {
            return Err(format!("viewer: {err}"));
        }
        if let Some(err) = congested.error() {
            return Err(format!("congested viewer: {err}"));
        }
        if warmup.is_none() && Instant::now() >= warmup_at {
            warmup = Some((sender_rss.sample_now(), root_rss.sample_now()));
        }
        if let Some(t) = row {
            println!(
                "{t:4.0}  {:>9}  {:>8}  {:>9}  {:>6}  {:>6}  {:>9}  {:>5}  {:>6}  {:>7}  {:>8}",
                opt_mb(sender_rss.latest()),
                opt_mb(root_rss.latest()),
                sender.latest().map_or(0, |t| t.frames),
                viewer.frames(),
                fmt_pct(healthy(&viewer, &sender, Instant::now())),
                congested.frames(),
                churn.done.load(Ordering::Relaxed),
                churn.failed.load(Ordering::Relaxed),
                stalls.stalls.load(Ordering::Relaxed),
                restarts,
            );
        }
        // The node's drain blocks this loop; the row above is printed first.
        if Instant::now() >= next_restart {
            next_restart += restart_every;
            let which = 1 + (restarts % 2) as usize;
            let node = &mut nodes[which];
            let stopped = start.elapsed().as_secs_f64();
            match node.stop_gracefully(EXIT)? {
                Some(took) => longest_exit = longest_exit.max(took),
                None => restarts_killed += 1,
            }
            node.restart()?;
            println!(
                "      node {which} stopped at {stopped:.1} s, up again at {:.1} s",
                start.elapsed().as_secs_f64()
            );
            restarts += 1;
        }
        Ok(true)
    })?;
    let finished = Instant::now();
    sender.poll()?;
    let _ = stop_tx.send(true);
    rt.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(15), churn_job).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), stall_job).await;
    });
    let viewer_c = healthy(&viewer, &sender, finished).ok_or("no sender count to compare with")?;
    let congested_frames = congested.stop().indices.len();
    let viewer_log = viewer.stop();
    print_breaks("the viewer", &viewer_log, &viewer_c, start);
    drop(link);
    let (Some(sender_warmup), Some(root_warmup)) = warmup.unwrap_or_default() else {
        return Err("the run ended before the warm-up, or a process had exited by then".into());
    };
    let sender_max = sender_rss.max_since(warmup_at).unwrap_or(sender_warmup);
    let root_max = root_rss.max_since(warmup_at).unwrap_or(root_warmup);
    let _ = std::fs::remove_dir_all(&dir);

    let mut violations = Vec::new();
    for (what, growth) in [
        ("sender", mb_diff(sender_max, sender_warmup)),
        ("relay node", mb_diff(root_max, root_warmup)),
    ] {
        if growth >= opts.max_rss_growth_mb {
            violations.push(format!(
                "{what} RSS grew {growth:.1} MB (bound {} MB)",
                opts.max_rss_growth_mb
            ));
        }
    }
    if viewer_c.kept_pct() < opts.min_viewer_pct || viewer_c.disordered > 0 {
        violations.push(format!(
            "the viewer kept {:.3}% (bound {}%), {} frames twice or out of order",
            viewer_c.kept_pct(),
            opts.min_viewer_pct,
            viewer_c.disordered
        ));
    }
    if viewer_log.first_key != Some(true) {
        violations.push("the viewer did not start at a DISCONT keyframe".into());
    }
    if congested_frames == 0 {
        violations.push("the congested viewer got no frame".into());
    }
    let churn_cycles = churn.done.load(Ordering::Relaxed);
    let churn_failed = churn.failed.load(Ordering::Relaxed);
    // A cycle that meets a restarting node may fail; most must not.
    if churn_cycles == 0 || churn_failed * 10 > churn_cycles {
        violations.push(format!(
            "{churn_failed} of {churn_cycles} churn cycles failed (last: {})",
            churn.last_error().unwrap_or_default()
        ));
    }
    let report = MixedReport {
        seconds: finished.duration_since(start).as_secs_f64(),
        restarts,
        restarts_killed,
        longest_exit,
        sender_rss_warmup_kib: sender_warmup,
        sender_rss_max_kib: sender_max,
        sender_rss_growth_mb: mb_diff(sender_max, sender_warmup),
        root_rss_warmup_kib: root_warmup,
        root_rss_max_kib: root_max,
        root_rss_growth_mb: mb_diff(root_max, root_warmup),
        viewer: viewer_c,
        congested_frames,
        churn_cycles,
        churn_failed,
        stalled_sessions: stalls.stalls.load(Ordering::Relaxed),
        violations,
    };
    println!("{}", report.summary());
    Ok(report)
}
