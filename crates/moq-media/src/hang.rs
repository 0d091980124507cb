//! moq-dev's media format ("hang"), beside ours: what its players (moq-gst, the browser
//! player) read and its publishers write.
//!
//! - The catalog is the track `catalog.json`: one JSON document per group, renditions of
//!   video and audio by track name, each with its codec string, optional decoder
//!   configuration (`description`, hex) and container; a `label` for track pickers; what a
//!   player picks a video rendition by (`codedWidth`/`codedHeight`, `bitrate`) and sizes its
//!   buffer by (`jitter`: the most a frame waits at the publisher, ms). The root `clock`
//!   maps media time to the wall clock. Sections we do not use (`archive`, `text`, ...) are
//!   ignored.
//! - Each object is one frame. The `legacy` container puts the presentation timestamp
//!   (a QUIC varint, µs) ahead of the frame; `loc` puts LOC properties (the timestamp
//!   among them) there. An object with no frame bytes behind its timestamp is a marker,
//!   never media.
//! - A video group is a GoP: its first object is the keyframe, H.264 as Annex B with the
//!   parameter sets in-band (`avc3`). Nothing else is said: no decode timestamp, no frame
//!   kind, no availability time. [`HangReader`] derives what our receiver needs from the
//!   group and object IDs, the bitstream and the timestamps.
//!
//! Frames of one rendition only: delivery modes that split a video track into layers
//! cannot be expressed, and a sender falls back to their base-layer behaviour.

use std::collections::{BTreeMap, VecDeque};

use h264::{FrameKind, SliceType, StreamFormat};
use moq_wire::varint;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalog::{
    self, Catalog, CatalogError, Container, MAX_CATALOG_BYTES, MediaFormat, TIMESCALE, TrackEntry,
    TrackKind,
};
use crate::header::{FrameHeader, MAX_TIME_US};

/// Name of hang's catalog track.
pub const CATALOG_TRACK: &str = "catalog.json";

/// hang's wall clock counts from 2020-01-01T00:00:00Z: that instant in µs since the UNIX
/// epoch.
pub const MOQ_EPOCH_UNIX_US: u64 = 1_577_836_800_000_000;

/// Objects per group a reader accepts: decode indices are `group << 24 | object`, groups
/// counted from [`GROUP_MARGIN`] before the first one the reader saw (publishers number
/// groups from anywhere, e.g. ours from the time).
const OBJECT_BITS: u32 = 24;
/// Groups older than the first one seen that a reader still numbers.
const GROUP_MARGIN: u64 = 1024;
/// Groups a reader follows at once (for the last frame of each): far more than a
/// player ever has in flight; past it the oldest is forgotten.
const GROUPS_TRACKED: usize = 64;
/// Frame duration assumed until the timestamps show one: 30 fps.
const DEFAULT_FRAME_US: i64 = 33_333;
/// Reordering delay assumed in a stream's first GoP, in frames (x264's B-pyramid with
/// three B-frames reorders by two).
const ASSUMED_REORDER_FRAMES: i64 = 3;
/// Frames a GoP needs for its reordering delay to replace the one assumed or measured.
const MEASURED_GOP_FRAMES: i64 = 8;
/// Presentation times compared to find the frame duration.
const RECENT_PTS: usize = 16;
/// Largest reordering delay learned: beyond a second it is no stream's structure.
const MAX_REORDER_US: i64 = 1_000_000;

#[derive(Debug, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Root {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    video: Option<Section<VideoConfig>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    audio: Option<Section<AudioConfig>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clock: Option<Clock>,
}

#[derive(Debug, Deserialize, Serialize)]
struct Section<T> {
    /// By track name. Sorted by name once parsed: the order a player picks "the first".
    renditions: BTreeMap<String, T>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct VideoConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    codec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    coded_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    coded_height: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    framerate: Option<f64>,
    /// bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bitrate: Option<u64>,
    /// ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jitter: Option<u64>,
    #[serde(default)]
    container: ContainerConfig,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct AudioConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    codec: String,
    sample_rate: u32,
    number_of_channels: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jitter: Option<u64>,
    #[serde(default)]
    container: ContainerConfig,
}

#[derive(Debug, Deserialize, Serialize)]
struct ContainerConfig {
    kind: String,
}

