//! Short versions of the resource-exhaustion soak checks (`pipelines/soak.sh` runs the
//! full ones): a subscriber that never reads, a receiver paused for a while, subscriber
//! churn, each measured in a process of its own with generous bounds, and all of it at once
//! through a moq-relay cluster restarted node by node (moq-relay from `MOQ_RELAY`, else
//! `pipelines/install-moq-relay.sh`).
//!
//! The sender and the paused receiver run as children of the `moq-soak` binary, which must
//! be built beside this test (`cargo build --workspace --all-targets`, as pipelines/test.sh
//! does, or `cargo build -p moq-soak`). `MOQ_SOAK_BIN` names another one.

use std::path::PathBuf;

use moq_soak::mixed::{self, MixedOptions};
use moq_soak::scenario::{self, ChurnOptions, PausedOptions, StalledOptions};

/// The `moq-soak` binary of this build: `target/<profile>/moq-soak`, beside the `deps`
/// directory holding this test.
fn soak_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MOQ_SOAK_BIN") {
        return PathBuf::from(path);
    }
    let test = std::env::current_exe().expect("the test knows its own path");
    let profile_dir = test
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let binary = profile_dir.join("moq-soak");
    assert!(
        binary.is_file(),
        "{} is missing: build it first with `cargo build -p moq-soak` (pipelines/test.sh \
         builds the whole workspace before testing), or set MOQ_SOAK_BIN",
        binary.display()
    );
    binary
}

#[test]
fn stalled_subscriber_leaves_sender_memory_bounded_and_healthy_subscriber_fed() {
    let opts = StalledOptions {
        delivery: "baseline".into(),
        seconds: 110,
        warmup: 20,
        max_rss_growth_mb: 40.0,
        min_healthy_pct: 95.0,
        ..StalledOptions::new(soak_binary())
    };
    let report = scenario::stalled_subscriber(&opts).expect("the scenario runs");
    assert_eq!(
        (report.stalls, report.disconnects),
        (1, 0),
        "the peer stalled once and stayed connected (subscriber-stall-timeout=3600000)"
    );
    assert!(
        report.groups_over_budget > 0,
        "the stalled peer's backlog went over its budget: {}",
        report.summary()
    );
    assert!(
        report.rss_growth_mb < 40.0,
        "sender RSS grew {:.1} MB after the warm-up: {}",
        report.rss_growth_mb,
        report.summary()
    );
    assert!(
        report.healthy.kept_pct() >= 95.0,
        "the healthy subscriber kept {:.2}% of the frames: {}",
        report.healthy.kept_pct(),
        report.summary()
    );
    assert!(report.passed(), "{}", report.summary());
}

#[test]
fn paused_receiver_keeps_memory_bounded_and_resumes_at_the_live_edge() {
    let opts = PausedOptions {
        play_seconds: 10,
        pause_seconds: 60,
        after_seconds: 15,
        max_rss_growth_mb: 20.0,
        ..PausedOptions::new(soak_binary())
    };
    let report = scenario::paused_receiver(&opts).expect("the scenario runs");
    assert!(
        report.rss_growth_mb < 20.0,
        "receiver RSS grew {:.1} MB over the pause: {}",
        report.rss_growth_mb,
        report.summary()
    );
    let first = report.first_after.expect("a frame after PLAY");
    assert!(
        first.discont && first.key,
        "the first buffer after PLAY is a DISCONT keyframe: {}",
        report.summary()
    );
    let latency_ms = first.latency_us.expect("availability meta") as f64 / 1000.0;
    assert!(
        latency_ms < 1500.0,
        "the first frame after PLAY is {latency_ms:.0} ms old, not the live edge: {}",
        report.summary()
    );
    assert!(report.frames_after > 0, "frames flow after the resume");
    assert!(report.passed(), "{}", report.summary());
}

#[test]
fn subscriber_churn_leaves_sender_memory_bounded_and_continuous_subscriber_whole() {
    let opts = ChurnOptions {
        cycles: 500,
        warmup_cycles: 150,
        max_seconds: 300,
        max_rss_growth_mb: 15.0,
        ..ChurnOptions::new(soak_binary())
    };
    let report = scenario::churn(&opts).expect("the scenario runs");
    assert_eq!(report.failed, 0, "every cycle worked: {}", report.summary());
    assert!(
        report.rss_growth_mb < 15.0,
        "sender RSS grew {:.1} MB over {} cycles: {}",
        report.rss_growth_mb,
        report.cycles,
        report.summary()
    );
    assert!(
        report.continuous_first_key
            && report.continuous.missing() == 0
            && report.continuous.gaps == 0
            && report.continuous.disordered == 0,
        "the continuous subscriber lost no frame: {}",
        report.summary()
    );
    assert!(report.passed(), "{}", report.summary());
}

#[test]
fn a_viewer_plays_every_frame_through_relay_restarts_churn_stalls_and_congestion_at_once() {
    let opts = MixedOptions {
        // The last restart at 90 s, its move settled before the end.
        seconds: 110,
        restart_every: 30,
        warmup: 30,
        max_rss_growth_mb: 40.0,
        min_viewer_pct: 99.0,
        ..MixedOptions::new(soak_binary())
    };
    let report = mixed::mixed(&opts).expect("the scenario runs");
    assert_eq!(
        (report.restarts, report.restarts_killed),
        (3, 0),
        "three nodes restarted, each exiting once its sessions had left: {}",
        report.summary()
    );
    assert!(
        report.viewer.disordered == 0 && report.viewer.kept_pct() >= 99.0,
        "the viewer kept its frames through the restarts: {}",
        report.summary()
    );
    assert!(
        report.churn_cycles > 20 && report.stalled_sessions > 0 && report.congested_frames > 0,
        "churn, a stalled subscriber and a congested viewer ran beside it: {}",
        report.summary()
    );
    assert!(report.passed(), "{}", report.summary());
}
