//! Through a real moq-relay (0.17.x): moqsink publishes to it, moqsrc plays from it, in
//! every delivery mode; late joiners, relay restarts, and keyframes on demand. Interop with
//! moq-dev's GStreamer plugin (moq-gst 0.4.20) in both directions, in the hang format: its
//! directory comes from `MOQ_GST_DIR`, else `pipelines/install-moq-gst.sh` builds it.
//!
//! The relay binary comes from `MOQ_RELAY`, `PATH` or `~/.cache/moqsink-tools/bin`
//! (`pipelines/install-moq-relay.sh` installs it there). Without it the tests fail.
//!
//! The suite runs on one MoQ Transport draft: `MOQ_DRAFT` (14, 16, 20 or 22) is given to
//! every element of ours as its `versions`; unset, the elements' default.
//! `pipelines/interop.sh` runs it once per draft.
//!
//! One module per topic; this file holds the relay they run against and the helpers they
//! share.

#[path = "../common/mod.rs"]
mod common;

mod audio_video;
mod auth;
mod certificates;
mod cluster;
mod delivery;
mod goaway;
mod keyframes;
mod migration;
mod moq_gst;
mod outages;
mod publish_play;
mod renditions;
mod rolling;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

/// The relay's root for anonymous sessions, and the broadcast under it.
const ROOT: &str = "anon";
const NAMESPACE: &str = "live";

/// `properties` of one of our elements, with the draft the suite runs on.
fn ours(properties: impl AsRef<str>) -> String {
    match std::env::var("MOQ_DRAFT") {
        Ok(draft) => format!("{} versions={draft}", properties.as_ref()),
        Err(_) => properties.as_ref().to_owned(),
    }
}

/// How many element messages named `name` `pipeline` has posted so far.
fn count_messages(pipeline: &gst::Pipeline, name: &'static str) -> Arc<Mutex<usize>> {
    let counted = Arc::new(Mutex::new(0));
    let count = counted.clone();
    pipeline.bus().unwrap().set_sync_handler(move |_, msg| {
        if let gst::MessageView::Element(e) = msg.view()
            && e.structure().is_some_and(|s| s.name() == name)
        {
            *count.lock().unwrap() += 1;
        }
        gst::BusSyncReply::Pass
    });
    counted
}

/// The moq-relay processes running on this machine, each as its pid and the addresses
/// it was given (`--listen`, `--cluster-connect`): says, when a wait times out, which
/// nodes were up.
fn relays_running() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if !args.first()?.ends_with("moq-relay") {
                return None;
            }
            let given = |flag: &str| {
                let at = args.iter().position(|a| a == flag)?;
                args.get(at + 1).map(|v| format!("{flag} {v}"))
            };
            let addresses: Vec<String> = ["--listen", "--cluster-connect"]
                .into_iter()
                .filter_map(given)
                .collect();
            Some(format!(
                "{}: {}",
                entry.file_name().to_string_lossy(),
                addresses.join(" ")
            ))
        })
        .collect()
}

/// A moq-relay on 127.0.0.1 with its own self-signed certificate.
struct Relay {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    fingerprint: String,
    /// How it authorizes sessions (`--auth-…`), and any other arguments.
    args: Vec<String>,
    /// The relay's port while it is down (see [`hold_udp_port`]).
    held_port: Option<std::net::UdpSocket>,
}

impl Relay {
    /// A relay that lets anyone publish and play under `/anon`.
    fn start() -> Relay {
        Relay::start_with_args(&["--auth-public", "anon/**"])
    }

    /// A node of `root`'s cluster, also open to anyone under `/anon`.
    fn start_in_cluster(root: &Relay) -> Relay {
        Relay::start_in_cluster_with(root, &[])
    }

    /// [`start_in_cluster`](Self::start_in_cluster) with `more` arguments.
    fn start_in_cluster_with(root: &Relay, more: &[&str]) -> Relay {
        let root_url = format!("moqt://127.0.0.1:{}/", root.port);
        let mut args = vec![
            "--auth-public",
            "anon/**",
            "--cluster-connect",
            &root_url,
            "--connect-tls-fingerprint",
            &root.fingerprint,
        ];
        args.extend_from_slice(more);
        Relay::start_with_args(&args)
    }

