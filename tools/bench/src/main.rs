//! `moq-bench`: plays one reference stream through linkem profiles with our four delivery
//! modes, SRT, RTP and WebRTC, and records per-frame latency, rendering and link figures.
//!
//! ```text
//! moq-bench --out DIR [--quick] [--reps N] [--profiles a,b] [--systems x,y] [--grid-seconds S]
//!           [--max-seconds S] [--no-grid] [--resume]
//!           [--moq-gst PLUGIN_DIR] [--webrtc PLUGIN_DIR]
//! moq-bench --fanout --out DIR [--counts 1,10,50,100,200] [--warmup S] [--measure S]
//!           [--sink-plugin-dir DIR [--sink-label NAME]] [--no-relay] [--no-direct] [--cluster]
//!           [--clip-kbit N]
//! ```
//! Writes `DIR/summary.json`, `DIR/frames/*.csv` (one row per frame), `DIR/links/*.csv`
//! (linkem logs) and, through `tools/bench/report.py`, plots and `DIR/BENCHMARKS.md`.
//!
//! `--fanout` measures instead how many viewers one moqsink serves ([`fanout`]): one
//! sender process publishing ~1 Mbit/s H.264 at 24 fps, N lightweight subscribers in this
//! process, directly, through moq-relay and through a three-node cluster; latency, losses, and the sender's and the
//! relay's CPU and RSS per N, into `DIR/fanout.json` and a printed table
//! (`tools/bench/report.py DIR` renders it as markdown).

mod fanout;
mod fanout_abr;
mod metrics;
mod moq_gst;
mod reference;
mod run;
mod systems;
mod webrtc;

use std::path::{Path, PathBuf};
use std::process::Command;

use linkem::Profile;

use crate::moq_gst::MoqGst;
use crate::run::RunSpec;
use crate::systems::System;
use crate::webrtc::WebRtc;

const USAGE: &str = "usage: moq-bench --out DIR [--quick] [--reps N] [--profiles NAME,..] [--systems NAME,..] [--grid-seconds S] [--max-seconds S] [--no-grid] [--resume] [--moq-gst DIR] [--webrtc DIR]
       moq-bench --fanout --out DIR [--counts N,..] [--warmup S] [--measure S] [--sink-plugin-dir DIR [--sink-label NAME]] [--no-relay] [--no-direct] [--cluster] [--clip-kbit N] [--abr-share PCT [--abr-kbit K]]

  --out DIR          where results go (created)
  --quick            one short profile (pipelines/profiles/quick.json), our four modes, once
  --reps N           repetitions of every run (default 1)
  --profiles a,b     profiles to run (default: cascade, intra_cascade, spike, slow_jitters,
                     fast_jitters, const_500, random_walk, mobile)
  --systems x,y      systems (default: all: moq-baseline, moq-deprioritize-b, moq-skip-gops,
                     moq-combined, moq-skip-gops-delay, moq-adaptive, moq-adaptive-delay,
                     moq-av, moq-abr, their encoder variants moq-adaptive-default,
                     moq-adaptive-delay-default, moq-abr-default, ..-openh264 (x264's
                     defaults with B frames and lookahead; openh264enc), srt-125ms,
                     srt-500ms, rtp-udp, webrtc-gcc)
  --grid-seconds S   length of each loss x RTT grid run (default 60)
  --max-seconds S    run each profile for at most S s (default: its whole trace)
  --no-grid          skip the loss x RTT grid
  --resume           keep the runs already in DIR/summary.json (an interrupted run goes on
                     where it stopped; the same flags give the same plan)
  --moq-gst DIR      also compare moq-gst (moq-dev's plugin, libgstmoq.so in DIR, built by
                     pipelines/install-moq-gst.sh) through moq-relay on the profiles above;
                     added to the default systems, or name it: --systems ..,moq-gst
  --webrtc DIR       where webrtc-gcc's plugins and signalling server are (built by
                     pipelines/install-webrtc.sh); without it moq-bench runs that script
                     (the first time builds for ~20 min). If they cannot be had, webrtc-gcc
                     is not run and DIR/webrtc-unavailable.txt and the report say why

  --fanout           fan-out instead: one moqsink (its own process, ~1 Mbit/s H.264 at 24 fps,
                     sync=true) and N subscribers in this process, each its own QUIC connection,
                     directly and through moq-relay (MOQ_RELAY, else pipelines/install-moq-relay.sh);
                     latency p50/p99, objects lost, sender and relay CPU and RSS per N into
                     DIR/fanout.json and a table (~27 s per run: the default 15 take about 7 min)
  --counts a,b       subscriber counts (default 1,10,50,100,200)
  --warmup S         seconds after all subscribers receive media before measuring (default 3)
  --measure S        seconds measured per run (default 20)
  --sink-plugin-dir DIR  also run the direct fan-out with the moqsink in DIR (libgstmoqt.so
                     of another build), side by side with this build's
  --sink-label NAME  what to call that build in the results (default other)
  --no-relay         skip the runs through moq-relay
  --no-direct        skip the runs from moqsink directly
  --cluster          also run through a cluster of three moq-relay nodes: the sender publishes
                     to the first, the subscribers go to the nodes in turn; per-node CPU and RSS
  --clip-kbit N      the clip's bitrate (default 1000)
  --abr-share PCT    with --cluster: the sender publishes the clip at N, N/2 and N/4 kbit/s
                     (alternates), and each cluster run is repeated with PCT % of the viewers
                     being players (moqsrc abr=auto, in a child process), each behind its own
                     link of K kbit/s; what they play is a line under the run's
  --abr-kbit K       the ABR players' link rate (default 300)

