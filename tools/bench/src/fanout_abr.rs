//! The ABR viewers of a fan-out run (`--abr-share`): a share of the viewers are players
//! (`moqsrc abr=auto ! fakesink sync=true`), each behind a link of its own
//! (`--abr-kbit`, linkem), choosing among three renditions of the clip the sender
//! publishes. They run in a child process (`moq-bench fanout-abr-viewers`), so that their
//! CPU is not counted with the raw subscribers', and print what each one plays every
//! second; the runner keeps the seconds of its measurement window.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use gst::prelude::*;
use serde::Serialize;

use crate::run::unix_us;

/// The ABR viewers' link rate unless `--abr-kbit` says otherwise, kbit/s.
pub const DEFAULT_ABR_KBIT: u64 = 300;
/// The drop-tail queue of each ABR viewer's link: about a second at 300 kbit/s.
const QUEUE_BYTES: usize = 40_000;
/// How often each viewer's stats are read.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Frames a second of the clip: what a viewer that plays everything outputs.
const FPS: f64 = 24.0;

/// The renditions the sender publishes when some viewers run ABR, kbit/s: the clip's rate
/// (track `video`, what the raw subscribers take), half and a quarter of it.
pub fn ladder(top_kbit: u32) -> [u32; 3] {
    [top_kbit, top_kbit / 2, top_kbit / 4]
}

/// How many of `n` viewers are ABR viewers at `share_pct` percent (at least one when the
/// share is not 0, and never all of them).
pub fn abr_count(n: usize, share_pct: u32) -> usize {
    if share_pct == 0 || n < 2 {
        return 0;
    }
    (n * share_pct as usize / 100).clamp(1, n - 1)
}

/// What one ABR viewer played in one second.
#[derive(Debug, Clone, PartialEq)]
pub struct Second {
    pub viewer: usize,
    pub unix_us: i64,
    pub rendition: String,
    pub frames_output: u64,
    /// moqsrc's latency p95 over the last second, ms (none when nothing was output).
    pub p95_ms: Option<f64>,
}

impl Second {
    fn line(&self) -> String {
        format!(
            "second {} {} {} {} {}",
            self.viewer,
            self.unix_us,
            if self.rendition.is_empty() {
                "-"
            } else {
                &self.rendition
            },
            self.frames_output,
            self.p95_ms.map_or(-1.0, |p| p)
        )
    }

    /// A line [`line`](Self::line) wrote, without its leading word.
    pub fn parse(rest: &str) -> Option<Second> {
        let mut words = rest.split_whitespace();
        let viewer = words.next()?.parse().ok()?;
        let unix_us = words.next()?.parse().ok()?;
        let rendition = match words.next()? {
            "-" => String::new(),
            r => r.to_owned(),
        };
        let frames_output = words.next()?.parse().ok()?;
        let p95: f64 = words.next()?.parse().ok()?;
        Some(Second {
            viewer,
            unix_us,
            rendition,
            frames_output,
            p95_ms: (p95 >= 0.0).then_some(p95),
        })
    }
}