impl Default for ContainerConfig {
    fn default() -> Self {
        ContainerConfig {
            kind: "legacy".into(),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
struct Clock {
    /// Wall time of media time 0 in `timescale` units since [`MOQ_EPOCH_UNIX_US`].
    wall: u64,
    #[serde(default = "micro")]
    timescale: u64,
}

fn micro() -> u64 {
    TIMESCALE
}

/// hang's `jitter` (whole ms) in µs, and back (rounded up: it is a bound).
fn jitter_us(ms: Option<u64>) -> Option<u64> {
    ms.map(|ms| ms.saturating_mul(1000))
}

fn jitter_ms(us: Option<u64>) -> Option<u64> {
    us.map(|us| us.div_ceil(1000))
}

impl ContainerConfig {
    fn container(&self) -> Container {
        match self.kind.as_str() {
            "legacy" => Container::HangLegacy,
            "loc" => Container::HangLoc,
            other => Container::Unsupported(other.chars().take(64).collect()),
        }
    }
}

/// A frame rate as a fraction GStreamer can carry: whole rates exactly, NTSC-like ones
/// (29.97…) as n·1000/1001.
fn framerate_fraction(fps: f64) -> Option<[u32; 2]> {
    if !(fps.is_finite() && fps > 0.0 && fps <= 1000.0) {
        return None;
    }
    if (fps - fps.round()).abs() < 1e-3 {
        return Some([fps.round() as u32, 1]);
    }
    let ntsc = fps * 1.001;
    if (ntsc - ntsc.round()).abs() < 1e-2 {
        return Some([ntsc.round() as u32 * 1000, 1001]);
    }
    Some([(fps * 1000.0).round() as u32, 1000])
}

impl Catalog {
    /// Parses the catalog of either format by the track it came on: ours
    /// ([`catalog::CATALOG_TRACK`]) or hang's ([`CATALOG_TRACK`]). Here, not in
    /// [`catalog`], which knows nothing of hang.
    pub fn from_track(track: &str, data: &[u8]) -> Result<Catalog, CatalogError> {
        if track == CATALOG_TRACK {
            catalog_from_json(data)
        } else {
            Catalog::from_json(data)
        }
    }
}

/// Parses a hang catalog into ours: one entry per rendition, in name order, video first.
/// Range checks are ours ([`Catalog::from_json`]'s), so a hostile document is an error.
pub fn catalog_from_json(data: &[u8]) -> Result<Catalog, CatalogError> {
    if data.len() > MAX_CATALOG_BYTES {
        return Err(CatalogError::TooLarge);
    }
    let root: Root = serde_json::from_slice(data)?;
    let mut tracks = Vec::new();
    for (name, v) in root.video.into_iter().flat_map(|s| s.renditions) {
        let h264 = catalog::Codec::from_codec_string(&v.codec) == Some(catalog::Codec::H264);
        let container = match v.container.container() {
            // avc1 frames are length-prefixed, their parameter sets in the description:
            // not the Annex B our pads carry.
            _ if h264 && v.codec.to_ascii_lowercase().starts_with("avc1") => {
                Container::Unsupported("legacy with avc1 (length-prefixed) frames".into())
            }
            other => other,
        };
        tracks.push(TrackEntry {
            codec: Some(v.codec),
            width: v.coded_width,
            height: v.coded_height,
            framerate: v.framerate.and_then(framerate_fraction),
            bitrate: v.bitrate.filter(|b| *b > 0),
            label: v.label,
            jitter_us: jitter_us(v.jitter),
            container,
            ..TrackEntry::new(name, TrackKind::Video)
        });
    }
    for (name, a) in root.audio.into_iter().flat_map(|s| s.renditions) {
        tracks.push(TrackEntry {
            codec: Some(a.codec),
            sample_rate: Some(a.sample_rate),
            channels: Some(a.number_of_channels),
            config: a.description,
            label: a.label,
            jitter_us: jitter_us(a.jitter),
            container: a.container.container(),
            ..TrackEntry::new(name, TrackKind::Audio)
        });
    }
    let wall_at_zero_us = root
        .clock
        .filter(|c| c.timescale > 0)
        .and_then(|c| {
            let us = u128::from(c.wall) * u128::from(TIMESCALE) / u128::from(c.timescale);
            u64::try_from(us).ok()?.checked_add(MOQ_EPOCH_UNIX_US)
        })
        .filter(|us| *us <= MAX_TIME_US);
    let catalog = Catalog {
        format: MediaFormat::Hang,
        wall_at_zero_us,
        // A restarted publisher has a new clock origin.
        ..Catalog::native("hang", wall_at_zero_us.map_or(0, |us| us / 1000), tracks)
    };
    catalog.validate()?;
    Ok(catalog)
}

/// Our catalog as a hang document: every video and audio track a rendition in the
/// `legacy` container (alternates of one video are renditions of it: a player picks one
/// by size and bitrate); `wall_at_zero_us` (UNIX µs) becomes its clock.
pub fn catalog_to_json(catalog: &Catalog) -> Vec<u8> {
    let mut root = Root::default();
    for t in &catalog.tracks {
        let codec = t.codec.clone().unwrap_or_default();
        match t.kind {
            TrackKind::Video => {
                // Parameter sets travel in-band: hang calls that avc3.
                let codec = codec.replacen("avc1", "avc3", 1);
                root.video
                    .get_or_insert_with(|| Section {
                        renditions: BTreeMap::new(),
                    })
                    .renditions
                    .insert(
                        t.name.clone(),
                        VideoConfig {
                            label: t.label.clone(),
                            codec,
                            description: None,
                            coded_width: t.width,
                            coded_height: t.height,
                            framerate: t.framerate.map(|[n, d]| f64::from(n) / f64::from(d.max(1))),
                            bitrate: t.bitrate,
                            jitter: jitter_ms(t.jitter_us),
                            container: ContainerConfig::default(),
                        },
                    );
            }
            TrackKind::Audio => {
                root.audio
                    .get_or_insert_with(|| Section {
                        renditions: BTreeMap::new(),
                    })
                    .renditions
                    .insert(
                        t.name.clone(),
                        AudioConfig {
                            label: t.label.clone(),
                            codec,
                            sample_rate: t.sample_rate.unwrap_or(48_000),
                            number_of_channels: t.channels.unwrap_or(2),
                            description: t.config.clone(),
                            jitter: jitter_ms(t.jitter_us),
                            container: ContainerConfig::default(),
                        },
                    );
            }
            TrackKind::VideoEnhancement | TrackKind::Other => {}
        }
    }
    root.clock = catalog.wall_at_zero_us.map(|us| Clock {
        wall: us.saturating_sub(MOQ_EPOCH_UNIX_US),
        timescale: TIMESCALE,
    });
    // Plain strings, numbers and maps: serialisation cannot fail.
    serde_json::to_vec(&root).unwrap_or_default()
}

/// The `legacy` container's prefix of a frame with presentation time `pts_us` (negative
/// times, which hang cannot carry, become 0).
pub fn legacy_prefix(pts_us: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    let ts = u64::try_from(pts_us).unwrap_or(0).min(varint::MAX_VARINT);
    // Cannot fail: the value is within the varint range.
    let _ = varint::encode(ts, &mut out);
    out
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HangError {
    #[error("frame timestamp missing or truncated")]
    Truncated,
    #[error("frame timestamp out of range")]
    TimeRange,
    #[error("LOC properties malformed: {0}")]
    Loc(&'static str),
    #[error("group {group} object {object} beyond the range a reader numbers")]
    IdRange { group: u64, object: u64 },
    #[error("H.264 frame: {0}")]
    H264(String),
}

/// LOC property types that carry the timestamp (LOC-04 and LOC-03), and the timescale.
const LOC_TIMESTAMP: u64 = 0x10;
const LOC_TIMESTAMP_03: u64 = 0x06;
const LOC_TIMESCALE: u64 = 0x08;

/// Splits a payload into its timestamp (in µs) and the frame behind it.
fn split(container: &Container, payload: &[u8]) -> Result<(u64, usize), HangError> {
    let mut cursor = payload;
    let ts = match container {
        Container::HangLoc => loc_timestamp(&mut cursor)?,
        _ => varint::decode(&mut cursor).map_err(|_| HangError::Truncated)?,
    };
    if ts > MAX_TIME_US {
        return Err(HangError::TimeRange);
    }
    Ok((ts, payload.len() - cursor.len()))
}

/// Reads LOC properties (a length, then delta-coded types with varint values for even
/// types and length-prefixed bytes for odd ones) and returns the timestamp in µs.
fn loc_timestamp(cursor: &mut &[u8]) -> Result<u64, HangError> {
    let truncated = |_| HangError::Loc("truncated");
    let len = usize::try_from(varint::decode(cursor).map_err(truncated)?)
        .map_err(|_| HangError::Loc("length"))?;
    let (mut props, rest) = cursor
        .split_at_checked(len)
        .ok_or(HangError::Loc("length beyond the payload"))?;
    *cursor = rest;
    let (mut kind, mut first) = (0u64, true);
    let (mut timestamp, mut timescale) = (None, TIMESCALE);
    while !props.is_empty() {
        let delta = varint::decode(&mut props).map_err(truncated)?;
        kind = if first {
            delta
        } else {
            kind.checked_add(delta).ok_or(HangError::Loc("type"))?
        };
        first = false;
        if kind % 2 == 0 {
            let value = varint::decode(&mut props).map_err(truncated)?;
            match kind {
                LOC_TIMESTAMP | LOC_TIMESTAMP_03 => timestamp = Some(value),
                LOC_TIMESCALE if value > 0 => timescale = value,
                LOC_TIMESCALE => return Err(HangError::Loc("timescale 0")),
                _ => {}
            }
        } else {
            let n = usize::try_from(varint::decode(&mut props).map_err(truncated)?)
                .map_err(|_| HangError::Loc("length"))?;
            props = props
                .get(n..)
                .ok_or(HangError::Loc("value beyond the properties"))?;
        }
    }
    let ts = timestamp.ok_or(HangError::Loc("no timestamp"))?;
    let us = u128::from(ts) * u128::from(TIMESCALE) / u128::from(timescale);
    u64::try_from(us).map_err(|_| HangError::TimeRange)
}

/// Decode timestamps for a stream that carries only presentation timestamps, derived per
/// group (a group is a GoP, its frames in decode order): never decreasing within a group
/// and never above a frame's PTS while the stream reorders by no more than its measured
/// (or, in its first GoP, assumed) delay. At a group's keyframe the DTS starts at PTS minus
/// that delay (and no earlier than what the group before has reached); within a group it
/// steps by a frame duration, capped by the PTS.
///
/// Groups travel on streams of their own, so a group's keyframe may arrive before the
/// last frames of the group before (a sender flushing its encoder at the end of a stream
/// sends both within a millisecond). Derived in arrival order, across groups, those
/// last frames would step on from the newer keyframe: decode times ahead of their
/// presentation times, and ahead of the frames that follow them in decode order.
///
/// The delay is measured per GoP: a frame `n` frames after the keyframe would be shown at
/// `key + n·frame` without reordering; how much earlier it is shown is how long the decoder
/// must hold it.
#[derive(Debug, Clone)]
pub struct DtsFromPts {
    /// The groups seen lately, by group number.
    groups: BTreeMap<u64, GroupDts>,
    /// Recent presentation times: the smallest gap between any two is a frame.
    recent_pts: VecDeque<i64>,
    /// The frame duration known beforehand (the catalog's rate, or 30 fps).
    prior_us: i64,
    /// The reordering delay of the last whole GoP.
    reorder_us: Option<i64>,
}

/// Where the decode times of one group stand.
#[derive(Debug, Clone, Copy)]
struct GroupDts {
    /// The keyframe's PTS: `None` when the group's first frame seen was not one.
    key_pts: Option<i64>,
    /// Frames read since the keyframe.
    after_key: i64,
    /// How long the group's frames so far must be held for reordering.
    delay: i64,
    last_dts: Option<i64>,
    /// A newer group has begun: this one's delay counted already, and now only raises
    /// the one known.
    closed: bool,
}

impl DtsFromPts {
    /// `frame_us`: the frame duration the catalog implies, if any.
    pub fn new(frame_us: Option<i64>) -> DtsFromPts {
        DtsFromPts {
            groups: BTreeMap::new(),
            recent_pts: VecDeque::with_capacity(RECENT_PTS),
            prior_us: frame_us.filter(|d| *d > 0).unwrap_or(DEFAULT_FRAME_US),
            reorder_us: None,
        }
    }

    /// The frame duration: the smallest gap between recent presentation times (frames
    /// next in decode order are further apart when the stream reorders), or the prior.
    pub fn frame_us(&self) -> i64 {
        let times = self.recent_pts.iter();
        times
            .clone()
            .enumerate()
            .flat_map(|(i, a)| times.clone().skip(i + 1).map(move |b| (a - b).abs()))
            .filter(|gap| *gap > 0)
            .min()
            .unwrap_or(self.prior_us)
    }

    /// The DTS of a frame of `group` presented at `pts`; `key`: it is the group's
    /// keyframe.
    pub fn next(&mut self, group: u64, pts: i64, key: bool) -> i64 {
        if self.recent_pts.len() == RECENT_PTS {
            self.recent_pts.pop_front();
        }
        self.recent_pts.push_back(pts);
        let frame = self.frame_us();
        if !self.groups.contains_key(&group) {
            if key {
                self.close_groups_before(group);
            }
            let newer_seen = self.groups.range(group..).next().is_some();
            self.groups.insert(
                group,
                GroupDts {
                    key_pts: key.then_some(pts),
                    after_key: 0,
                    delay: 0,
                    last_dts: None,
                    closed: newer_seen,
                },
            );
            while self.groups.len() > GROUPS_TRACKED {
                self.groups.pop_first();
            }
        }
        let before = self
            .groups
            .range(..group)
            .next_back()
            .and_then(|(_, g)| g.last_dts);
        let assumed = ASSUMED_REORDER_FRAMES * self.prior_us;
        let Some(g) = self.groups.get_mut(&group) else {
            // Older than every group followed: derived on its own.
            return pts - self.reorder_us.unwrap_or(assumed);
        };
        if let Some(key_pts) = g.key_pts {
            let early = key_pts.saturating_add(g.after_key.saturating_mul(frame)) - pts;
            g.delay = g.delay.max(early).min(MAX_REORDER_US);
            g.after_key += 1;
            if g.closed
                && let Some(known) = &mut self.reorder_us
            {
                *known = (*known).max(g.delay);
            }
        }
        // Until a whole GoP has been seen, assume B-pyramids as common encoders make them.
        let delay = g.delay.max(self.reorder_us.unwrap_or(assumed));
        // Stepping too little is safe (DTS lags, and keyframes catch up); too much is not,
        // and the first gaps seen may span several frames.
        let step = frame.min(self.prior_us);
        let after = |last: i64| last.saturating_add(step).min(pts).max(last);
        let dts = match (g.last_dts, before) {
            (Some(last), _) => after(last),
            (None, Some(before)) if key => (pts - delay).max(before),
            // A group whose keyframe is missing goes on from the group before.
            (None, Some(before)) => after(before),
            (None, None) => pts - delay,
        };
        g.last_dts = Some(dts);
        dts
    }

    /// A group's keyframe came: the groups before it have shown their reordering.
    fn close_groups_before(&mut self, group: u64) {
        for g in self.groups.range_mut(..group).map(|(_, g)| g) {
            if g.closed || g.key_pts.is_none() {
                continue;
            }
            g.closed = true;
            // Measured with the frame duration known by now: a first GoP's early frames
            // may have overestimated it. A GoP cut short (e.g. a keyframe forced for a new
            // viewer) shows too little of the stream's structure.
            if g.after_key >= MEASURED_GOP_FRAMES {
                self.reorder_us = Some(g.delay);
            } else if let Some(known) = &mut self.reorder_us {
                *known = (*known).max(g.delay);
            }
        }
    }
}

/// Reads the frames of one hang track into our frame headers.
///
/// Video: decode and base index `group << 24 | object` (decode order within a group,
/// groups in order; the receiver learns where each group ended from
/// [`HangReader::group_ended`]), the frame kind from the bitstream (a group's first frame
/// is its keyframe), DTS from [`DtsFromPts`]. Audio: every frame a key frame numbered by
/// its timestamp in frame durations, so consecutive frames have consecutive numbers
/// whatever the grouping. Availability: the catalog's clock plus the timestamp, or 0
/// (unknown) without a clock.
#[derive(Debug)]
pub struct HangReader {
    container: Container,
    video: bool,
    wall_at_zero_us: Option<u64>,
    dts: DtsFromPts,
    /// Audio frame duration, µs.
    audio_frame_us: u64,
    /// Decode index of the last frame read of each recent group.
    last_in_group: BTreeMap<u64, u64>,
    /// The group numbered 0.
    first_group: Option<u64>,
}

/// A frame read by [`HangReader::frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HangFrame {
    pub header: FrameHeader,
    /// Where the frame's bytes start in the payload.
    pub offset: usize,
}

impl HangReader {
    /// A reader for the track `entry` of `catalog`.
    pub fn new(catalog: &Catalog, entry: &TrackEntry) -> HangReader {
        let frame_us = entry
            .framerate
            .filter(|[n, _]| *n > 0)
            .map(|[n, d]| i64::from(d) * 1_000_000 / i64::from(n));
        let audio_frame_us = match entry.known_codec() {
            // AAC frames are 1024 samples.
            Some(catalog::Codec::Aac) => entry
                .sample_rate
                .filter(|r| *r > 0)
                .map_or(21_333, |r| 1024 * 1_000_000 / u64::from(r)),
            // Opus encoders default to 20 ms.
            _ => 20_000,
        };
        HangReader {
            container: entry.container.clone(),
            video: entry.kind == TrackKind::Video,
            wall_at_zero_us: catalog.wall_at_zero_us,
            dts: DtsFromPts::new(frame_us),
            audio_frame_us,
            last_in_group: BTreeMap::new(),
            first_group: None,
        }
    }

    /// The frame in object `object` of group `group`, or `None` for a marker.
    pub fn frame(
        &mut self,
        group: u64,
        object: u64,
        payload: &[u8],
    ) -> Result<Option<HangFrame>, HangError> {
        let (ts, offset) = split(&self.container, payload)?;
        let frame = &payload[offset..];
        if frame.is_empty() {
            return Ok(None);
        }
        let pts = ts as i64;
        let availability_us = self
            .wall_at_zero_us
            .map_or(0, |zero| zero.saturating_add(ts).min(MAX_TIME_US));
        let header = if self.video {
            let first = *self
                .first_group
                .get_or_insert(group.saturating_sub(GROUP_MARGIN));
            let relative = group
                .checked_sub(first)
                .filter(|g| g >> (64 - OBJECT_BITS) == 0 && object >> OBJECT_BITS == 0)
                .ok_or(HangError::IdRange { group, object })?;
            let info = h264::classify(frame, StreamFormat::ByteStream)
                .map_err(|e| HangError::H264(e.to_string()))?;
            // A group starts at a keyframe: an IDR, or an I picture with a recovery point.
            let kind = if object == 0 && info.slice_type == SliceType::I {
                FrameKind::Key
            } else {
                info.kind
            };
            let index = relative << OBJECT_BITS | object;
            self.remember(group, index);
            let dts = self.dts.next(group, pts, kind == FrameKind::Key);
            FrameHeader {
                kind,
                slice_type: info.slice_type,
                decode_index: index,
                dts,
                pts,
                duration: self.dts.frame_us() as u64,
                availability_us,
                base_group: group,
                base_index: index,
            }
        } else {
            let index = (ts + self.audio_frame_us / 2) / self.audio_frame_us;
            FrameHeader {
                kind: FrameKind::Key,
                slice_type: SliceType::I,
                decode_index: index,
                dts: pts,
                pts,
                duration: self.audio_frame_us,
                availability_us,
                base_group: group,
                base_index: index,
            }
        };
        Ok(Some(HangFrame { header, offset }))
    }

    fn remember(&mut self, group: u64, index: u64) {
        self.last_in_group.insert(group, index);
        if self.last_in_group.len() > GROUPS_TRACKED {
            self.last_in_group.pop_first();
        }
    }

    /// Group `group`'s stream ended complete: the decode index of its last frame, if any
    /// of its frames was read (video only).
    pub fn group_ended(&mut self, group: u64) -> Option<u64> {
        self.last_in_group.remove(&group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// moq-gst's catalog for an avc3 video and an Opus track (as its code path writes it).
    const MOQ_GST: &str = r#"{"video":{"renditions":{"0.avc3":{"codec":"avc3.42c01f","codedWidth":1280,"codedHeight":720,"bitrate":10320,"framerate":30.0,"container":{"kind":"legacy"}}}},"audio":{"renditions":{"1.opus":{"codec":"opus","sampleRate":48000,"numberOfChannels":2,"bitrate":1200,"description":"4f707573486561640102000080bb0000000000","container":{"kind":"legacy"}}}},"archive":{"track":"timeline.z","timescale":1000},"clock":{"wall":217689378863832,"timescale":1000000}}"#;

    #[test]
    fn a_moq_gst_catalog_becomes_ours() {
        let c = catalog_from_json(MOQ_GST.as_bytes()).unwrap();
        assert_eq!(c.format, MediaFormat::Hang);
        let v = c.track("0.avc3").unwrap();
        assert_eq!(v.kind, TrackKind::Video);
        assert_eq!(v.known_codec(), Some(catalog::Codec::H264));
        assert_eq!((v.width, v.height), (Some(1280), Some(720)));
        assert_eq!(v.framerate, Some([30, 1]));
        assert_eq!(v.container, Container::HangLegacy);
        let a = c.track("1.opus").unwrap();
        assert_eq!(a.known_codec(), Some(catalog::Codec::Opus));
        assert_eq!((a.sample_rate, a.channels), (Some(48_000), Some(2)));
        assert_eq!(a.config_bytes().unwrap()[..8], *b"OpusHead");
        assert_eq!(
            c.wall_at_zero_us,
            Some(MOQ_EPOCH_UNIX_US + 217_689_378_863_832)
        );
    }

    #[test]
    fn our_catalog_round_trips_through_hang() {
        let ours = Catalog {
            wall_at_zero_us: Some(1_795_000_000_000_000),
            ..Catalog::native(
                "skip-gops",
                1,
                vec![
                    TrackEntry {
                        codec: Some("avc1.64001f".into()),
                        width: Some(640),
                        height: Some(360),
                        framerate: Some([30000, 1001]),
                        avcc: Some("01".into()),
                        ..TrackEntry::new("video", TrackKind::Video)
                    },
                    TrackEntry {
                        codec: Some("mp4a.40.2".into()),
                        sample_rate: Some(44_100),
                        channels: Some(1),
                        config: Some("1208".into()),
                        ..TrackEntry::new("audio", TrackKind::Audio)
                    },
                ],
            )
        };
        let json = catalog_to_json(&ours);
        let text = std::str::from_utf8(&json).unwrap();
        assert!(text.contains(r#""codec":"avc3.64001f""#), "{text}");
        assert!(text.contains(r#""sampleRate":44100"#), "{text}");
        assert!(text.contains(r#""kind":"legacy""#), "{text}");
        let back = catalog_from_json(&json).unwrap();
        let v = back.track("video").unwrap();
        assert_eq!(v.framerate, Some([30000, 1001]));
        assert_eq!(v.width, Some(640));
        assert_eq!(back.track("audio").unwrap().config.as_deref(), Some("1208"));
        assert_eq!(back.wall_at_zero_us, Some(1_795_000_000_000_000));
    }

    /// A catalog as moq-dev's current publishers write it (hang 0.21): labels, bitrates,
    /// jitter, a stalled flag, display fields, an archive, text and data sections.
    const CURRENT: &str = r#"{
        "video":{"renditions":{
            "hd":{"label":"Main camera","codec":"avc3.64001f","codedWidth":1280,"codedHeight":720,
                  "displayAspectWidth":16,"displayAspectHeight":9,"bitrate":2500000,"stalled":false,
                  "framerate":30.0,"optimizeForLatency":true,"container":{"kind":"legacy"},
                  "jitter":100,"delay":12},
            "sd":{"codec":"avc3.42c01e","codedWidth":640,"codedHeight":360,"bitrate":800000,
                  "container":{"kind":"legacy"},"jitter":34}},
            "display":{"width":1280,"height":720},"rotation":0.0,"flip":false},
        "audio":{"renditions":{"en":{"label":"English","codec":"opus","sampleRate":48000,
            "numberOfChannels":2,"bitrate":64000,"container":{"kind":"legacy"},"jitter":20}}},
        "archive":{"track":"timeline.z","timescale":1000},
        "clock":{"wall":217689378863832,"timescale":1000000},
        "text":{"renditions":{}},"json":{"renditions":{}},"scte35":{"any":"thing"}}"#;

    #[test]
    fn a_current_catalog_gives_labels_bitrates_jitter_and_the_clock() {
        let c = catalog_from_json(CURRENT.as_bytes()).unwrap();
        let hd = c.track("hd").unwrap();
        assert_eq!(hd.label.as_deref(), Some("Main camera"));
        assert_eq!(hd.bitrate, Some(2_500_000));
        assert_eq!(hd.jitter_us, Some(100_000));
        assert_eq!((hd.width, hd.height), (Some(1280), Some(720)));
        let sd = c.track("sd").unwrap();
        assert_eq!((sd.label.as_deref(), sd.bitrate), (None, Some(800_000)));
        let en = c.track("en").unwrap();
        assert_eq!(en.label.as_deref(), Some("English"));
        assert_eq!(en.jitter_us, Some(20_000));
        assert_eq!(
            c.wall_at_zero_us,
            Some(MOQ_EPOCH_UNIX_US + 217_689_378_863_832)
        );
        // A label no picker could show is refused with the catalog.
        let long = CURRENT.replace("Main camera", &"x".repeat(2000));
        assert!(catalog_from_json(long.as_bytes()).is_err());
    }

    #[test]
    fn what_a_web_player_picks_a_rendition_by_is_written() {
        let rendition = |name: &str, height: u32, bitrate: u64| TrackEntry {
            codec: Some("avc1.64001f".into()),
            width: Some(height * 16 / 9),
            height: Some(height),
            framerate: Some([24, 1]),
            bitrate: Some(bitrate),
            alt_group: Some(1),
            label: Some(format!("{height}p")),
            // Three frames of reordering plus the frame itself, at 24 fps.
            jitter_us: Some(166_667),
            ..TrackEntry::new(name, TrackKind::Video)
        };
        let ours = Catalog {
            wall_at_zero_us: Some(MOQ_EPOCH_UNIX_US + 5_000_000),
            ..Catalog::native(
                "skip-gops",
                1,
                vec![
                    rendition("video", 720, 2_000_000),
                    rendition("video-1", 360, 600_000),
                ],
            )
        };
        let json: serde_json::Value = serde_json::from_slice(&catalog_to_json(&ours)).unwrap();
        let hd = &json["video"]["renditions"]["video"];
        assert_eq!(hd["codec"], "avc3.64001f");
        assert_eq!(
            (hd["codedWidth"].as_u64(), hd["codedHeight"].as_u64()),
            (Some(1280), Some(720))
        );
        assert_eq!(hd["bitrate"], 2_000_000);
        assert_eq!(hd["label"], "720p");
        assert_eq!(hd["jitter"], 167, "whole ms, rounded up");
        assert_eq!(json["video"]["renditions"]["video-1"]["bitrate"], 600_000);
        assert_eq!(json["clock"]["wall"], 5_000_000);
        assert_eq!(json["clock"]["timescale"], 1_000_000);
        let back = catalog_from_json(&catalog_to_json(&ours)).unwrap();
        assert_eq!(
            back.track("video-1").unwrap().label.as_deref(),
            Some("360p")
        );
        assert_eq!(back.track("video").unwrap().jitter_us, Some(167_000));
    }

    #[test]
    fn renditions_we_cannot_read_are_listed_as_unplayable() {
        let json = r#"{"video":{"renditions":{
            "a":{"codec":"avc1.64001f","description":"01","container":{"kind":"legacy"}},
            "b":{"codec":"avc3.64001f","container":{"kind":"cmaf","init":"AAAA"}},
            "c":{"codec":"vp09.00.10.08"},
            "d":{"codec":"avc3.64001f","container":{"kind":"loc"}}}}}"#;
        let c = catalog_from_json(json.as_bytes()).unwrap();
        let playable: Vec<&str> = c
            .tracks
            .iter()
            .filter(|t| t.known_codec().is_some())
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(playable, ["d"]);
    }

    #[test]
    fn hostile_catalogs_are_errors() {
        for bad in [
            &b"{"[..],
            br#"{"video":{"renditions":{"v":{"codec":"avc3.64001f","codedWidth":0}}}}"#,
            br#"{"video":{"renditions":{"v":{"codec":"avc3.64001f","codedWidth":99999999999}}}}"#,
            br#"{"audio":{"renditions":{"a":{"codec":"opus","sampleRate":0,"numberOfChannels":2}}}}"#,
            br#"{"audio":{"renditions":{"a":{"codec":"opus","sampleRate":48000,"numberOfChannels":2,"description":"zz"}}}}"#,
            br#"{}"#,
        ] {
            assert!(
                catalog_from_json(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // A clock beyond any real time is ignored, not overflowed.
        let c = catalog_from_json(
            br#"{"audio":{"renditions":{"a":{"codec":"opus","sampleRate":48000,"numberOfChannels":2}}},"clock":{"wall":18446744073709551615,"timescale":1}}"#,
        )
        .unwrap();
        assert_eq!(c.wall_at_zero_us, None);
        assert_eq!(framerate_fraction(f64::NAN), None);
        assert_eq!(framerate_fraction(25.0), Some([25, 1]));
        assert_eq!(framerate_fraction(59.94), Some([60000, 1001]));
    }

    #[test]
    fn legacy_and_loc_timestamps() {
        let mut payload = legacy_prefix(33_333);
        assert_eq!(payload, [0x80, 0x00, 0x82, 0x35]);
        payload.extend_from_slice(b"frame");
        assert_eq!(split(&Container::HangLegacy, &payload), Ok((33_333, 4)));
        assert_eq!(legacy_prefix(-5), [0]);
        // LOC: length 3, type 0x10, varint 12345.
        let loc = [0x03, 0x10, 0x70, 0x39, 0xaa];
        assert_eq!(split(&Container::HangLoc, &loc), Ok((12_345, 4)));
        // An odd (bytes) property and a timescale of 10 per second before the timestamp.
        let loc = [0x07, 0x05, 0x01, 0xee, 0x03, 0x0a, 0x08, 0x07, 0xbb];
        // types 0x05 (bytes ee), 0x08 (timescale 10), 0x10 (timestamp 7): 0.7 s.
        assert_eq!(split(&Container::HangLoc, &loc), Ok((700_000, 8)));
        for bad in [
            &[0x05, 0x10, 0x01][..],
            &[0x01, 0x11],
            &[0x02, 0x08, 0x00],
            &[0x00],
        ] {
            assert!(split(&Container::HangLoc, bad).is_err(), "{bad:02x?}");
        }
        assert_eq!(
            split(&Container::HangLegacy, &[]),
            Err(HangError::Truncated)
        );
        let mut huge = Vec::new();
        varint::encode(MAX_TIME_US + 1, &mut huge).unwrap();
        assert_eq!(
            split(&Container::HangLegacy, &huge),
            Err(HangError::TimeRange)
        );
    }

    #[test]
    fn decode_times_follow_decode_order_and_stay_at_or_below_presentation() {
        // I0 P3 B1 B2 P6 B4 B5 | I9 P12 B10 B11 at 40 ms: one B-frame run of two.
        let pts = [0, 3, 1, 2, 6, 4, 5, 9, 12, 10, 11];
        let mut d = DtsFromPts::new(None);
        let dts: Vec<i64> = pts
            .iter()
            .enumerate()
            .map(|(i, &p)| d.next(u64::from(i >= 7), p * 40_000, i == 0 || i == 7))
            .collect();
        assert!(dts.windows(2).all(|w| w[0] <= w[1]), "{dts:?}");
        for (i, (&p, &t)) in pts.iter().zip(&dts).enumerate() {
            assert!(t <= p * 40_000, "frame {i}: dts {t} > pts {}", p * 40_000);
        }
        assert_eq!(d.frame_us(), 40_000);
        // A stream without reordering: DTS = PTS once a GoP showed it.
        let mut d = DtsFromPts::new(Some(40_000));
        let dts: Vec<i64> = (0..25)
            .map(|i| d.next(i as u64 / 10, i * 40_000, i % 10 == 0))
            .collect();
        assert!(dts.iter().enumerate().all(|(i, t)| *t <= i as i64 * 40_000));
        let presented: Vec<i64> = (10..25).map(|i| i * 40_000).collect();
        assert_eq!(dts[10..], presented[..]);
    }

    #[test]
    fn deep_reordering_is_measured_in_the_first_gop() {
        // I0 P8 B4 b2 b1 b3 b6 b5 b7 (shown up to three frames early), three times: DTS
        // never decreases and, once the first GoP measured the delay, never passes PTS.
        let gop = [0, 8, 4, 2, 1, 3, 6, 5, 7];
        let mut d = DtsFromPts::new(Some(40_000));
        let mut last = i64::MIN;
        for round in 0..3 {
            for (i, &p) in gop.iter().enumerate() {
                let pts = (round * 9 + p) * 40_000;
                let dts = d.next(round as u64, pts, i == 0);
                assert!(dts >= last);
                last = dts;
                assert!(dts <= pts, "round {round} frame {i}: {dts} > {pts}");
            }
        }
        assert_eq!(d.reorder_us, Some(3 * 40_000));
        // A GoP of one frame (a keyframe forced for a new viewer) measures nothing.
        let mut d = DtsFromPts::new(Some(40_000));
        d.next(0, 0, true);
        for (i, &p) in gop.iter().enumerate() {
            let pts = (1 + p) * 40_000;
            assert!(d.next(1, pts, i == 0) <= pts, "frame {i}");
        }
    }

    #[test]
    fn a_keyframe_ahead_of_the_last_frames_of_the_group_before_leaves_their_decode_times() {
        // I0 P3 B1 B2 P6 B4 B5 P9 B7 B8 | I12 P15 B13 B14, as an encoder flushing at the
        // end of a stream sends it: the new group's first frames within a millisecond of
        // the last ones of the group before, on another stream, and arriving first.
        let pts = [0, 3, 1, 2, 6, 4, 5, 9, 7, 8, 12, 15, 13, 14];
        let group = |i: usize| u64::from(i >= 10);
        let derive = |order: &[usize]| {
            let mut d = DtsFromPts::new(Some(40_000));
            let mut dts = [0; 14];
            for &i in order {
                dts[i] = d.next(group(i), pts[i] * 40_000, i == 0 || i == 10);
            }
            dts
        };
        let in_order: Vec<usize> = (0..14).collect();
        let expected = derive(&in_order);
        assert!(expected.windows(2).all(|w| w[0] <= w[1]), "{expected:?}");
        // The last three frames of the first group after the second group's first two.
        let overtaken = [0, 1, 2, 3, 4, 5, 6, 10, 11, 7, 8, 9, 12, 13];
        let dts = derive(&overtaken);
        // The first group's frames as if nothing had overtaken them; the second group's
        // after them and, as every frame's, at or below the PTS.
        assert_eq!(dts[..10], expected[..10]);
        assert!(dts.windows(2).all(|w| w[0] <= w[1]), "{dts:?}");
        for i in 0..14 {
            assert!(dts[i] <= pts[i] * 40_000, "frame {i}: {dts:?}");
        }
    }

    fn reader(kind: TrackKind, codec: &str) -> HangReader {
        let catalog = Catalog {
            format: MediaFormat::Hang,
            wall_at_zero_us: Some(1_000_000),
            ..Catalog::native("hang", 0, Vec::new())
        };
        let entry = TrackEntry {
            codec: Some(codec.into()),
            sample_rate: Some(48_000),
            container: Container::HangLegacy,
            ..TrackEntry::new("t", kind)
        };
        HangReader::new(&catalog, &entry)
    }

    fn payload(pts: i64, frame: &[u8]) -> Vec<u8> {
        let mut p = legacy_prefix(pts);
        p.extend_from_slice(frame);
        p
    }

    /// An IDR slice and a non-reference P slice (enough of a slice header to classify).
    const IDR: &[u8] = &[0, 0, 0, 1, 0x65, 0x88, 0x84];
    const P_NONREF: &[u8] = &[0, 0, 0, 1, 0x01, 0x9b, 0x02];

    #[test]
    fn video_frames_get_indices_kinds_and_times_from_their_place() {
        let mut r = reader(TrackKind::Video, "avc3.42c01f");
        // Groups numbered from anywhere (ours count from the time).
        let g = 1_795_000_000_007;
        let key = r.frame(g, 0, &payload(80_000, IDR)).unwrap().unwrap();
        assert_eq!(key.header.kind, FrameKind::Key);
        let base = key.header.decode_index;
        assert_eq!(base & 0xff_ffff, 0);
        assert_eq!(key.header.base_group, g);
        assert_eq!(key.header.availability_us, 1_080_000);
        assert_eq!(key.offset, 4);
        let next = r.frame(g, 1, &payload(120_000, P_NONREF)).unwrap().unwrap();
        assert_eq!(next.header.kind, FrameKind::NonReference);
        assert_eq!(next.header.decode_index, base | 1);
        assert!(next.header.dts > key.header.dts);
        // The end-of-group marker: no frame.
        assert_eq!(r.frame(g, 2, &legacy_prefix(160_000)).unwrap(), None);
        assert_eq!(r.group_ended(g), Some(base | 1));
        assert_eq!(r.group_ended(g), None);
        // The next group continues the numbering; a group far older than the first is
        // out of range, as is an object beyond 2^24.
        let after = r.frame(g + 1, 0, &payload(200_000, IDR)).unwrap().unwrap();
        assert_eq!(after.header.decode_index, base + (1 << 24));
        for (group, object) in [(g + 1, 1 << 24), (g - 2000, 0)] {
            assert!(matches!(
                r.frame(group, object, &payload(0, IDR)),
                Err(HangError::IdRange { .. })
            ));
        }
        assert!(matches!(
            r.frame(g + 2, 0, &payload(0, &[0, 0, 0, 1, 0x09, 0xf0])),
            Err(HangError::H264(_))
        ));
    }

    #[test]
    fn audio_frames_are_numbered_by_their_time() {
        let mut r = reader(TrackKind::Audio, "opus");
        let numbers: Vec<u64> = [(3, 0, 60_000), (3, 1, 80_000), (4, 0, 100_000)]
            .iter()
            .map(|&(g, o, pts)| {
                r.frame(g, o, &payload(pts, b"opus"))
                    .unwrap()
                    .unwrap()
                    .header
                    .decode_index
            })
            .collect();
        assert_eq!(numbers, [3, 4, 5]);
        let aac = reader(TrackKind::Audio, "mp4a.40.2");
        assert_eq!(aac.audio_frame_us, 21_333);
    }
}
