//! What the network side hands a track's player: frames as received and the events
//! around them. Generic over the payload, which the player carries and never reads.

use moq_media::FrameHeader;
use moq_media::catalog::TrackRole;

/// One input of a track.
#[derive(Debug)]
pub enum Item<T> {
    /// The timeline starts afresh (a new session, a restarted publisher, a resume): every
    /// track gets the same `generation`, so the shared timeline is reset once.
    Reset {
        generation: u64,
    },
    /// The media subscriptions (re)started, after `resumes` resumes of the element: frames
    /// of this epoch follow.
    Subscribed {
        epoch: u64,
        resumes: u64,
    },
    Frame(Incoming<T>),
    /// The video is rendition `name` of its alternate group from the frame of decode
    /// index `from` on (from the start if None).
    Rendition {
        name: String,
        from: Option<u64>,
    },
    /// A video base-layer group's stream ended; `complete` is false when it was reset.
    /// `last`: the decode index of its last frame, for formats that number frames
    /// within their group (the next group's keyframe follows it).
    GroupEnd {
        epoch: u64,
        group: u64,
        complete: bool,
        last: Option<u64>,
    },
    /// The publisher ended the track.
    Eos,
}

/// A frame as received.
#[derive(Debug)]
pub struct Incoming<T> {
    /// The subscriptions it came on (see [`Item::Subscribed`]).
    pub epoch: u64,
    /// The MoQ group of the object it came in.
    pub group: u64,
    pub header: FrameHeader,
    pub layer: TrackRole,
    /// Bytes of the access unit.
    pub size: usize,
    /// When the object was whole, wall clock µs since the UNIX epoch: the clock of the
    /// sender's availability times.
    pub received_us: i64,
    pub data: T,
}
