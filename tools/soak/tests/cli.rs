//! The binary's command line (this test also makes `cargo test` build the binary, which
//! the soak tests of the workspace root start as their sender and receiver).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_moq-soak");

#[test]
fn help_names_every_scenario() {
    let out = Command::new(BIN)
        .arg("--help")
        .output()
        .expect("moq-soak runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for scenario in [
        "stalled-subscriber",
        "paused-receiver",
        "churn",
        "send",
        "receive",
    ] {
        assert!(text.contains(scenario), "--help mentions {scenario}");
    }
}

#[test]
fn unknown_scenario_is_an_error_not_a_violation() {
    let out = Command::new(BIN)
        .args(["run", "no-such-scenario"])
        .output()
        .expect("moq-soak runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario"));
}

#[test]
fn sender_stops_when_its_stdin_closes() {
    // stdin is /dev/null: the sender sees its end at once and exits cleanly.
    let out = Command::new(BIN)
        .args(["send", "--port", "0"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("moq-soak runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
