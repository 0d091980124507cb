//! H.264 access-unit parsing and frame classification.
//!
//! `moqsink` gets one access unit per buffer from `h264parse` and has to decide, per unit,
//! which track and priority it gets: keyframes open groups, reference pictures go to the
//! base layer and non-reference pictures (`nal_ref_idc == 0`) may go to an enhancement layer.
//! This crate answers that question from the bytes alone, keeps the SPS/PPS a late joiner
//! needs, and converts between the two framings GStreamer uses (`byte-stream` and `avc`).
//!
//! [`classify`] reads only what it needs (NAL headers, the first two slice-header fields) and
//! never panics on malformed input: every problem is an [`H264Error`].
//!
//! A publisher should go through [`StreamParser`] instead: it validates parameter sets
//! ([`Sps::parse`], [`Pps::parse`]) and every slice header against them, so malformed units
//! are recognised as such, and it emits only the parameter sets the stream currently uses
//! ([`ActiveSets`]), never a bogus or stale one that would break late joiners.
//!
//! ```
//! use h264::{FrameKind, ParameterSets, StreamFormat, classify};
//!
//! // SPS (Baseline, 16x16), PPS and an IDR slice, each behind a start code.
//! let au = [
//!     0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x0a, 0xda, 0x79,
//!     0, 0, 0, 1, 0x68, 0xce, 0x38, 0x80,
//!     0, 0, 1, 0x65, 0x88, 0x84,
//! ];
//! let info = classify(&au, StreamFormat::ByteStream)?;
//! assert_eq!(info.kind, FrameKind::Key);
//!
//! let mut sets = ParameterSets::default();
//! sets.update_from_au(&au, StreamFormat::ByteStream)?;
//! assert_eq!(sets.sps_info().unwrap().codec_string(), "avc1.42c00a");
//! # Ok::<(), h264::H264Error>(())
//! ```
//!
//! The same keyframe, this time with slice data behind its header, through a
//! [`StreamParser`]:
//!
//! ```
//! use h264::{FrameKind, StreamFormat, StreamParser};
//!
//! let au = [
//!     0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x0a, 0xda, 0x79,
//!     0, 0, 0, 1, 0x68, 0xce, 0x38, 0x80,
//!     0, 0, 1, 0x65, 0x88, 0x84, 0xda, 0xc0,
//! ];
//! let mut parser = StreamParser::new();
//! let parsed = parser.push(&au, StreamFormat::ByteStream)?;
//! assert_eq!(parsed.info.kind, FrameKind::Key);
//! assert!(parsed.active_changed && parsed.carries_active_sets);
//! let active = parser.active().unwrap();
//! assert_eq!(active.sps_info().codec_string(), "avc1.42c00a");
//! assert_eq!(active.annexb_prefix(), &au[..18]);
//!
//! // Random bytes behind an IDR NAL header are not a keyframe.
//! assert!(parser.push(&[0, 0, 1, 0x65, 0x3c, 0x91, 0x07, 0xee], StreamFormat::ByteStream).is_err());
//! # Ok::<(), h264::H264Error>(())
//! ```

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod bits;
mod classify;
mod error;
mod nal;
mod params;
mod pps;
mod slice;
mod sps;
mod stream;
#[cfg(test)]
mod testutil;

pub use classify::{AuInfo, FrameKind, SliceType, classify};
pub use error::H264Error;
pub use nal::{Nal, NalUnits, StreamFormat, annexb_to_avc, avc_to_annexb, nal_type, nal_units};
pub use params::ParameterSets;
pub use pps::Pps;
pub use sps::{Sps, SpsInfo, parse_sps};
pub use stream::{ActiveSets, ParsedAu, StreamParser};
