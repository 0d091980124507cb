//! Trace-driven userspace UDP bottleneck link emulator.
//!
//! The kernels the project runs on have no `netem`, so results that need a congested link use
//! this relay instead: clients send to [`Link::local_addr`], the link forwards to a server, and
//! each direction can be shaped by a [`Profile`] (rate trace, drop-tail queue, loss, delay,
//! jitter). The same model runs in-process for tests ([`Link::start`]) and from the shell (the
//! `linkem` binary). See the crate README for the profile format and the CSV log.
//!
//! ```no_run
//! use linkem::{Link, LinkConfig, Profile};
//! let link = Link::start(LinkConfig {
//!     listen: "127.0.0.1:0".parse().unwrap(),
//!     forward: "127.0.0.1:4443".parse().unwrap(),
//!     downstream: Some(Profile::constant(500, 187_500)),
//!     upstream: None,
//!     seed: 1,
//!     log: None,
//! })?;
//! println!("send to {}", link.local_addr());
//! let totals = link.stop();
//! println!("{} bytes delivered downstream", totals.downstream.bytes_out);
//! # Ok::<(), std::io::Error>(())
//! ```

mod csvlog;
mod link;
pub mod probe;
mod profile;
mod rng;
mod shaper;
mod sock;

pub use link::{DirectionTotals, Link, LinkConfig, Totals};
pub use profile::{Error, Gilbert, Profile, Step};
