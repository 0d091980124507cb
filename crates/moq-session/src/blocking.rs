//! Bridging synchronous callers (GStreamer threads) and the async session code.
//!
//! GStreamer calls element methods on its own threads and expects `unlock()` to make a
//! blocked streaming thread return promptly; [`Canceller::block_on`] lets a synchronous
//! caller wait on a future in the shared [`runtime`] and be woken by [`Canceller::cancel`].

use std::sync::LazyLock;

use tokio::runtime::{Handle, Runtime};
use tokio::sync::watch;

/// How many threads run the network tasks of every moqsink and moqsrc in a process.
pub const RUNTIME_WORKERS: usize = 2;

/// What the runtime's threads are called (`top -H`, `/proc/<pid>/task/*/comm`).
pub const RUNTIME_THREAD_NAME: &str = "moq-net";

/// The process's one runtime for network tasks, shared by every element instance of both
/// elements: a pipeline with a moqsink and a moqsrc runs two threads, not two runtimes.
/// Started on first use; fails only when the process cannot create threads at all, where
/// no element could work anyway.
#[allow(clippy::expect_used)]
pub fn runtime() -> &'static Runtime {
    static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_WORKERS)
            .thread_name(RUNTIME_THREAD_NAME)
            .enable_all()
            .build()
            .expect("cannot start the network runtime")
    });
    &RUNTIME
}

/// The wait was interrupted by [`Canceller::cancel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

#[derive(Debug)]
pub struct Canceller {
    cancelled: watch::Sender<bool>,
}

impl Default for Canceller {
    fn default() -> Self {
        Canceller {
            cancelled: watch::channel(false).0,
        }
    }
}

impl Canceller {
    /// Interrupts the current wait and every later one until [`reset`](Self::reset).
    pub fn cancel(&self) {
        self.cancelled.send_replace(true);
    }

    pub fn reset(&self) {
        self.cancelled.send_replace(false);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    /// Runs `fut` to completion on `runtime` unless cancelled first.
    pub fn block_on<F: Future>(&self, runtime: &Handle, fut: F) -> Result<F::Output, Cancelled> {
        let mut cancelled = self.cancelled.subscribe();
        runtime.block_on(async {
            tokio::select! {
                biased;
                _ = cancelled.wait_for(|c| *c) => Err(Cancelled),
                out = fut => Ok(out),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn cancel_interrupts_a_blocked_wait_until_reset() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let canceller = Arc::new(Canceller::default());
        assert_eq!(canceller.block_on(rt.handle(), async { 7 }), Ok(7));
        let c = canceller.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c.cancel();
        });
        let never = std::future::pending::<()>();
        assert_eq!(canceller.block_on(rt.handle(), never), Err(Cancelled));
        t.join().unwrap();
        assert!(canceller.is_cancelled());
        assert_eq!(canceller.block_on(rt.handle(), async { 1 }), Err(Cancelled));
        canceller.reset();
        assert_eq!(canceller.block_on(rt.handle(), async { 1 }), Ok(1));
    }
}
