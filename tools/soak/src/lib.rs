//! Resource checks of moqsink and moqsrc under misbehaving peers.
//!
//! - [`scenario`]: the soak scenarios (a subscriber that never reads, a paused receiver,
//!   subscriber churn), each measuring the RSS of the process under test over time.
//! - [`mixed`]: everything at once through a moq-relay cluster restarted node by node.
//! - [`clients`]: the network clients the runner drives itself (the stalled subscriber,
//!   the churn cycles).
//!
//! The raw MoQ peer, the sender and receiver roles (run as `moq-soak send` and `moq-soak
//! receive`), child processes and RSS sampling, and the GStreamer side come from
//! `moq_testkit`.

pub mod clients;
pub mod mixed;
pub mod scenario;
