//! The test kit of moqsink and moqsrc: the pieces that the integration tests in `tests/`,
//! the soak checks (`tools/soak`) and the benchmark (`tools/bench`) share, so that no tool
//! depends on another and no test imports a tool.
//!
//! - [`peer`]: a MoQ Transport peer that writes control messages itself, so it can behave
//!   as a hostile or broken client would (never read, send garbage, flood requests).
//! - [`roles`]: a sender and a receiver that run as child processes, so that each one's
//!   RSS is its own, and a runner's handles on them.
//! - [`proc`]: child processes that report line by line, and RSS sampling of any process.
//! - [`media`]: GStreamer set-up, the reference stream, and an in-process moqsrc
//!   subscriber that records the decode index of every frame.
//! - [`relay`]: moq-relay nodes as child processes, restarted as a deploy does.

pub mod media;
pub mod peer;
pub mod proc;
pub mod relay;
pub mod roles;

/// A loopback address whose UDP port was free a moment ago: for a child (a relay node,
/// a sender) that must be told where to listen before it starts.
pub fn free_local_addr() -> Result<std::net::SocketAddr, String> {
    std::net::UdpSocket::bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .and_then(|s| s.local_addr())
        .map_err(|e| format!("no free UDP port: {e}"))
}