/// The ABR viewers of one run, over its window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbrViewers {
    pub count: usize,
    pub link_kbit: u64,
    pub ladder_kbit: Vec<u32>,
    /// Frames output per second of the window in % of the clip's, per viewer: median and
    /// lowest.
    pub frames_pct_median: Option<f64>,
    pub frames_pct_min: Option<f64>,
    /// Share of the viewer-seconds spent on each rendition (track name, %), most first.
    pub renditions_pct: Vec<(String, f64)>,
    /// Rendition changes within the window, all viewers.
    pub switches: u64,
    /// Per-second latency p95, ms: median and highest over every viewer-second.
    pub p95_ms_median: Option<f64>,
    pub p95_ms_max: Option<f64>,
    /// Viewers that reported nothing in the window.
    pub silent: usize,
    /// Their process (players and links) in % of one core over the window.
    pub cpu_pct: Option<f64>,
    pub errors: Vec<String>,
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// The figures of `count` viewers from their `seconds` within `[from_us, to_us)` (their
/// CPU and errors are the caller's to fill in).
pub fn summarize(
    seconds: &[Second],
    count: usize,
    link_kbit: u64,
    ladder_kbit: &[u32],
    from_us: i64,
    to_us: i64,
) -> AbrViewers {
    let window: Vec<&Second> = seconds
        .iter()
        .filter(|s| s.unix_us >= from_us && s.unix_us < to_us)
        .collect();
    let mut frames_pct = Vec::new();
    let mut switches = 0;
    let mut silent = 0;
    let mut on: Vec<(String, u64)> = Vec::new();
    for viewer in 0..count {
        let mine: Vec<&&Second> = window.iter().filter(|s| s.viewer == viewer).collect();
        let (Some(first), Some(last)) = (mine.first(), mine.last()) else {
            silent += 1;
            continue;
        };
        let span_s = (last.unix_us - first.unix_us) as f64 / 1e6;
        if span_s > 0.0 {
            let frames = last.frames_output.saturating_sub(first.frames_output) as f64;
            frames_pct.push(100.0 * frames / span_s / FPS);
        }
        switches += mine
            .windows(2)
            .filter(|w| w[0].rendition != w[1].rendition)
            .count() as u64;
        for s in &mine {
            match on.iter_mut().find(|(r, _)| *r == s.rendition) {
                Some((_, n)) => *n += 1,
                None => on.push((s.rendition.clone(), 1)),
            }
        }
    }
    let total: u64 = on.iter().map(|(_, n)| n).sum();
    on.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let mut p95: Vec<f64> = window.iter().filter_map(|s| s.p95_ms).collect();
    let p95_max = p95.iter().copied().reduce(f64::max);
    AbrViewers {
        count,
        link_kbit,
        ladder_kbit: ladder_kbit.to_vec(),
        frames_pct_median: median(&mut frames_pct),
        frames_pct_min: frames_pct.iter().copied().reduce(f64::min),
        renditions_pct: on
            .into_iter()
            .map(|(r, n)| {
                let name = if r.is_empty() { "none".into() } else { r };
                (name, 100.0 * n as f64 / total.max(1) as f64)
            })
            .collect(),
        switches,
        p95_ms_median: median(&mut p95),
        p95_ms_max: p95_max,
        silent,
        cpu_pct: None,
        errors: Vec::new(),
    }
}

/// The line of the fan-out table for a run's ABR viewers.
pub fn table_line(a: &AbrViewers) -> String {
    let opt = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.0}"));
    let renditions: Vec<String> = a
        .renditions_pct
        .iter()
        .map(|(r, p)| format!("{r} {p:.0}%"))
        .collect();
    format!(
        "  ABR viewers: {} behind {} kbit/s (ladder {:?} kbit/s): frames {}% median, {}% lowest; \
         renditions {}; {} switches; latency p95 {} ms median, {} ms max; {} silent; \
         their process {}% CPU{}\n",
        a.count,
        a.link_kbit,
        a.ladder_kbit,
        opt(a.frames_pct_median),
        opt(a.frames_pct_min),
        renditions.join(", "),
        a.switches,
        opt(a.p95_ms_median),
        opt(a.p95_ms_max),
        a.silent,
        opt(a.cpu_pct),
        if a.errors.is_empty() {
            String::new()
        } else {
            format!("; errors {:?}", a.errors)
        }
    )
}

