//! moq-gst, moq-dev's GStreamer plugin, as a compared system: it publishes to and plays from
//! moq-relay. Its elements are also called `moqsink` / `moqsrc`, so its sender and receiver
//! run in processes whose plugin path holds only its plugin.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The broadcast name the moq-gst sender publishes under the relay's anonymous root.
pub const BROADCAST: &str = "bench";

/// Where moq-gst's plugin and the relay it goes through are.
#[derive(Debug, Clone)]
pub struct MoqGst {
    /// A directory holding `libgstmoq.so` and no other `moqsink`/`moqsrc`.
    pub plugin_dir: PathBuf,
    pub relay: PathBuf,
}

impl MoqGst {
    /// Checks the plugin directory and finds moq-relay ([`find_relay`]).
    pub fn locate(plugin_dir: &Path, workspace: &Path) -> Result<MoqGst, String> {
        if !plugin_dir.join("libgstmoq.so").is_file() {
            return Err(format!(
                "{}: no libgstmoq.so (pipelines/install-moq-gst.sh builds it)",
                plugin_dir.display()
            ));
        }
        Ok(MoqGst {
            plugin_dir: plugin_dir.to_path_buf(),
            relay: find_relay(workspace)?,
        })
    }

    /// Points a child's GStreamer at moq-gst's plugin only (own registry file under `out`).
    pub fn environment<'c>(&self, command: &'c mut Command, out: &Path) -> &'c mut Command {
        command
            .env("GST_PLUGIN_PATH", &self.plugin_dir)
            .env("GST_REGISTRY", out.join("moq-gst-registry.bin"))
    }

    /// Starts moq-relay on `at` with the given certificate; returns once its port is bound.
    pub fn start_relay(&self, at: SocketAddr, cert: &str, key: &str) -> Result<Relay, String> {
        start_relay(&self.relay, at, cert, key)
    }
}

/// The moq-relay binary: `MOQ_RELAY`, else what `pipelines/install-moq-relay.sh` installs
/// (and prints).
pub fn find_relay(workspace: &Path) -> Result<PathBuf, String> {
    let relay = match std::env::var_os("MOQ_RELAY") {
        Some(path) => PathBuf::from(path),
        None => {
            let script = workspace.join("pipelines/install-moq-relay.sh");
            let output = Command::new("bash")
                .arg(&script)
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| {
                    format!(
                        "moq-relay not found: MOQ_RELAY is not set and {} does not run: {e}",
                        script.display()
                    )
                })?;
            if !output.status.success() {
                return Err(format!(
                    "moq-relay not found: MOQ_RELAY is not set and {} failed ({})",
                    script.display(),
                    output.status
                ));
            }
            PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
        }
    };
    if !relay.is_file() {
        return Err(format!(
            "moq-relay: {} is not a file (set MOQ_RELAY to the binary, or run pipelines/install-moq-relay.sh)",
            relay.display()
        ));
    }
    Ok(relay)
}

/// Starts moq-relay (`binary`) on `at` with the given certificate, open to anyone under
/// `/anon`; returns once its port is bound.
pub fn start_relay(binary: &Path, at: SocketAddr, cert: &str, key: &str) -> Result<Relay, String> {
    start_relay_with(binary, at, cert, key, &[])
}

/// [`start_relay`] with `more` arguments (joining a cluster, say).
pub fn start_relay_with(
    binary: &Path,
    at: SocketAddr,
    cert: &str,
    key: &str,
    more: &[String],
) -> Result<Relay, String> {
    let child = Command::new(binary)
        .arg("--listen")
        .arg(at.to_string())
        .args(["--listen-tls-cert", cert, "--listen-tls-key", key])
        .args(["--auth-public", "anon/**", "--iroh-enabled=false"])
        .args(["--log-level", "error"])
        .args(more)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let mut relay = Relay(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while UdpSocket::bind(at).is_ok() {
        if let Ok(Some(status)) = relay.0.try_wait() {
            return Err(format!("moq-relay exited at start ({status})"));
        }
        if Instant::now() > deadline {
            return Err(format!("moq-relay did not bind {at}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(relay)
}

/// A running moq-relay, stopped when dropped.
pub struct Relay(Child);

impl Relay {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
