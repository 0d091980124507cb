//! Media logic of the MoQ elements, free of sockets, clocks and GStreamer:
//!
//! - [`header`]: the per-frame header at the start of every media object payload;
//! - [`catalog`]: the JSON catalog track;
//! - [`hang`]: moq-dev's media format (catalog.json, timestamp-prefixed frames), read and written;
//! - [`audio`]: audio codec configurations, audio grouping and the receiver's audio window;
//! - [`mapping`]: access unit → (track, group, object) and QUIC send priority per delivery mode;
//! - [`keyframes`]: when a new subscriber's keyframe request goes to the encoder;
//! - [`metrics`]: jitter, TS-DF and latency percentiles (DESIGN.md §7);
//! - [`rate_control`]: the encoder's target bitrate from the subscribers' paths;
//! - [`abr`]: which rendition of a video a receiver plays, from what its path carries;
//! - [`splice`]: switching a video between renditions without a seam;
//! - [`reorder`]: receiver reorder buffer and skip-forward decisions;
//! - [`playout`]: media time → running time for a live source, shared by a broadcast's tracks.

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod abr;
pub mod audio;
pub mod catalog;
pub mod hang;
pub mod header;
pub mod keyframes;
pub mod mapping;
pub mod metrics;
pub mod playout;
pub mod rate_control;
pub mod reorder;
pub mod splice;

pub use catalog::{Catalog, TrackRole};
pub use header::FrameHeader;
pub use keyframes::KeyframeRequests;
pub use mapping::{DeliveryMode, Mapper, Placement};
pub use playout::{PlayoutClock, Timeline, TrackPlayout};
pub use reorder::ReorderBuffer;
