//! H.264 access-unit parsing and frame classification.
//!
//! `moqsink` gets one access unit per buffer from `h264parse` and has to decide, per unit,
//! which track and priority it gets: keyframes open groups, reference pictures go to the
//! base layer and non-reference pictures (`nal_ref_idc == 0`) may go to an enhancement layer.
//! This crate answers that question from the bytes alone, keeps the SPS/PPS a late joiner
//! needs, and converts between the two framings GStreamer uses (`byte-stream` and `avc`).
//!
//! It reads only what it needs (NAL headers, the first two slice-header fields, the SPS up to
//! the cropping window) and never panics on malformed input: every problem is an
//! [`H264Error`].
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

mod bits;
mod classify;
mod error;
mod nal;
mod params;
mod sps;
#[cfg(test)]
mod testutil;

pub use classify::{AuInfo, FrameKind, SliceType, classify};
pub use error::H264Error;
pub use nal::{Nal, NalUnits, StreamFormat, annexb_to_avc, avc_to_annexb, nal_type, nal_units};
pub use params::ParameterSets;
pub use sps::{SpsInfo, parse_sps};
