//! Media logic of the MoQ elements, free of sockets, clocks and GStreamer:
//!
//! - [`header`]: the per-frame header at the start of every media object payload;
//! - [`catalog`]: the JSON catalog track;
//! - [`hang`]: moq-dev's media format (catalog.json, timestamp-prefixed frames), read and written;
//! - [`audio`]: audio codec configurations and audio grouping;
//! - [`mapping`]: access unit → (track, group, object) and QUIC send priority per delivery mode;
//! - [`keyframes`]: when a new subscriber's keyframe request goes to the encoder;
//! - [`metrics`]: jitter, TS-DF and latency percentiles (docs/metrics.md);
//! - [`rate_control`]: the encoder's target bitrate from the subscribers' paths.
//!
//! The receiver's decisions are in the `moq-player` crate.

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod audio;
pub mod catalog;
pub mod clock;
pub mod hang;
pub mod header;
pub mod keyframes;
pub mod mapping;
pub mod metrics;
pub mod rate_control;

pub use catalog::{Catalog, TrackRole};
pub use header::FrameHeader;
pub use keyframes::KeyframeRequests;
pub use mapping::{DeliveryMode, Mapper, Placement};
