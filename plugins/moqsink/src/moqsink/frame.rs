//! What every track of the broadcast shares, below the publisher and its video and audio
//! tracks: a frame's timing as it reached the sink, why one was not published, how a
//! track is set up, what goes ahead of a frame in its object, and the session priority of
//! a stream.

use std::time::Duration;

use bytes::Bytes;
use moq_media::catalog::MediaFormat;
use moq_media::mapping::priority::Urgency;
use moq_media::{DeliveryMode, FrameHeader, hang};
use moq_session::Priority;

/// Identifies a sink pad's track for the life of the element.
pub type TrackId = u32;

pub fn session_priority(u: Urgency) -> Priority {
    Priority {
        class: u.class,
        rank: u.rank,
        publisher: u.publisher,
    }
}

/// Timing of one frame, in catalog timescale units (µs) except where noted.
#[derive(Debug, Clone, Copy)]
pub struct AuTiming {
    pub pts: i64,
    pub dts: i64,
    pub duration: u64,
    /// Wall clock, µs since the UNIX epoch, when the frame reached the sink.
    pub availability_us: u64,
    /// Upstream marked the buffer as a keyframe (no DELTA_UNIT flag).
    pub marked_key: bool,
}

/// What goes ahead of a frame in its object: our header, or hang's timestamp.
pub fn frame_prefix(format: MediaFormat, header: &FrameHeader) -> Bytes {
    match format {
        MediaFormat::Native => {
            let mut out = Vec::with_capacity(64);
            header.encode(&mut out);
            Bytes::from(out)
        }
        MediaFormat::Hang => Bytes::from(hang::legacy_prefix(header.pts)),
    }
}

/// Why a frame was not published.
#[derive(Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Not parseable.
    Malformed(String),
    /// Before the first keyframe, or a keyframe without SPS/PPS seen yet.
    NoKeyframeYet,
    /// After a keyframe that was refused: it references a picture no viewer has.
    AfterRefusedKeyframe,
    /// No caps yet, or the pad has no track.
    NotConfigured,
}

/// What every track of the broadcast is made with.
#[derive(Debug, Clone, Copy)]
pub struct TrackSetup {
    pub format: MediaFormat,
    pub mode: DeliveryMode,
    /// Data not handed to QUIC within it is dropped.
    pub delivery_timeout: Option<Duration>,
    /// The first group ID and decode index.
    pub epoch: u64,
}

pub use moq_media::clock::unix_now_us;