/// `moq-bench fanout-abr-viewers --urls URL,.. --fingerprint HEX --count K --kbit R
/// --plugin-dir DIR --registry FILE`: K players, each behind its own R kbit/s link to one
/// of the URLs in turn, printing a `second` line per player every second (and `error`
/// lines), until stdin closes.
pub fn viewers_main(args: impl Iterator<Item = String>) -> Result<(), String> {
    let args = crate::fanout::key_values(args).map_err(|e| format!("fanout-abr-viewers: {e}"))?;
    let get = |key: &str| {
        args.get(key)
            .cloned()
            .ok_or(format!("fanout-abr-viewers: {key} missing"))
    };
    crate::fanout::load_plugin(&get("--plugin-dir")?, &get("--registry")?, "moqsrc")?;
    let count: usize = get("--count")?
        .parse()
        .map_err(|_| "fanout-abr-viewers: bad --count")?;
    let kbit: u64 = get("--kbit")?
        .parse()
        .map_err(|_| "fanout-abr-viewers: bad --kbit")?;
    let fingerprint = get("--fingerprint")?;
    let urls: Vec<String> = get("--urls")?.split(',').map(String::from).collect();
    let mut links = Vec::new();
    let mut players = Vec::new();
    for i in 0..count {
        let url = moq_session::MoqUrl::parse(&urls[i % urls.len()]).map_err(|e| e.to_string())?;
        let forward: SocketAddr = format!("{}:{}", url.host, url.port).parse().map_err(|_| {
            format!(
                "fanout-abr-viewers: {}:{} is not an address",
                url.host, url.port
            )
        })?;
        let link = linkem::Link::start(linkem::LinkConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            forward,
            downstream: Some(linkem::Profile::constant(kbit, QUEUE_BYTES)),
            upstream: None,
            seed: i as u64 + 1,
            log: None,
        })
        .map_err(|e| format!("linkem: {e}"))?;
        let description = format!(
            "moqsrc name=src url=moqt://{}{} tls-fingerprint={fingerprint} abr=auto \
             skip-forward=true media-timeout=20000 ! fakesink sync=true",
            link.local_addr(),
            url.path
        );
        let pipeline = gst::parse::launch(&description)
            .map_err(|e| format!("ABR viewer pipeline: {e}"))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| "ABR viewer: not a pipeline")?;
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| format!("ABR viewer does not play: {e}"))?;
        links.push(link);
        players.push(pipeline);
    }
    let commands = moq_testkit::roles::stdin_commands();
    let mut reported = vec![false; count];
    // Until stdin closes: no command is taken.
    while !matches!(
        commands.try_recv(),
        Ok(None) | Err(std::sync::mpsc::TryRecvError::Disconnected)
    ) {
        std::thread::sleep(SAMPLE_EVERY);
        let mut out = std::io::stdout().lock();
        for (i, pipeline) in players.iter().enumerate() {
            if let Some(bus) = pipeline.bus()
                && let Some(msg) = bus.pop_filtered(&[gst::MessageType::Error])
                && let gst::MessageView::Error(err) = msg.view()
                && !reported[i]
            {
                reported[i] = true;
                let _ = writeln!(out, "error viewer {i}: {}", err.error());
            }
            let Some(src) = pipeline.by_name("src") else {
                continue;
            };
            let stats = src.property::<gst::Structure>("stats");
            let p95 = stats.get::<f64>("latency-p95-ms").unwrap_or(-1.0);
            let second = Second {
                viewer: i,
                unix_us: unix_us(),
                rendition: stats.get::<String>("rendition").unwrap_or_default(),
                frames_output: stats.get::<u64>("frames-output").unwrap_or(0),
                p95_ms: (p95 >= 0.0).then_some(p95),
            };
            let _ = writeln!(out, "{}", second.line());
        }
        let _ = out.flush();
    }
    for pipeline in &players {
        let _ = pipeline.set_state(gst::State::Null);
    }
    drop(links);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(viewer: usize, s: i64, rendition: &str, frames: u64, p95: f64) -> Second {
        Second {
            viewer,
            unix_us: s * 1_000_000,
            rendition: rendition.into(),
            frames_output: frames,
            p95_ms: (p95 >= 0.0).then_some(p95),
        }
    }

    #[test]
    fn a_second_survives_its_line() {
        for s in [
            second(3, 17, "video-2", 480, 212.5),
            second(0, 1, "", 0, -1.0),
        ] {
            let line = s.line();
            assert_eq!(
                Second::parse(line.strip_prefix("second ").unwrap()),
                Some(s)
            );
        }
        assert_eq!(Second::parse("1 2 video"), None);
    }

    #[test]
    fn the_share_of_abr_viewers() {
        assert_eq!(abr_count(200, 10), 20);
        assert_eq!(abr_count(5, 10), 1);
        assert_eq!(abr_count(1, 10), 0);
        assert_eq!(abr_count(100, 0), 0);
        assert_eq!(abr_count(10, 100), 9);
        assert_eq!(ladder(1000), [1000, 500, 250]);
    }

    #[test]
    fn the_window_of_each_viewer_is_summarized() {
        // Viewer 0: all frames on video-2 for 10 s; viewer 1: half the frames, one switch
        // from video-1 to video-2; viewer 2: nothing in the window. Seconds outside the
        // window (0 and 20) do not count.
        let mut seconds = vec![second(0, 0, "video-1", 0, 900.0)];
        for s in 5..=15 {
            seconds.push(second(0, s, "video-2", 24 * s as u64, 150.0));
            let rendition = if s < 8 { "video-1" } else { "video-2" };
            seconds.push(second(1, s, rendition, 12 * s as u64, 300.0));
        }
        seconds.push(second(1, 20, "video", 0, 5000.0));
        let a = summarize(&seconds, 3, 300, &[1000, 500, 250], 5_000_000, 16_000_000);
        assert_eq!(a.frames_pct_min, Some(50.0));
        assert_eq!(a.frames_pct_median, Some(100.0));
        assert_eq!(a.switches, 1);
        assert_eq!(a.silent, 1);
        assert_eq!(a.renditions_pct[0].0, "video-2");
        let video1 = a
            .renditions_pct
            .iter()
            .find(|(r, _)| r == "video-1")
            .unwrap();
        assert!((video1.1 - 100.0 * 3.0 / 22.0).abs() < 1e-9);
        assert_eq!(a.p95_ms_max, Some(300.0));
        assert!(table_line(&a).contains("1 switches"));
        let a = AbrViewers {
            cpu_pct: Some(12.0),
            ..a
        };
        assert!(table_line(&a).contains("12% CPU"));
    }
}