Needs moqsink/moqsrc next to the binary (cargo build --release) and GStreamer with x264,
libav and SRT elements; plots need /usr/bin/python3 with matplotlib.";

/// The Twitch profiles, CONST_500, a fast-varying random walk and a mobile-like link.
const PROFILES: [&str; 8] = [
    "cascade",
    "intra_cascade",
    "spike",
    "slow_jitters",
    "fast_jitters",
    "const_500",
    "random_walk",
    "mobile",
];
/// The grid's cell without loss or rate limit.
const IDLE_CELL: &str = "loss0_rtt50";
const GRID: [&str; 12] = [
    IDLE_CELL,
    "loss0_rtt100",
    "loss0_rtt150",
    "loss0.0001_rtt50",
    "loss0.0001_rtt100",
    "loss0.0001_rtt150",
    "loss0.001_rtt50",
    "loss0.001_rtt100",
    "loss0.001_rtt150",
    "loss0.01_rtt50",
    "loss0.01_rtt100",
    "loss0.01_rtt150",
];

#[derive(Debug)]
struct Options {
    out: PathBuf,
    quick: bool,
    reps: u32,
    profiles: Vec<String>,
    systems: Vec<System>,
    grid_seconds: u64,
    max_seconds: Option<u64>,
    grid: bool,
    /// Keep the runs already in the output's summary.
    resume: bool,
    moq_gst: Option<PathBuf>,
    webrtc: Option<PathBuf>,
    /// `--fanout`: the fan-out benchmark instead of the link profiles.
    fanout: Option<fanout::Options>,
}

