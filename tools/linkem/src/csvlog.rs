//! The CSV log: one row per direction every 100 ms of trace time, with per-interval counters,
//! plus a last row per direction at exit, so each counter column sums to the exit totals.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use crate::link::{Direction, DirectionTotals, Shared};

const HEADER: &str = "time_s,direction,bytes_in,packets_in,bytes_out,packets_out,\
bytes_dropped_queue,packets_dropped_queue,bytes_dropped_loss,packets_dropped_loss,\
packets_send_failed,queue_bytes,queue_delay_ms,rate_kbit";
const INTERVAL: Duration = Duration::from_millis(100);
const POLL: Duration = Duration::from_millis(10);

/// Writes the log until the link has stopped; an I/O error ends logging with a message.
pub(crate) fn run(shared: &Shared, mut out: BufWriter<File>) {
    if let Err(e) = write_log(shared, &mut out).and_then(|()| out.flush()) {
        let _ = writeln!(io::stderr(), "linkem: writing the log failed: {e}");
    }
}

fn write_log(shared: &Shared, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{HEADER}")?;
    out.flush()?;
    let stopped = || shared.log_stop.load(Ordering::Relaxed);
    let epoch = loop {
        if let Some(e) = shared.epoch.get() {
            break *e;
        }
        if stopped() {
            return Ok(());
        }
        thread::sleep(POLL);
    };
    let mut prev = [DirectionTotals::default(); 2];
    let mut next = epoch + INTERVAL;
    loop {
        while !stopped() && Instant::now() < next {
            thread::sleep(next.saturating_duration_since(Instant::now()).min(POLL));
        }
        let last = stopped();
        let t = Instant::now().saturating_duration_since(epoch);
        for (dir, prev) in [&shared.down, &shared.up].into_iter().zip(&mut prev) {
            write_row(out, t, dir, prev)?;
        }
        // Flushed every tick so that a killed process still leaves a usable file.
        out.flush()?;
        if last {
            return Ok(());
        }
        // A late tick does not make the following ones bunch up.
        let ticks = t.as_nanos() / INTERVAL.as_nanos() + 1;
        next = epoch + INTERVAL * u32::try_from(ticks).unwrap_or(u32::MAX);
    }
}

fn write_row(
    out: &mut impl Write,
    t: Duration,
    dir: &Direction,
    prev: &mut DirectionTotals,
) -> io::Result<()> {
    let s = dir.sample(t);
    write!(out, "{:.4},{}", t.as_secs_f64(), dir.name)?;
    for (now, before) in s.totals.counters().iter().zip(prev.counters()) {
        write!(out, ",{}", now - before)?;
    }
    writeln!(
        out,
        ",{},{:.3},{}",
        s.queue_bytes,
        s.queue_wait.as_secs_f64() * 1000.0,
        s.rate_kbit
    )?;
    *prev = s.totals;
    Ok(())
}
