//! Resource checks of moqsink and moqsrc under misbehaving peers, and the tools for them.
//!
//! - [`peer`]: a MoQ Transport peer that writes control messages itself, so it can behave
//!   as a hostile or broken client would (never read, send garbage, flood requests).
//! - [`scenario`]: the soak scenarios (a subscriber that never reads, a paused receiver,
//!   subscriber churn), each measuring the RSS of the process under test over time.
//! - [`roles`]: the sender and receiver that run as child processes of the `moq-soak`
//!   binary, so that each one's RSS is its own, and the runner's handles on them.
//! - [`proc`], [`media`], [`clients`]: child processes and RSS sampling, GStreamer
//!   pipelines, and the network clients the runner drives itself.

pub mod clients;
pub mod media;
pub mod peer;
pub mod proc;
pub mod roles;
pub mod scenario;