fn seconds(flag: &str, value: String) -> Result<u64, String> {
    match value.parse() {
        Ok(s) if s > 0 => Ok(s),
        _ => Err(format!("{flag}: a whole number of seconds above 0")),
    }
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        out: PathBuf::new(),
        quick: false,
        reps: 1,
        profiles: PROFILES.iter().map(|s| s.to_string()).collect(),
        systems: System::all(),
        grid_seconds: 60,
        max_seconds: None,
        grid: true,
        resume: false,
        moq_gst: None,
        webrtc: None,
        fanout: None,
    };
    let mut systems_given = false;
    let mut fanout = fanout::Options::default();
    let (mut fanout_wanted, mut fanout_flag) = (false, None);
    let mut sink_dir: Option<PathBuf> = None;
    let mut sink_label = "other".to_owned();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => o.out = PathBuf::from(value()?),
            "--quick" => o.quick = true,
            "--reps" => o.reps = value()?.parse().map_err(|_| "--reps: a number")?,
            "--profiles" => o.profiles = value()?.split(',').map(str::to_owned).collect(),
            "--systems" => {
                systems_given = true;
                o.systems = value()?
                    .split(',')
                    .map(|n| System::from_name(n).ok_or(format!("unknown system {n}")))
                    .collect::<Result<_, _>>()?
            }
            "--grid-seconds" => {
                o.grid_seconds = value()?.parse().map_err(|_| "--grid-seconds: a number")?
            }
            "--max-seconds" => {
                o.max_seconds = Some(value()?.parse().map_err(|_| "--max-seconds: a number")?)
            }
            "--no-grid" => o.grid = false,
            "--resume" => o.resume = true,
            "--moq-gst" => o.moq_gst = Some(PathBuf::from(value()?)),
            "--webrtc" => o.webrtc = Some(PathBuf::from(value()?)),
            "--fanout" => fanout_wanted = true,
            "--counts" => {
                fanout.counts = value()?
                    .split(',')
                    .map(|n| match n.trim().parse() {
                        Ok(n) if n > 0 => Ok(n),
                        _ => Err(format!("--counts: {n:?} is not a count above 0")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--warmup" => fanout.warmup_s = seconds(&flag, value()?)?,
            "--measure" => fanout.measure_s = seconds(&flag, value()?)?,
            "--sink-plugin-dir" => sink_dir = Some(PathBuf::from(value()?)),
            "--sink-label" => {
                sink_label = value()?;
                let fits = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
                if sink_label.is_empty() || !sink_label.chars().all(fits) || sink_label == "current"
                {
                    return Err("--sink-label: letters, digits, - _ . (not \"current\")".into());
                }
            }
            "--no-relay" => fanout.relay = false,
            "--no-direct" => fanout.direct = false,
            "--cluster" => fanout.cluster = true,
            "--clip-kbit" => {
                fanout.clip_kbit = match value()?.parse() {
                    Ok(kbit) if (50..=20_000).contains(&kbit) => kbit,
                    _ => return Err("--clip-kbit: kbit/s from 50 to 20000".into()),
                }
            }
            "--abr-share" => {
                fanout.abr_share = match value()?.parse() {
                    Ok(pct) if pct <= 90 => pct,
                    _ => return Err("--abr-share: percent from 0 to 90".into()),
                }
            }
            "--abr-kbit" => {
                fanout.abr_kbit = match value()?.parse() {
                    Ok(kbit) if (50..=100_000).contains(&kbit) => kbit,
                    _ => return Err("--abr-kbit: kbit/s from 50 to 100000".into()),
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
        if matches!(
            flag.as_str(),
            "--counts"
                | "--warmup"
                | "--measure"
                | "--sink-plugin-dir"
                | "--sink-label"
                | "--no-relay"
                | "--no-direct"
                | "--cluster"
                | "--clip-kbit"
                | "--abr-share"
                | "--abr-kbit"
        ) {
            fanout_flag = Some(flag);
        }
    }
    match (fanout_wanted, fanout_flag) {
        (true, _) => {
            if fanout.abr_share > 0 && !fanout.cluster {
                return Err("--abr-share goes with --cluster".into());
            }
            fanout.other_sink = sink_dir.map(|dir| (sink_label, dir));
            o.fanout = Some(fanout);
        }
        (false, Some(flag)) => return Err(format!("{flag} goes with --fanout\n{USAGE}")),
        (false, None) => {}
    }
    if o.out.as_os_str().is_empty() {
        return Err(format!("--out is required\n{USAGE}"));
    }
    if o.moq_gst.is_some() && !systems_given {
        o.systems.push(System::MoqGst);
    }
    if o.quick {
        o.profiles = vec!["quick".into()];
        o.systems = System::ours();
        o.reps = 1;
        o.grid = false;
    }
    Ok(o)
}

/// The workspace root: the binary lives in `<root>/target/<profile>/`, or (a
/// `CARGO_TARGET_DIR` elsewhere) the current directory is inside the workspace.
fn workspace_root() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let cwd = std::env::current_dir().unwrap_or_default();
    exe.ancestors()
        .chain(cwd.ancestors())
        .find(|d| d.join("pipelines/profiles").is_dir())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            format!(
                "neither {} nor the current directory is inside the workspace",
                exe.display()
            )
        })
}

fn init_gstreamer() -> Result<(), String> {
    let exe_dir = std::env::current_exe()
        .map_err(|e| e.to_string())?
        .parent()
        .ok_or("no binary directory")?
        .to_path_buf();
    if std::env::var_os("GST_PLUGIN_PATH").is_none() {
        // SAFETY: single-threaded here, before GStreamer or any runtime starts.
        unsafe { std::env::set_var("GST_PLUGIN_PATH", &exe_dir) };
    }
    gst::init().map_err(|e| e.to_string())?;
    for element in [
        "moqsink",
        "moqsrc",
        "x264enc",
        "avdec_h264",
        "srtsink",
        "mpegtsmux",
        "rtpjitterbuffer",
    ] {
        if gst::ElementFactory::find(element).is_none() {
            return Err(format!(
                "GStreamer element {element} not found (build the plugins with cargo build --release; \
                 install the GStreamer plugin packages with pipelines/setup.sh)"
            ));
        }
    }
    Ok(())
}

/// The `--key value` arguments of a child process (`sender`, `receiver`).
struct ChildArgs(std::collections::HashMap<String, String>);

impl ChildArgs {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<ChildArgs, String> {
        let mut map = std::collections::HashMap::new();
        while let (Some(k), Some(v)) = (args.next(), args.next()) {
            map.insert(k, v);
        }
        gst::init().map_err(|e| e.to_string())?;
        Ok(ChildArgs(map))
    }

    fn get(&self, key: &str) -> Result<String, String> {
        self.0.get(key).cloned().ok_or(format!("{key} missing"))
    }

    fn system(&self) -> Result<System, String> {
        System::from_name(&self.get("--system")?).ok_or("unknown system".into())
    }
}

fn receiver_main(args: impl Iterator<Item = String>) -> Result<(), String> {
    let args = ChildArgs::parse(args)?;
    run::receiver(
        &args.system()?,
        args.get("--addr")?.parse().map_err(|_| "bad --addr")?,
        Path::new(&args.get("--out")?),
    )
    .map_err(|e| format!("receiver: {e}"))
}

fn sender_main(args: impl Iterator<Item = String>) -> Result<(), String> {
    let get = ChildArgs::parse(args)?;
    let arg = |k: &str| get.get(k).map_err(|e| format!("sender: {e}"));
    let system = get.system().map_err(|e| format!("sender: {e}"))?;
    run::sender(
        &system,
        arg("--addr")?.parse().map_err(|_| "sender: bad --addr")?,
        Path::new(&arg("--reference")?),
        arg("--seconds")?
            .parse()
            .map_err(|_| "sender: bad --seconds")?,
        &arg("--cert")?,
        &arg("--key")?,
        Path::new(&arg("--out")?),
    )
}

fn main_inner() -> Result<(), String> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("sender") {
        args.next();
        return sender_main(args);
    }
    if args.peek().map(String::as_str) == Some("receiver") {
        args.next();
        return receiver_main(args);
    }
    if args.peek().map(String::as_str) == Some("fanout-sender") {
        args.next();
        return fanout::sender_main(args);
    }
    if args.peek().map(String::as_str) == Some("fanout-abr-viewers") {
        args.next();
        return fanout_abr::viewers_main(args);
    }
    let options = parse(args)?;
    let root = workspace_root()?;
    std::fs::create_dir_all(&options.out).map_err(|e| format!("{}: {e}", options.out.display()))?;
    init_gstreamer()?;
    if let Some(fanout) = &options.fanout {
        return fanout::run(&options.out, &root, fanout);
    }
    let load = |name: &str| {
        Profile::from_file(&root.join(format!("pipelines/profiles/{name}.json")))
            .map_err(|e| e.to_string())
    };
    let mut plan: Vec<(String, Profile, u64, Vec<System>)> = Vec::new();
    for name in &options.profiles {
        let profile = load(name)?;
        let whole = profile.duration().as_secs().max(1);
        let seconds = options.max_seconds.map_or(whole, |m| m.clamp(1, whole));
        plan.push((name.clone(), profile, seconds, options.systems.clone()));
    }
    if options.grid {
        for name in GRID {
            plan.push((
                name.into(),
                load(name)?,
                options.grid_seconds,
                System::grid_cell(name == IDLE_CELL),
            ));
        }
    }
    let longest = plan.iter().map(|p| p.2).max().unwrap_or(30);
    let reference_path = options.out.join("reference.bin");
    let aus = match reference::load(&reference_path) {
        Ok(aus) if aus.len() as u64 >= (longest + 5) * 24 => aus,
        _ => {
            eprintln!("encoding {} s of reference stream", longest + 5);
            let aus = reference::encode(longest + 5)?;
            reference::save(&aus, &reference_path).map_err(|e| e.to_string())?;
            aus
        }
    };
    let bytes: usize = aus.iter().map(|a| a.data.len()).sum();
    eprintln!(
        "reference: {} frames, {:.0} kbit/s",
        aus.len(),
        bytes as f64 * 8.0 / (aus.len() as f64 / 24.0) / 1000.0
    );
    let tls = moq_testkit::relay::certificate(&options.out)?;
    let moq_gst = match &options.moq_gst {
        Some(dir) => Some(MoqGst::locate(dir, &root)?),
        None if options.systems.contains(&System::MoqGst) => {
            return Err("moq-gst needs --moq-gst DIR".into());
        }
        None => None,
    };
    let wanted_webrtc = plan.iter().any(|p| p.3.contains(&System::WebRtc));
    let webrtc = webrtc_for(&mut plan, &options, &root)?;
    let summary_path = options.out.join("summary.json");
    let mut summaries: Vec<serde_json::Value> = match options.resume {
        true => earlier_runs(&summary_path)?,
        false => Vec::new(),
    };
    let mut failures = Vec::new();
    for repetition in 0..options.reps {
        for (name, profile, seconds, systems) in &plan {
            for system in systems {
                if summaries.iter().any(|s| {
                    s["system"] == system.name()
                        && s["profile"] == name.as_str()
                        && s["repetition"] == repetition
                }) {
                    continue;
                }
                eprintln!(
                    "== {} on {name} ({seconds} s), repetition {repetition}",
                    system.name()
                );
                let spec = RunSpec {
                    system,
                    profile,
                    profile_name: name,
                    seconds: *seconds,
                    repetition,
                    reference: &reference_path,
                    aus: &aus,
                    tls: &tls,
                    out: &options.out,
                    moq_gst: moq_gst.as_ref(),
                    webrtc: webrtc.as_ref(),
                };
                match run::run(&spec) {
                    Ok(summary) => {
                        eprintln!(
                            "   latency mean {:.0} ms p95 {:.0} ms, rendered {}/{}, stalls {}",
                            summary.latency_mean_ms,
                            summary.latency_p95_ms,
                            summary.frames_rendered,
                            summary.frames_captured,
                            summary.stalls
                        );
                        summaries.push(serde_json::to_value(summary).expect("summary serialises"));
                    }
                    Err(e) => {
                        eprintln!("   FAILED: {e}");
                        failures.push(e);
                    }
                }
                let json = serde_json::to_string_pretty(&summaries).expect("summaries serialise");
                std::fs::write(&summary_path, json).map_err(|e| e.to_string())?;
            }
        }
    }
    let status = Command::new("/usr/bin/python3")
        .arg(root.join("tools/bench/report.py"))
        .arg(&options.out)
        .status()
        .map_err(|e| format!("report: {e}"))?;
    if !status.success() {
        return Err("report.py failed (needs /usr/bin/python3 with matplotlib)".into());
    }
    if wanted_webrtc && webrtc.is_none() {
        eprintln!(
            "moq-bench: webrtc-gcc was NOT compared; {} says why",
            options.out.join(WEBRTC_UNAVAILABLE).display()
        );
    }
    if !failures.is_empty() {
        return Err(format!("{} run(s) failed: {failures:?}", failures.len()));
    }
    Ok(())
}

