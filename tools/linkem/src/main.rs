//! `linkem`: relays UDP between clients and a server through an emulated bottleneck.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linkem::{Link, LinkConfig, Profile};

const USAGE: &str = "\
linkem: trace-driven userspace UDP bottleneck

Usage: linkem --listen HOST:PORT --forward HOST:PORT --profile FILE [--reverse FILE]
              [--seed N] [--log FILE.csv]

Clients send UDP to --listen. Each client address gets its own socket towards --forward,
through which its datagrams go to the server and the server's replies come back. All clients
share one bottleneck (queue and rate) per direction.

Options:
  --listen HOST:PORT   Address clients send to. Port 0 picks a free port; the address in
                       use is printed on stderr at start.
  --forward HOST:PORT  The server (e.g. a MoQ relay or an SRT listener).
  --profile FILE       JSON profile shaping the downstream direction (server -> client, the
                       media direction when the server sends). If the file has a \"reverse\"
                       object, that shapes the upstream direction.
  --reverse FILE       JSON profile shaping the upstream direction (client -> server);
                       overrides a \"reverse\" object in --profile. Without either, upstream
                       datagrams pass through unshaped.
  --seed N             Seed (unsigned 64-bit) for the loss and jitter draws; the same seed
                       and packet sequence give the same losses. Default 0.
  --log FILE.csv       Write per-direction counters, queue and rate every 100 ms.
  -h, --help           Print this help.

The trace clock starts with the first datagram in either direction. On SIGINT or SIGTERM,
linkem stops and prints per-direction totals (UDP payload bytes and packets in, out, dropped
by the queue, lost, failed to send, still in the link) on stdout.

Exit status: 0 after a signal, 1 if a profile, an address or the log file is unusable,
2 for a usage error.";

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Lets SIGINT and SIGTERM end the main loop instead of the process, so totals get printed.
fn install_signal_handlers() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: an all-zero sigaction is a valid value to fill in; the handler only stores
        // to an atomic, which is async-signal-safe; the pointers are valid for the call.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

struct Args {
    listen: SocketAddr,
    forward: SocketAddr,
    profile: PathBuf,
    reverse: Option<PathBuf>,
    seed: u64,
    log: Option<PathBuf>,
}

enum Failure {
    /// Bad command line: exit 2 with a pointer to --help.
    Usage(String),
    /// Unusable input or environment: exit 1.
    Fatal(String),
}

fn resolve(flag: &str, value: &str) -> Result<SocketAddr, Failure> {
    let mut addrs = value
        .to_socket_addrs()
        .map_err(|e| Failure::Fatal(format!("{flag} {value}: {e}")))?;
    addrs
        .next()
        .ok_or_else(|| Failure::Fatal(format!("{flag} {value}: no address found")))
}

/// Parses the command line; None means --help was asked for.
fn parse(mut argv: impl Iterator<Item = String>) -> Result<Option<Args>, Failure> {
    let usage = |m: String| Failure::Usage(m);
    let mut values: [Option<String>; 6] = Default::default();
    const FLAGS: [&str; 6] = [
        "--listen",
        "--forward",
        "--profile",
        "--reverse",
        "--seed",
        "--log",
    ];
    while let Some(arg) = argv.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(None);
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (arg, None),
        };
        let Some(i) = FLAGS.iter().position(|f| *f == flag) else {
            return Err(usage(format!("unknown argument '{flag}'")));
        };
        let value = match inline.or_else(|| argv.next()) {
            Some(v) => v,
            None => return Err(usage(format!("{flag} needs a value"))),
        };
        if values[i].replace(value).is_some() {
            return Err(usage(format!("{flag} given twice")));
        }
    }
    let [listen, forward, profile, reverse, seed, log] = values;
    let required =
        |v: Option<String>, flag: &str| v.ok_or_else(|| Failure::Usage(format!("missing {flag}")));
    let listen = required(listen, "--listen")?;
    let forward = required(forward, "--forward")?;
    let profile = required(profile, "--profile")?;
    let seed = match seed {
        Some(s) => s
            .parse()
            .map_err(|_| usage(format!("--seed must be an unsigned integer (got '{s}')")))?,
        None => 0,
    };
    Ok(Some(Args {
        listen: resolve("--listen", &listen)?,
        forward: resolve("--forward", &forward)?,
        profile: PathBuf::from(profile),
        reverse: reverse.map(PathBuf::from),
        seed,
        log: log.map(PathBuf::from),
    }))
}

fn describe(p: Option<&Profile>) -> String {
    match p {
        None => "unshaped".to_owned(),
        Some(p) => format!(
            "{} ({} step{}, {:.1} s{}, queue {} B)",
            p.name(),
            p.steps().len(),
            if p.steps().len() == 1 { "" } else { "s" },
            p.duration().as_secs_f64(),
            if p.is_looped() { ", looped" } else { "" },
            p.queue_bytes()
        ),
    }
}

fn run() -> Result<(), Failure> {
    let Some(args) = parse(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };
    let load = |path: &PathBuf| Profile::from_file(path).map_err(|e| Failure::Fatal(e.to_string()));
    let downstream = load(&args.profile)?;
    let upstream = match &args.reverse {
        Some(path) => Some(load(path)?),
        None => downstream.reverse().cloned(),
    };
    install_signal_handlers()
        .map_err(|e| Failure::Fatal(format!("cannot install signal handlers: {e}")))?;
    eprintln!(
        "linkem: downstream {}\nlinkem: upstream {}",
        describe(Some(&downstream)),
        describe(upstream.as_ref())
    );
    let link = Link::start(LinkConfig {
        listen: args.listen,
        forward: args.forward,
        downstream: Some(downstream),
        upstream,
        seed: args.seed,
        log: args.log,
    })
    .map_err(|e| Failure::Fatal(format!("cannot start on {}: {e}", args.listen)))?;
    eprintln!(
        "linkem: listening on {}, forwarding to {}",
        link.local_addr(),
        args.forward
    );
    let started = Instant::now();
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let totals = link.stop();
    println!(
        "linkem: stopped after {:.1} s (bytes are UDP payload)",
        started.elapsed().as_secs_f64()
    );
    println!("downstream {}", totals.downstream);
    println!("upstream {}", totals.upstream);
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("linkem: {m}\nTry 'linkem --help'.");
            ExitCode::from(2)
        }
        Err(Failure::Fatal(m)) => {
            eprintln!("linkem: {m}");
            ExitCode::from(1)
        }
    }
}
