//! The `linkem` command line: help, error reporting and a relay run ended by SIGTERM.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use linkem::probe;

const BIN: &str = env!("CARGO_BIN_EXE_linkem");

fn linkem(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run linkem")
}

/// A scratch file unique to this test process.
fn scratch(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("linkem-cli-{}-{name}", std::process::id()));
    fs::write(&path, contents).expect("write scratch file");
    path
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_lists_every_flag() {
    let out = linkem(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for flag in [
        "--listen",
        "--forward",
        "--profile",
        "--reverse",
        "--seed",
        "--log",
        "--help",
    ] {
        assert!(help.contains(flag), "--help does not mention {flag}");
    }
}

#[test]
fn usage_errors_exit_2() {
    for (args, says) in [
        (&[][..], "missing --listen"),
        (&["--bogus"][..], "unknown argument '--bogus'"),
        (&["--listen"][..], "--listen needs a value"),
        (
            &[
                "--listen=127.0.0.1:0",
                "--forward",
                "127.0.0.1:9",
                "--profile",
                "p",
                "--seed",
                "x",
            ][..],
            "--seed must be an unsigned integer",
        ),
    ] {
        let out = linkem(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn bad_profiles_give_clear_errors() {
    let cases = [
        ("notjson.json", Some("{ not json"), "not valid profile JSON"),
        (
            "badloss.json",
            Some(
                r#"{"name": "x", "queue_bytes": 1, "steps": [{"duration_s": 1, "rate_kbit": 1, "loss": 2}]}"#,
            ),
            "steps[0].loss must be between 0 and 1",
        ),
        ("missing.json", None, "cannot read"),
    ];
    for (name, contents, says) in cases {
        let path = match contents {
            Some(c) => scratch(name, c),
            None => std::env::temp_dir().join("linkem-cli-no-such-profile.json"),
        };
        let p = path.to_string_lossy().into_owned();
        let out = linkem(&[
            "--listen",
            "127.0.0.1:0",
            "--forward",
            "127.0.0.1:9",
            "--profile",
            &p,
        ]);
        let err = text(&out.stderr);
        eprintln!("{name}: {}", err.trim());
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says) && err.contains(&p), "{err}");
        let _ = fs::remove_file(&path);
    }
}

#[test]
fn relays_logs_and_prints_totals_on_sigterm() {
    let profile = scratch(
        "const.json",
        r#"{"name": "c", "queue_bytes": 100000, "steps": [{"duration_s": 10, "rate_kbit": 2000, "delay_ms": 10}]}"#,
    );
    let log = std::env::temp_dir().join(format!("linkem-cli-{}-log.csv", std::process::id()));
    let server = probe::bind_loopback().expect("server");
    let mut child = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--forward"])
        .arg(server.local_addr().expect("addr").to_string())
        .arg("--profile")
        .arg(&profile)
        .arg("--log")
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn linkem");
    // Kept open until the end: linkem reports on stderr while it runs.
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let listen = stderr
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("linkem: listening on ")
                .and_then(|r| r.split(',').next())
                .map(str::to_owned)
        })
        .expect("listening line");
    let client = probe::bind_loopback().expect("client");
    let relay = probe::introduce(
        &client,
        listen.parse().expect("address"),
        &server,
        Duration::from_secs(5),
    )
    .expect("introduce");
    let base = Instant::now();
    let rx = client.try_clone().expect("clone");
    let rec = thread::spawn(move || {
        probe::record(
            &rx,
            base,
            Duration::from_millis(500),
            Duration::from_secs(10),
        )
    });
    let pace = probe::Pace {
        rate_bps: 1e6,
        size: 500,
        duration: Duration::from_millis(500),
    };
    let sent = probe::send_paced(&server, relay, base, pace).expect("send");
    let got = rec.join().expect("recorder");
    assert_eq!(got.len() as u64, sent);
    // SAFETY: plain kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let out = child.wait_with_output().expect("wait");
    let stdout = text(&out.stdout);
    eprintln!("{stdout}");
    assert_eq!(stderr.map_while(Result::ok).count(), 0, "no warnings");
    assert!(out.status.success());
    assert!(stdout.contains(&format!(
        "downstream packets_in={sent} bytes_in={}",
        sent * 500
    )));
    assert!(stdout.contains("upstream packets_in=1 "));
    let csv = fs::read_to_string(&log).expect("log");
    let mut rows = csv.lines();
    assert!(
        rows.next()
            .is_some_and(|h| h.starts_with("time_s,direction,bytes_in"))
    );
    // The counter columns add up to the exit totals.
    let packets_out: u64 = rows
        .filter(|r| r.contains(",downstream,"))
        .map(|r| {
            r.split(',')
                .nth(5)
                .and_then(|v| v.parse::<u64>().ok())
                .expect("packets_out")
        })
        .sum();
    assert_eq!(packets_out, sent);
    let _ = fs::remove_file(&profile);
    let _ = fs::remove_file(&log);
}