/// Where the run writes why webrtc-gcc was not compared (the report shows it).
const WEBRTC_UNAVAILABLE: &str = "webrtc-unavailable.txt";

/// The WebRTC plugins when webrtc-gcc is in the plan ([`WebRtc::find`]). If they cannot be
/// had, webrtc-gcc leaves the plan, loudly: the reason and the end of the build log go to
/// `OUT/webrtc-unavailable.txt`, which the report shows.
fn webrtc_for(
    plan: &mut [(String, Profile, u64, Vec<System>)],
    options: &Options,
    root: &Path,
) -> Result<Option<WebRtc>, String> {
    if !plan.iter().any(|p| p.3.contains(&System::WebRtc)) {
        return Ok(None);
    }
    let unavailable = options.out.join(WEBRTC_UNAVAILABLE);
    let log = options.out.join("webrtc-build.log");
    match WebRtc::find(options.webrtc.as_deref(), root, &log) {
        Ok(webrtc) => {
            let _ = std::fs::remove_file(&unavailable);
            Ok(Some(webrtc))
        }
        Err(e) => {
            let mut why = format!("{e}\n");
            if let Ok(text) = std::fs::read_to_string(&log) {
                let lines: Vec<&str> = text.lines().collect();
                for line in &lines[lines.len().saturating_sub(20)..] {
                    why.push_str(line);
                    why.push('\n');
                }
            }
            std::fs::write(&unavailable, &why)
                .map_err(|e| format!("{}: {e}", unavailable.display()))?;
            eprintln!(
                "\n!!! webrtc-gcc is NOT compared: {e}\n!!! (the reason is in {})\n",
                unavailable.display()
            );
            for step in plan.iter_mut() {
                step.3.retain(|s| *s != System::WebRtc);
            }
            Ok(None)
        }
    }
}

