//! Checks the emulator against the fluid model (docs/metrics.md): a constant-rate UDP stream of
//! R = 600 kbit/s into CONST_500 (C = 500 kbit/s, queue Q from the profile). Until the backlog
//! (R − C)·t reaches Q, a packet sent at t should wait (R − C)·t / C before its serialisation
//! starts; after that the wait stays at about Q·8 / C and the excess (R − C) is dropped.
//!
//! Run: `cargo run --release -p linkem --example fluid_check [-- --seconds 60]`.
//! Prints measured vs model at several times and exits non-zero if they differ by more than
//! 15% before the queue fills, or if drops are missing or early.

use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use linkem::Profile;
use linkem::probe::{self, Arrival, Pace};

const STREAM_BPS: f64 = 600_000.0;
const PACKET: usize = 1200;
const TOLERANCE: f64 = 0.15;

/// The downstream rows of the link's CSV log: (trace time s, packets dropped by the queue in
/// the interval, emulator-reported queue delay ms).
fn read_log(path: &PathBuf) -> Result<Vec<(f64, u64, f64)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or(format!("log has no column {name}"))
    };
    let (t, dir, drops, delay) = (
        col("time_s")?,
        col("direction")?,
        col("packets_dropped_queue")?,
        col("queue_delay_ms")?,
    );
    let rows = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r.get(dir) == Some(&"downstream"))
        .filter_map(|r| {
            Some((
                r.get(t)?.parse().ok()?,
                r.get(drops)?.parse().ok()?,
                r.get(delay)?.parse().ok()?,
            ))
        })
        .collect();
    Ok(rows)
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = v.fold((0, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

fn run(seconds: f64) -> Result<bool, String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let profile = Profile::from_file(&dir.join("../../pipelines/profiles/const_500.json"))
        .map_err(|e| e.to_string())?;
    let cap_bps = profile.rate_kbit_at(Duration::ZERO) as f64 * 1000.0;
    let queue = profile.queue_bytes() as f64;
    let log = std::env::temp_dir().join(format!("linkem-fluid-{}.csv", std::process::id()));
    let (link, pair) = probe::loopback(Some(profile.clone()), None, 1, Some(log.clone()))
        .map_err(|e| e.to_string())?;
    println!(
        "stream {:.0} kbit/s of {PACKET} B datagrams for {seconds} s into {} ({:.0} kbit/s, \
         queue {queue:.0} B)",
        STREAM_BPS / 1000.0,
        profile.name(),
        cap_bps / 1000.0
    );
    let base = Instant::now();
    let client = pair.client;
    let limit = Duration::from_secs_f64(seconds + 30.0);
    let recorder =
        thread::spawn(move || probe::record(&client, base, Duration::from_secs(2), limit));
    let pace = Pace {
        rate_bps: STREAM_BPS,
        size: PACKET,
        duration: Duration::from_secs_f64(seconds),
    };
    let sent =
        probe::send_paced(&pair.server, pair.relay, base, pace).map_err(|e| e.to_string())?;
    let arrivals: Vec<Arrival> = recorder.join().map_err(|_| "recorder failed")?;
    let epoch = link
        .trace_start()
        .ok_or("no packet reached the link")?
        .saturating_duration_since(base)
        .as_secs_f64();
    let totals = link.stop();
    let rows = read_log(&log)?;
    let _ = std::fs::remove_file(&log);

    // Times below are from the stream's first send (s0); the log's from the trace start.
    let s0 = arrivals
        .first()
        .ok_or("nothing arrived")?
        .sent
        .as_secs_f64();
    let excess_bps = STREAM_BPS - cap_bps;
    let t_fill = queue * 8.0 / excess_bps;
    let model_wait = |t: f64| (excess_bps * t / cap_bps).min(queue * 8.0 / cap_bps);
    let model_drops = |t: f64| ((t - t_fill).max(0.0) * excess_bps / (PACKET as f64 * 8.0)).floor();
    let serialisation = PACKET as f64 * 8.0 / cap_bps;
    println!("queue fills at t = {t_fill:.2} s (model); wait = time queued before serialisation");
    println!(
        "{:>6} {:>11} {:>11} {:>8} {:>13} {:>11} {:>11}",
        "t (s)", "model (ms)", "measured", "error", "emulator log", "drops model", "drops seen"
    );
    let mut ok = true;
    let mut checkpoints: Vec<f64> = [1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
        .into_iter()
        .filter(|t| *t < t_fill)
        .collect();
    checkpoints.extend([16.0, 20.0, 30.0, 40.0, 50.0, seconds - 1.0]);
    checkpoints.retain(|t| *t < seconds);
    for t in checkpoints {
        let measured = mean(
            arrivals
                .iter()
                .filter(|a| (a.sent.as_secs_f64() - s0 - t).abs() <= 0.25)
                .map(|a| a.latency().as_secs_f64() - serialisation),
        )
        .ok_or(format!("no packet sent around t = {t} s was delivered"))?;
        let model = model_wait(t);
        let err = measured / model - 1.0;
        let log_t = t + s0 - epoch;
        let reported = rows
            .iter()
            .min_by(|a, b| (a.0 - log_t).abs().total_cmp(&(b.0 - log_t).abs()))
            .map_or(f64::NAN, |r| r.2);
        let drops: u64 = rows.iter().filter(|r| r.0 <= log_t).map(|r| r.1).sum();
        let filling = t < t_fill;
        if filling && (err.abs() > TOLERANCE || drops > 0) {
            ok = false;
        }
        println!(
            "{t:>6.1} {:>11.1} {:>11.1} {:>+7.1}% {:>13.1} {:>11.0} {:>11}{}",
            model * 1000.0,
            measured * 1000.0,
            err * 100.0,
            reported,
            model_drops(t),
            drops,
            if filling { "" } else { "  (queue full)" }
        );
    }
    let d = totals.downstream;
    let end = sent as f64 * PACKET as f64 * 8.0 / STREAM_BPS;
    let expect_drops = model_drops(end);
    let drop_err = d.packets_dropped_queue as f64 / expect_drops - 1.0;
    println!(
        "sent {sent}, delivered {} ({:.1} kbit/s while backlogged), dropped by the queue {} \
         (model {expect_drops:.0}, {:+.1}%), max queue {} B",
        arrivals.len(),
        probe::throughput_bps(&arrivals).unwrap_or(0.0) / 1000.0,
        d.packets_dropped_queue,
        drop_err * 100.0,
        d.queue_bytes_max
    );
    if seconds > t_fill && drop_err.abs() > TOLERANCE {
        ok = false;
    }
    if d.packets_in != d.packets_out + d.packets_dropped_queue + d.packets_dropped_loss {
        println!("counters do not add up: {d}");
        ok = false;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let seconds = match (args.next().as_deref(), args.next()) {
        (None, _) => 60.0,
        (Some("--seconds"), Some(v)) => match v.parse::<f64>() {
            Ok(s) if s >= 2.0 => s,
            _ => {
                eprintln!("fluid_check: --seconds needs a number of at least 2");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: fluid_check [--seconds N]");
            return ExitCode::from(2);
        }
    };
    match run(seconds) {
        Ok(true) => {
            println!("PASS: within {:.0}% of the fluid model", TOLERANCE * 100.0);
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("FAIL");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("fluid_check: {e}");
            ExitCode::FAILURE
        }
    }
}