    fn start_with_args(args: &[&str]) -> Relay {
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
                .unwrap();
        let dir = scratch_dir("moq-relay-test");
        std::fs::write(dir.join("cert.pem"), certified.cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), certified.key_pair.serialize_pem()).unwrap();
        let fingerprint =
            moq_session::tls::fingerprint_hex(&moq_session::tls::fingerprint(certified.cert.der()));
        let mut relay = Relay {
            child: None,
            // The system picks it at the first start; a restart takes the same one.
            port: 0,
            dir,
            fingerprint,
            args: args.iter().map(|a| a.to_string()).collect(),
            held_port: None,
        };
        relay.spawn();
        relay
    }

    fn spawn(&mut self) {
        let mut args: Vec<std::ffi::OsString> = vec![
            "--listen".into(),
            format!("127.0.0.1:{}", self.port).into(),
            "--listen-tls-cert".into(),
            self.dir.join("cert.pem").into(),
            "--listen-tls-key".into(),
            self.dir.join("key.pem").into(),
        ];
        args.extend(self.args.iter().map(Into::into));
        self.held_port = None;
        let (child, ports) =
            start_relay(&args, &["quic"]).expect("moq-relay says where it listens");
        self.child = Some(child);
        let port = ports[0];
        assert!(
            self.port == 0 || self.port == port,
            "moq-relay restarted on {port}, not {}",
            self.port
        );
        self.port = port;
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            self.hold_port();
        }
    }

    /// Keeps the port of a relay that is down bound, silent (see `held_port`).
    fn hold_port(&mut self) {
        self.held_port = hold_udp_port(self.port);
    }

    /// Stops the relay as a planned restart does: SIGTERM, which makes moq-relay send
    /// GOAWAY to every session and wait for them to leave (`--drain-timeout`). Returns
    /// without waiting for it to exit.
    fn terminate(&mut self) {
        if let Some(child) = &self.child {
            let status = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success(), "SIGTERM sent to moq-relay");
        }
    }

    /// Whether the relay exited within `within` (after [`terminate`](Self::terminate)).
    fn exited(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while let Some(child) = &mut self.child {
            if child.try_wait().ok().flatten().is_some() {
                self.child = None;
                self.hold_port();
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/{ROOT}", self.port)
    }

    fn publisher(&self, properties: &str) -> Sender {
        Sender::through_relay(&ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={} {properties}",
            self.url(),
            self.fingerprint
        )))
    }

    fn subscriber(&self, properties: &str) -> Receiver {
        Receiver::start(&ours(format!(
            "url={} namespace={NAMESPACE} tls-fingerprint={} {properties}",
            self.url(),
            self.fingerprint
        )))
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Frames from the first output on are a decodable sequence: starts at a keyframe,
/// strictly increasing decode indices, every output decoded without a decoder warning.
fn assert_decodable(receiver: &Receiver, what: &str) {
    let frames = receiver.frames();
    assert!(
        frames[0].key && frames[0].discont,
        "{what}: starts at a keyframe"
    );
    for pair in frames.windows(2) {
        assert!(
            pair[1].decode_index > pair[0].decode_index,
            "{what}: decode order"
        );
        assert!(pair[1].dts >= pair[0].dts, "{what}: DTS never decreases");
    }
    assert!(
        frames.iter().all(|f| f.availability.is_some()),
        "{what}: availability meta"
    );
    let warnings = receiver.messages_where(|m| m.starts_with("warning"));
    assert!(warnings.is_empty(), "{what}: {warnings:?}");
    // The decoder may still hold a few frames.
    let decoded = receiver.decoded();
    assert!(
        decoded + 4 >= frames.len() && decoded <= frames.len(),
        "{what}: {} output, {decoded} decoded",
        frames.len()
    );
}