/// The runs of an earlier, interrupted invocation (none if it wrote no summary yet).
fn earlier_runs(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn main() {
    if let Err(e) = main_inner() {
        eprintln!("moq-bench: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> impl Iterator<Item = String> {
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn resume_keeps_earlier_runs() {
        assert!(!parse(args("--out x")).unwrap().resume);
        assert!(parse(args("--out x --resume --reps 3")).unwrap().resume);
        let dir = std::env::temp_dir().join(format!("moq-bench-resume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("summary.json");
        assert!(earlier_runs(&path).unwrap().is_empty(), "nothing run yet");
        std::fs::write(
            &path,
            r#"[{"system": "moq-baseline", "profile": "spike", "repetition": 1}]"#,
        )
        .unwrap();
        let runs = earlier_runs(&path).unwrap();
        assert_eq!(
            (runs.len(), &runs[0]["repetition"]),
            (1, &serde_json::json!(1))
        );
        std::fs::write(&path, "[{").unwrap();
        assert!(
            earlier_runs(&path).is_err(),
            "a damaged summary is an error, not a fresh start"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn webrtc_is_among_the_default_systems_and_its_directory_is_a_flag() {
        let o = parse(args("--out x")).unwrap();
        assert!(o.systems.contains(&System::WebRtc));
        assert_eq!(o.webrtc, None);
        let o = parse(args(
            "--out x --webrtc /w --systems webrtc-gcc,moq-adaptive",
        ))
        .unwrap();
        assert_eq!(o.webrtc, Some(PathBuf::from("/w")));
        assert_eq!(o.systems.len(), 2);
        assert!(
            !parse(args("--out x --quick"))
                .unwrap()
                .systems
                .contains(&System::WebRtc)
        );
    }

    #[test]
    fn fanout_flags() {
        let o = parse(args("--out x --fanout")).unwrap();
        assert_eq!(o.fanout, Some(fanout::Options::default()));
        let o = parse(args(
            "--fanout --out x --counts 1,5 --warmup 2 --measure 10 --sink-plugin-dir /b --sink-label before --no-relay",
        ))
        .unwrap();
        let f = o.fanout.unwrap();
        assert_eq!(f.counts, vec![1, 5]);
        assert_eq!((f.warmup_s, f.measure_s, f.relay), (2, 10, false));
        assert_eq!(f.other_sink, Some(("before".into(), PathBuf::from("/b"))));
        assert!(f.direct && !f.cluster);
        let f = parse(args("--fanout --out x --no-direct --cluster"))
            .unwrap()
            .fanout
            .unwrap();
        assert!(!f.direct && f.relay && f.cluster);
        assert_eq!(f.clip_kbit, fanout::DEFAULT_CLIP_KBIT);
        let f = parse(args("--fanout --out x --clip-kbit 300"))
            .unwrap()
            .fanout
            .unwrap();
        assert_eq!(f.clip_kbit, 300);
        assert!(parse(args("--out x --fanout --clip-kbit 10")).is_err());
        let f = parse(args(
            "--fanout --out x --cluster --abr-share 10 --abr-kbit 250",
        ))
        .unwrap()
        .fanout
        .unwrap();
        assert_eq!((f.abr_share, f.abr_kbit), (10, 250));
        assert!(parse(args("--fanout --out x --abr-share 10")).is_err());
        assert!(parse(args("--fanout --out x --cluster --abr-share 95")).is_err());
        assert!(
            parse(args("--out x --cluster"))
                .unwrap_err()
                .contains("goes with --fanout")
        );
        assert_eq!(parse(args("--out x")).unwrap().fanout, None);
        assert!(
            parse(args("--out x --counts 1"))
                .unwrap_err()
                .contains("goes with --fanout")
        );
        assert!(parse(args("--out x --fanout --counts 0")).is_err());
        assert!(parse(args("--out x --fanout --counts a")).is_err());
        assert!(parse(args("--out x --fanout --measure 0")).is_err());
        assert!(parse(args("--out x --fanout --sink-label current")).is_err());
        assert!(parse(args("--out x --fanout --sink-label a/b")).is_err());
        assert!(parse(args("--out x --fanout --warmup")).is_err());
    }
}
