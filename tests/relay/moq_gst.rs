//! Interop with moq-dev's GStreamer plugin (moq-gst) through the relay, both directions.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::*;
use crate::{NAMESPACE, ROOT, Relay};

/// moq-gst's plugin directory: `MOQ_GST_DIR`, else what `pipelines/install-moq-gst.sh`
/// builds (about 10 minutes, once) and prints.
fn moq_gst_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MOQ_GST_DIR") {
        return PathBuf::from(dir);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/install-moq-gst.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("install-moq-gst.sh runs");
    assert!(output.status.success(), "{} failed", script.display());
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// `gst-launch-1.0 -v <pipeline>` with moq-gst's plugin and not ours on the plugin path:
/// its elements are also called `moqsink` / `moqsrc`.
fn moq_gst_launch(dir: &Path, pipeline: &str) -> Command {
    let mut command = Command::new("gst-launch-1.0");
    command
        .arg("-v")
        .args(pipeline.split_whitespace())
        .env("GST_PLUGIN_PATH", dir)
        // One registry for every run (GStreamer replaces it whole when it rewrites it).
        .env(
            "GST_REGISTRY",
            std::env::temp_dir().join("moq-gst-registry.bin"),
        );
    command
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One frame at 24 fps, µs.
const FRAME_US: f64 = 1e6 / 24.0;

/// How many of the frames in the span of `pts` (µs, any order, 24 fps) are there.
fn coverage(pts: &[u64]) -> (usize, usize) {
    let distinct = distinct_sorted(pts);
    let (Some(first), Some(last)) = (distinct.first(), distinct.last()) else {
        return (0, 0);
    };
    let expected = ((last - first) as f64 / FRAME_US).round() as usize + 1;
    (distinct.len(), expected)
}

/// Where frames are missing in the span of `pts`: (frames after the first, frames missing).
fn gaps(pts: &[u64]) -> Vec<(usize, usize)> {
    let distinct = distinct_sorted(pts);
    let frame = |t: u64| ((t - distinct[0]) as f64 / FRAME_US).round() as usize;
    distinct
        .windows(2)
        .map(|w| (frame(w[0]), frame(w[1])))
        .filter(|(a, b)| b - a > 1)
        .map(|(a, b)| (a + 1, b - a - 1))
        .collect()
}

fn distinct_sorted(pts: &[u64]) -> Vec<u64> {
    let mut distinct = pts.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    distinct
}

/// `h:mm:ss.nnnnnnnnn` as µs.
fn parse_clock_time(text: &str) -> Option<u64> {
    let mut parts = text.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    let seconds: f64 = s.parse().ok()?;
    Some(
        (h.parse::<u64>().ok()? * 3600 + m.parse::<u64>().ok()? * 60) * 1_000_000
            + (seconds * 1e6).round() as u64,
    )
}

/// Our moqsink in moq-dev's format → moq-relay → moq-gst's moqsrc, decoded.
#[test]
fn moq_gst_plays_what_our_moqsink_publishes_in_the_hang_format() {
    let dir = moq_gst_dir();
    let relay = Relay::start();
    let _sender = relay.publisher("format=hang");
    let text = run_for(
        &mut moq_gst_launch(
            &dir,
            &format!(
                "moqsrc url=https://127.0.0.1:{}/{ROOT} broadcast={NAMESPACE} tls-disable-verify=true \
                 ! h264parse ! avdec_h264 ! fakesink name=out silent=false",
                relay.port
            ),
        ),
        Duration::from_secs(8),
    );
    let pts: Vec<u64> = text
        .lines()
        .filter(|l| l.contains("(out:sink)") && l.contains("chain"))
        .filter_map(|l| l.split("pts: ").nth(1)?.split(',').next())
        .filter_map(parse_clock_time)
        .collect();
    let (decoded, expected) = coverage(&pts);
    eprintln!("moq-gst's moqsrc decoded {decoded} of the {expected} frames in its span");
    let problems: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARNING"))
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(expected >= 96, "{expected} frames in 8 s:\n{text}");
    // Where they are missing tells a skip at the start (the rest of the group joined in)
    // from losses in play.
    assert!(
        decoded * 100 >= expected * 95,
        "{decoded} of {expected}; missing (from frame, count): {:?}",
        gaps(&pts)
    );
}

/// moq-gst's moqsink → moq-relay → our moqsrc, decoded.
#[test]
fn our_moqsrc_plays_what_moq_gst_publishes() {
    let dir = moq_gst_dir();
    let relay = Relay::start();
    let publisher = moq_gst_launch(
        &dir,
        &format!(
            "{TEST_VIDEO} ! x264enc bframes=3 key-int-max=15 speed-preset=veryfast ! h264parse \
             ! moqsink url=https://127.0.0.1:{}/{ROOT} broadcast={NAMESPACE} tls-disable-verify=true",
            relay.port
        ),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .map(Running)
    .expect("moq-gst's publisher starts");
    let receiver = relay.subscriber("");
    receiver
        .wait_frames(120, WAIT)
        .expect("plays moq-gst's broadcast");
    drop(publisher);
    let frames = receiver.frames();
    assert!(frames[0].key && frames[0].discont, "starts at a keyframe");
    let pts: Vec<u64> = frames.iter().map(|f| f.pts.useconds()).collect();
    let (received, expected) = coverage(&pts);
    let decoded = receiver.decoded();
    eprintln!("our moqsrc: {received} of the {expected} frames in its span, {decoded} decoded");
    assert!(received * 100 >= expected * 95, "{received} of {expected}");
    assert!(
        decoded + 4 >= frames.len(),
        "{decoded} of {} decoded",
        frames.len()
    );
    assert!(
        frames.windows(2).all(|w| w[1].dts >= w[0].dts),
        "DTS never decreases"
    );
}
