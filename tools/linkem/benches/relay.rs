//! Relay cost: runs the `linkem` binary pinned to one core, offers it rising packet rates from
//! this process (pinned to the other core), and prints the relay's CPU time per packet and the
//! highest rate it forwards with under 1% loss. Two paths: a shaped direction (rate unlimited,
//! 5 ms delay: shaper, queue and emitter thread) and an unshaped one (straight through).
//!
//! Run: `cargo bench -p linkem --bench relay`. Figures depend on the machine's load.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use linkem::probe::{self, Pace};

const PACKET: usize = 1200;
const RUN: Duration = Duration::from_secs(3);
const OFFERED_MBIT: [f64; 9] = [10.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0];

/// Pins the calling thread (or, after fork, the child) to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: the set is a plain bit mask initialised by CPU_ZERO before use, and
    // sched_setaffinity only reads it; pid 0 means the caller.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// CPU time (user + system) of the waited-for children so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn start_linkem(profile: &std::path::Path, forward: SocketAddr) -> (Child, SocketAddr) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_linkem"));
    cmd.args(["--listen", "127.0.0.1:0", "--forward", &forward.to_string()])
        .arg("--profile")
        .arg(profile)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: the closure only makes one system call (sched_setaffinity), which is safe to
    // call between fork and exec.
    unsafe {
        cmd.pre_exec(|| pin(0));
    }
    let mut child = cmd.spawn().expect("spawn linkem");
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut lines = stderr.lines().map_while(Result::ok);
    let listen = lines
        .find_map(|l| {
            l.strip_prefix("linkem: listening on ")
                .and_then(|r| r.split(',').next())
                .and_then(|a| a.parse().ok())
        })
        .expect("linkem did not start");
    // Keep reading stderr so linkem never writes into a closed pipe.
    thread::spawn(move || lines.for_each(drop));
    (child, listen)
}

struct Point {
    sent_mbit: f64,
    delivered_mbit: f64,
    loss: f64,
    cpu_share: f64,
    cpu_per_packet: Duration,
}

/// One run at `offered` Mbit/s; `shaped` sends server → client (through the profile),
/// otherwise client → server (unshaped).
fn measure(profile: &std::path::Path, shaped: bool, offered: f64) -> Point {
    let server = probe::bind_loopback().expect("server");
    let cpu_before = children_cpu();
    let (mut child, listen) = start_linkem(profile, server.local_addr().expect("addr"));
    let client = probe::bind_loopback().expect("client");
    let relay =
        probe::introduce(&client, listen, &server, Duration::from_secs(5)).expect("introduce");
    let (tx, rx, to): (UdpSocket, UdpSocket, SocketAddr) = if shaped {
        (server, client, relay)
    } else {
        (client, server, listen)
    };
    let base = Instant::now();
    let recorder =
        thread::spawn(move || probe::record(&rx, base, Duration::from_millis(300), RUN * 4));
    let pace = Pace {
        rate_bps: offered * 1e6,
        size: PACKET,
        duration: RUN,
    };
    let started = Instant::now();
    let sent = probe::send_paced(&tx, to, base, pace).expect("send");
    let send_time = started.elapsed().as_secs_f64();
    let got = recorder.join().expect("recorder");
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    child.wait().expect("wait linkem");
    let cpu = children_cpu() - cpu_before;
    let relayed = got.len().max(1) as u32;
    Point {
        sent_mbit: sent as f64 * PACKET as f64 * 8.0 / send_time / 1e6,
        delivered_mbit: probe::throughput_bps(&got).unwrap_or(0.0) / 1e6,
        loss: 1.0 - got.len() as f64 / sent as f64,
        cpu_share: cpu.as_secs_f64() / send_time,
        cpu_per_packet: cpu / relayed,
    }
}

fn main() {
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 2 && pin(1).is_ok() {
        println!("linkem pinned to CPU 0, traffic generator to CPU 1");
    } else {
        println!("not pinned ({cores} CPU): figures include the generator's load");
    }
    let profile = std::env::temp_dir().join(format!("linkem-bench-{}.json", std::process::id()));
    std::fs::write(
        &profile,
        r#"{"name": "bench", "queue_bytes": 50000000,
            "steps": [{"duration_s": 60, "rate_kbit": 0, "delay_ms": 5}]}"#,
    )
    .expect("write profile");
    for (shaped, what) in [
        (true, "shaped (unlimited rate, 5 ms delay)"),
        (false, "unshaped"),
    ] {
        println!(
            "\n{what}, {PACKET} B datagrams, {} s per point",
            RUN.as_secs()
        );
        println!(
            "{:>9} {:>9} {:>10} {:>7} {:>10} {:>12}",
            "offered", "sent", "delivered", "loss", "linkem CPU", "CPU/packet"
        );
        let mut best = 0.0f64;
        for offered in OFFERED_MBIT {
            let p = measure(&profile, shaped, offered);
            println!(
                "{offered:>6.0} Mb {:>6.1} Mb {:>7.1} Mb {:>6.2}% {:>9.0}% {:>9.2} µs",
                p.sent_mbit,
                p.delivered_mbit,
                p.loss * 100.0,
                p.cpu_share * 100.0,
                p.cpu_per_packet.as_secs_f64() * 1e6
            );
            if p.loss > 0.01 {
                break;
            }
            best = best.max(p.delivered_mbit);
        }
        println!(
            "max forwarded with < 1% loss: {best:.0} Mbit/s = {:.0} kpackets/s",
            best * 1e6 / (PACKET as f64 * 8.0) / 1000.0
        );
    }
    let _ = std::fs::remove_file(&profile);
}
