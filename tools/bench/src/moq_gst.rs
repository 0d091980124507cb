//! moq-gst, moq-dev's GStreamer plugin, as a compared system: it publishes to and plays from
//! moq-relay. Its elements are also called `moqsink` / `moqsrc`, so its sender and receiver
//! run in processes whose plugin path holds only its plugin.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use moq_testkit::relay::Relay;

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
    /// Checks the plugin directory and finds moq-relay ([`moq_testkit::relay::find`]).
    pub fn locate(plugin_dir: &Path, workspace: &Path) -> Result<MoqGst, String> {
        if !plugin_dir.join("libgstmoq.so").is_file() {
            return Err(format!(
                "{}: no libgstmoq.so (pipelines/install-moq-gst.sh builds it)",
                plugin_dir.display()
            ));
        }
        Ok(MoqGst {
            plugin_dir: plugin_dir.to_path_buf(),
            relay: moq_testkit::relay::find(workspace)?,
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
        Relay::start(&self.relay, at, cert, key, &[])
    }
}
