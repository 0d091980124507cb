//! Child processes and their resident memory.
//!
//! In the kit for any runner (a soak scenario, a benchmark, a test) that measures what a
//! role costs: every role whose memory is measured runs in a process of its own, so its
//! RSS is its own, and an [`RssSampler`] reads `VmRSS` from `/proc/<pid>/status` at a fixed
//! interval (of a [`Child`] or of any other process, such as a relay). A child reads
//! commands on stdin and exits when stdin closes, so it never outlives the runner, even
//! one that is killed; [`Child`] also kills it when dropped (panics included).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Lines of a child's stderr kept for error messages.
const STDERR_TAIL: usize = 20;
/// How long a child may take to exit after its stdin closed before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// One line a child printed, and when the runner read it.
#[derive(Debug, Clone)]
pub struct Line {
    pub at: Instant,
    pub text: String,
}

/// A child process that prints its reports on stdout one line at a time and stops when its
/// stdin closes: one of the [`crate::roles`], or any program that keeps to that.
pub struct Child {
    name: String,
    child: std::process::Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Child {
    /// Starts `exe args...` with piped stdin, stdout and stderr.
    pub fn spawn(name: &str, exe: &Path, args: &[String]) -> Result<Child, String> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {name} ({}): {e}", exe.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{name}-stdout"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(text) = line else { break };
                    let line = Line {
                        at: Instant::now(),
                        text,
                    };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr.clone();
        std::thread::Builder::new()
            .name(format!("{name}-stderr"))
            .spawn(move || {
                for line in BufReader::new(stderr_pipe).lines() {
                    let Ok(text) = line else { break };
                    let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(text);
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Child {
            name: name.into(),
            child,
            stdin,
            lines,
            stderr,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one command line to the child's stdin.
    pub fn command(&mut self, text: &str) -> Result<(), String> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin already closed", self.name))?;
        writeln!(stdin, "{text}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{}: cannot write {text:?}: {e}", self.name))
    }

    /// The next line, waiting at most `timeout`; `Ok(None)` when none came in time, an
    /// error naming the child's last stderr lines when it has exited.
    pub fn next_line(&mut self, timeout: Duration) -> Result<Option<Line>, String> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(self.exited()),
        }
    }

    /// Every line printed so far and not yet read.
    pub fn pending_lines(&mut self) -> Result<Vec<Line>, String> {
        let mut lines = Vec::new();
        loop {
            match self.lines.try_recv() {
                Ok(line) => lines.push(line),
                Err(mpsc::TryRecvError::Empty) => return Ok(lines),
                Err(mpsc::TryRecvError::Disconnected) if !lines.is_empty() => return Ok(lines),
                Err(mpsc::TryRecvError::Disconnected) => return Err(self.exited()),
            }
        }
    }

    /// Describes how the child ended, with its last stderr lines.
    fn exited(&mut self) -> String {
        let deadline = Instant::now() + EXIT_GRACE;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status.to_string(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => break "stdout closed, still running".into(),
                Err(e) => break e.to_string(),
            }
        };
        let tail = self.stderr_tail();
        format!(
            "{} exited ({status}); last stderr lines:\n{tail}",
            self.name
        )
    }

    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Closing stdin asks the child to stop; kill it if it does not.
        self.stdin = None;
        let deadline = Instant::now() + EXIT_GRACE;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Resident set size of process `pid` in KiB (`VmRSS`), `None` once it is gone.
pub fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// One RSS sample.
#[derive(Debug, Clone, Copy)]
pub struct RssSample {
    pub at: Instant,
    pub kib: u64,
}

/// Samples a process's RSS at a fixed interval on a thread of its own.
pub struct RssSampler {
    samples: Arc<Mutex<Vec<RssSample>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pid: u32,
}

impl RssSampler {
    pub fn start(pid: u32, every: Duration) -> RssSampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (record, stopped) = (samples.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("rss-{pid}"))
            .spawn(move || {
                let mut next = Instant::now();
                while !stopped.load(Ordering::Relaxed) {
                    let Some(kib) = vm_rss_kib(pid) else { break };
                    let sample = RssSample {
                        at: Instant::now(),
                        kib,
                    };
                    record
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(sample);
                    next += every;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
            .expect("spawn the RSS sampler");
        RssSampler {
            samples,
            stop,
            thread: Some(thread),
            pid,
        }
    }

    /// Reads the RSS now (not waiting for the next sample) and records it.
    pub fn sample_now(&self) -> Option<u64> {
        let kib = vm_rss_kib(self.pid)?;
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(RssSample {
                at: Instant::now(),
                kib,
            });
        Some(kib)
    }

    pub fn samples(&self) -> Vec<RssSample> {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn latest(&self) -> Option<u64> {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .map(|s| s.kib)
    }

    /// Largest sample taken at or after `since`.
    pub fn max_since(&self, since: Instant) -> Option<u64> {
        self.samples()
            .iter()
            .filter(|s| s.at >= since)
            .map(|s| s.kib)
            .max()
    }

    /// Mean of the samples in `[from, to)`.
    pub fn mean_between(&self, from: Instant, to: Instant) -> Option<u64> {
        let window: Vec<u64> = self
            .samples()
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .map(|s| s.kib)
            .collect();
        (!window.is_empty()).then(|| window.iter().sum::<u64>() / window.len() as u64)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// KiB as MB (10^6 bytes), the unit of the acceptance bounds.
pub fn mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}

/// A signed KiB difference in MB.
pub fn mb_diff(to: u64, from: u64) -> f64 {
    (to as f64 - from as f64) * 1024.0 / 1e6
}
