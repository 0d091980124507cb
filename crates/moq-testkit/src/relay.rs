//! moq-relay as a child process: found once, started on an address with a certificate of
//! its own, stopped as a deploy stops it (SIGTERM: GOAWAY, then its drain) and started
//! again on the same address.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for a node to bind its port.
const BIND_TIMEOUT: Duration = Duration::from_secs(10);

/// The moq-relay binary: `MOQ_RELAY`, else what `pipelines/install-moq-relay.sh` (in
/// `workspace`) installs and prints.
pub fn find(workspace: &Path) -> Result<PathBuf, String> {
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

/// A self-signed certificate for 127.0.0.1 written to `dir`: (cert path, key path,
/// fingerprint in hex).
pub fn certificate(dir: &Path) -> Result<(String, String, String), String> {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(|e| e.to_string())?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).map_err(|e| e.to_string())?;
    std::fs::write(&key, certified.key_pair.serialize_pem()).map_err(|e| e.to_string())?;
    let fp =
        moq_session::tls::fingerprint_hex(&moq_session::tls::fingerprint(certified.cert.der()));
    Ok((cert.display().to_string(), key.display().to_string(), fp))
}

/// A moq-relay node open to anyone under `/anon`, killed when dropped.
pub struct Relay {
    child: Option<Child>,
    /// Everything it was started with, to start it again the same way.
    command: Vec<String>,
    binary: PathBuf,
    at: SocketAddr,
}

impl Relay {
    /// Starts `binary` on `at` with the given certificate and `more` arguments (joining a
    /// cluster, a drain timeout); returns once its port is bound.
    pub fn start(
        binary: &Path,
        at: SocketAddr,
        cert: &str,
        key: &str,
        more: &[String],
    ) -> Result<Relay, String> {
        let mut command: Vec<String> = vec![
            "--listen".into(),
            at.to_string(),
            "--listen-tls-cert".into(),
            cert.into(),
            "--listen-tls-key".into(),
            key.into(),
        ];
        command.extend(
            ["--auth-public", "anon/**", "--iroh-enabled=false"]
                .into_iter()
                .map(String::from),
        );
        command.extend(["--log-level", "error"].into_iter().map(String::from));
        command.extend(more.iter().cloned());
        let mut relay = Relay {
            child: None,
            command,
            binary: binary.to_path_buf(),
            at,
        };
        relay.spawn()?;
        Ok(relay)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new(&self.binary)
            .args(&self.command)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        let deadline = Instant::now() + BIND_TIMEOUT;
        while UdpSocket::bind(self.at).is_ok() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("moq-relay exited at start ({status})"));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("moq-relay did not bind {}", self.at));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
        Ok(())
    }

    pub fn addr(&self) -> SocketAddr {
        self.at
    }

    /// The running process's id, 0 while it is down.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Stops it as a planned restart does: SIGTERM, on which moq-relay sends GOAWAY to
    /// every session and waits up to its `--drain-timeout` for them to leave. Then waits
    /// up to `within` for it to exit (killing it after that); returns how long it took,
    /// or `None` when it had to be killed.
    pub fn stop_gracefully(&mut self, within: Duration) -> Result<Option<Duration>, String> {
        let Some(child) = &mut self.child else {
            return Ok(Some(Duration::ZERO));
        };
        let began = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .map_err(|e| format!("kill: {e}"))?;
        if !status.success() {
            return Err(format!("SIGTERM to moq-relay: {status}"));
        }
        let took = loop {
            if child.try_wait().ok().flatten().is_some() {
                break Some(began.elapsed());
            }
            if began.elapsed() >= within {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.child = None;
        Ok(took)
    }

    /// Starts it again on its address, as it was started first.
    pub fn restart(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Err("moq-relay is still running".into());
        }
        self.spawn()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
