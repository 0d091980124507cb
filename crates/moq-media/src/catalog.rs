//! The `catalog` track: a JSON document listing the broadcast's tracks and what a
//! subscriber needs to decode each of them.
//!
//! ```json
//! {"version":2,"timescale":1000000,"delivery":"skip-gops","epoch":1795000000000,
//!  "tracks":[
//!   {"name":"video","kind":"video","codec":"avc1.64001e","width":320,"height":240,
//!    "framerate":[24,1],"avcc":"0164001e…","enhancement":"video-enh"},
//!   {"name":"video-enh","kind":"video-enhancement","base":"video"},
//!   {"name":"audio","kind":"audio","codec":"opus","sample_rate":48000,"channels":2,
//!    "config":"4f707573486561640102…"}]}
//! ```
//!
//! Entries are flat with optional fields so a receiver can skip a kind or codec it does
//! not know and still play the rest; every field of a known kind is range-checked on
//! parse, so a hostile document is an error, not a panic in caps or arithmetic.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Name of the catalog track in every namespace.
pub const CATALOG_TRACK: &str = "catalog";
/// Name of the first video track (key and reference pictures, plus everything in `baseline`).
pub const BASE_TRACK: &str = "video";
/// Name of the first audio track.
pub const AUDIO_TRACK: &str = "audio";
/// Name of the first video track's enhancement layer (non-reference pictures).
pub const ENHANCEMENT_TRACK: &str = "video-enh";

/// Timestamps in frame headers count this many units per second.
pub const TIMESCALE: u64 = 1_000_000;

/// Largest catalog document accepted, in bytes: a catalog is a few hundred bytes, and
/// parsing is bounded by the input.
pub const MAX_CATALOG_BYTES: usize = 1 << 20;
/// Largest picture width or height accepted (H.264 levels stop well below).
pub const MAX_DIMENSION: u32 = 16_384;
/// Most tracks a catalog may list.
pub const MAX_TRACKS: usize = 64;
/// Highest audio sample rate accepted.
pub const MAX_SAMPLE_RATE: u32 = 768_000;
/// Highest video bitrate accepted, bit/s.
pub const MAX_BITRATE: u64 = 100_000_000_000;
/// Most audio channels accepted (Opus's channel mapping family 255 allows 255).
pub const MAX_CHANNELS: u32 = 255;
/// Longest codec string, track name or delivery name accepted.
const MAX_NAME_LEN: usize = 1024;
/// Longest codec configuration accepted, in bytes.
const MAX_CONFIG_LEN: usize = 64 * 1024;
/// Longest publisher-side frame delay accepted (hang's `jitter`), µs.
const MAX_JITTER_US: u64 = 60_000_000;

/// The layer of a video track a frame came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackRole {
    /// Key and reference pictures; groups are GoPs.
    Base,
    /// Non-reference pictures only; every frame is its own group.
    Enhancement,
}

/// What a track carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrackKind {
    /// A video track: its base layer, groups are GoPs.
    Video,
    /// The non-reference pictures of a video track, one group per frame.
    VideoEnhancement,
    /// Audio frames, a group per short run of them.
    Audio,
    /// A kind this version does not know: listed, never played.
    #[serde(other)]
    Other,
}

/// The kinds of media the elements' pads carry: a pad template `<prefix>_%u` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Video,
    Audio,
}

impl MediaKind {
    /// The pad template's name prefix, also the first track's name.
    pub fn prefix(self) -> &'static str {
        match self {
            MediaKind::Video => "video",
            MediaKind::Audio => "audio",
        }
    }

    /// The kind of pads made from the template called `template`.
    pub fn of_template(template: &str) -> Option<MediaKind> {
        [MediaKind::Video, MediaKind::Audio]
            .into_iter()
            .find(|k| template == format!("{}_%u", k.prefix()))
    }

    /// The default track of pad `<prefix>_<index>`: `video`, then `video-1`, ...
    pub fn default_track_name(self, index: u32) -> String {
        match index {
            0 => self.prefix().to_owned(),
            n => format!("{}-{n}", self.prefix()),
        }
    }

    /// The catalog kind of its tracks.
    pub fn track_kind(self) -> TrackKind {
        match self {
            MediaKind::Video => TrackKind::Video,
            MediaKind::Audio => TrackKind::Audio,
        }
    }

    /// Whether pads of this kind carry `codec`.
    pub fn carries(self, codec: Codec) -> bool {
        match self {
            MediaKind::Video => codec == Codec::H264,
            MediaKind::Audio => matches!(codec, Codec::Opus | Codec::Aac),
        }
    }
}

/// The codecs the elements carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    H264,
    Opus,
    /// MPEG-4 AAC, raw frames (no ADTS).
    Aac,
}

impl Codec {
    /// The codec a catalog codec string names, if the elements carry it: `avc1.*`/`avc3.*`,
    /// `opus`, `mp4a.40.*`.
    pub fn from_codec_string(codec: &str) -> Option<Codec> {
        let lower = codec.to_ascii_lowercase();
        if lower.starts_with("avc1") || lower.starts_with("avc3") {
            Some(Codec::H264)
        } else if lower == "opus" {
            Some(Codec::Opus)
        } else if lower.starts_with("mp4a.40.") {
            Some(Codec::Aac)
        } else {
            None
        }
    }
}

/// How a track's objects carry frames.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Container {
    /// Our frame header ([`crate::header`]) ahead of the frame.
    #[default]
    Native,
    /// hang's `legacy`: a varint timestamp (µs) ahead of the frame ([`crate::hang`]).
    HangLegacy,
    /// hang's `loc`: LOC properties (the timestamp among them) ahead of the frame.
    HangLoc,
    /// A container the elements do not read, by its name.
    Unsupported(String),
}

/// One track of the broadcast. Which fields are set depends on `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackEntry {
    pub name: String,
    pub kind: TrackKind,
    /// RFC 6381 codec string (`avc1.64001e`, `mp4a.40.2`) or `opus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codec: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Frame rate as `[numerator, denominator]`, when the sender knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framerate: Option<[u32; 2]>,
    /// Video: AVCDecoderConfigurationRecord (SPS and PPS), hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avcc: Option<String>,
    /// Video: the rendition's bitrate, bit/s: what a receiver choosing among alternates
    /// compares with its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    /// Video: renditions of the same content (other bitrates or sizes) share this id; a
    /// receiver plays one of them at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_group: Option<u32>,
    /// Video: the track carrying its non-reference pictures, in the modes that split them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enhancement: Option<String>,
    /// Enhancement layer: the video track it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_rate: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<u32>,
    /// Audio: the decoder configuration, hex (Opus: the `OpusHead` packet; AAC: the
    /// AudioSpecificConfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// A human-readable name for track pickers ("Main camera", "English").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Not in our catalog: every track of it uses our container.
    #[serde(skip)]
    pub container: Container,
    /// Not in our catalog, whose frames carry their decode times: the longest a frame
    /// waits at the publisher before it is sent (its own duration, plus reordering), µs.
    /// hang's players size their buffer by it.
    #[serde(skip)]
    pub jitter_us: Option<u64>,
}

impl TrackEntry {
    /// An entry of `kind` named `name` with no other field set.
    pub fn new(name: impl Into<String>, kind: TrackKind) -> TrackEntry {
        TrackEntry {
            name: name.into(),
            kind,
            codec: None,
            width: None,
            height: None,
            framerate: None,
            avcc: None,
            bitrate: None,
            alt_group: None,
            enhancement: None,
            base: None,
            sample_rate: None,
            channels: None,
            config: None,
            label: None,
            container: Container::Native,
            jitter_us: None,
        }
    }

    /// The codec, if it is one the elements carry, in a container they read.
    pub fn known_codec(&self) -> Option<Codec> {
        if matches!(self.container, Container::Unsupported(_)) {
            return None;
        }
        self.codec.as_deref().and_then(Codec::from_codec_string)
    }

    /// The AVCDecoderConfigurationRecord of a video track.
    pub fn avcc_bytes(&self) -> Option<Vec<u8>> {
        self.avcc.as_deref().and_then(hex_decode)
    }

    /// The decoder configuration of an audio track.
    pub fn config_bytes(&self) -> Option<Vec<u8>> {
        self.config.as_deref().and_then(hex_decode)
    }
}

/// The media format of a broadcast: ours, or moq-dev's hang (the catalog says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MediaFormat {
    #[default]
    Native,
    Hang,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    pub version: u32,
    /// Units per second of the timestamps in frame headers.
    pub timescale: u64,
    /// The sender's delivery mode, for information (`baseline`, `skip-gops`, ...).
    pub delivery: String,
    /// Identifies one run of the publisher (its start time, ms since the UNIX epoch): a
    /// change means a new stream whose timestamps and indices start afresh.
    #[serde(default)]
    pub epoch: u64,
    pub tracks: Vec<TrackEntry>,
    /// Not in our catalog, which is always native.
    #[serde(skip)]
    pub format: MediaFormat,
    /// Wall clock (µs since the UNIX epoch) at media time 0, for formats whose frames
    /// carry no availability time of their own.
    #[serde(skip)]
    pub wall_at_zero_us: Option<u64>,
}

#[derive(Debug, Error)]
pub enum CatalogError {
    #[error("catalog is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unsupported catalog version {0}")]
    Version(u32),
    #[error("catalog lists no video or audio track")]
    NoMediaTrack,
    #[error("catalog is larger than {MAX_CATALOG_BYTES} bytes")]
    TooLarge,
    #[error("invalid catalog field {field} of track {track:?}: {problem}")]
    Invalid {
        track: String,
        field: &'static str,
        problem: &'static str,
    },
}

fn invalid(track: &str, field: &'static str, problem: &'static str) -> CatalogError {
    CatalogError::Invalid {
        track: track.into(),
        field,
        problem,
    }
}

impl Catalog {
    pub const VERSION: u32 = 2;

    /// A catalog of ours: the sender's delivery mode, its run's epoch, its tracks.
    pub fn native(delivery: impl Into<String>, epoch: u64, tracks: Vec<TrackEntry>) -> Catalog {
        Catalog {
            version: Catalog::VERSION,
            timescale: TIMESCALE,
            delivery: delivery.into(),
            epoch,
            tracks,
            format: MediaFormat::Native,
            wall_at_zero_us: None,
        }
    }

    pub fn to_json(&self) -> Vec<u8> {
        // Plain strings, numbers and lists: serialisation cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses and validates a catalog: every field a receiver turns into caps or
    /// arithmetic is range-checked here, so a hostile document is an error, not a panic.
    pub fn from_json(data: &[u8]) -> Result<Catalog, CatalogError> {
        if data.len() > MAX_CATALOG_BYTES {
            return Err(CatalogError::TooLarge);
        }
        let catalog: Catalog = serde_json::from_slice(data)?;
        catalog.validate()?;
        Ok(catalog)
    }

    pub(crate) fn validate(&self) -> Result<(), CatalogError> {
        if self.version != Self::VERSION {
            return Err(CatalogError::Version(self.version));
        }
        if self.timescale != TIMESCALE {
            return Err(invalid(
                "",
                "timescale",
                "only microseconds (1000000) are supported",
            ));
        }
        if self.delivery.len() > MAX_NAME_LEN {
            return Err(invalid("", "delivery", "too long"));
        }
        if self.tracks.len() > MAX_TRACKS {
            return Err(invalid("", "tracks", "too many"));
        }
        for (i, track) in self.tracks.iter().enumerate() {
            if track.name.is_empty() || track.name.len() > MAX_NAME_LEN {
                return Err(invalid("", "name", "empty or too long"));
            }
            if self.tracks[..i].iter().any(|t| t.name == track.name) {
                return Err(invalid(&track.name, "name", "listed twice"));
            }
            self.validate_track(track)?;
        }
        if !self
            .tracks
            .iter()
            .any(|t| matches!(t.kind, TrackKind::Video | TrackKind::Audio))
        {
            return Err(CatalogError::NoMediaTrack);
        }
        Ok(())
    }

    fn validate_track(&self, t: &TrackEntry) -> Result<(), CatalogError> {
        let name = t.name.as_str();
        if t.label.as_ref().is_some_and(|l| l.len() > MAX_NAME_LEN) {
            return Err(invalid(name, "label", "too long"));
        }
        if t.jitter_us.is_some_and(|j| j > MAX_JITTER_US) {
            return Err(invalid(name, "jitter", "over a minute"));
        }
        let codec = || match &t.codec {
            None => Err(invalid(name, "codec", "missing")),
            Some(c) if c.is_empty() || c.len() > MAX_NAME_LEN => {
                Err(invalid(name, "codec", "empty or too long"))
            }
            Some(_) => Ok(()),
        };
        match t.kind {
            TrackKind::Video => {
                codec()?;
                // Optional (the stream's SPS says), but never absurd.
                let dimension = |v: Option<u32>| v.is_none_or(|v| v > 0 && v <= MAX_DIMENSION);
                if !dimension(t.width) || !dimension(t.height) {
                    return Err(invalid(name, "width/height", "not in 1..=16384"));
                }
                if let Some([num, den]) = t.framerate {
                    let positive_i32 = |v: u32| v > 0 && i32::try_from(v).is_ok();
                    if !positive_i32(num) || !positive_i32(den) {
                        return Err(invalid(name, "framerate", "not a positive fraction"));
                    }
                }
                // Optional: keyframes carry their parameter sets in-band.
                if t.avcc.is_some() && t.avcc_bytes().is_none_or(|b| b.len() > MAX_CONFIG_LEN) {
                    return Err(invalid(name, "avcc", "not hex or too long"));
                }
                if !t.bitrate.is_none_or(|b| b > 0 && b <= MAX_BITRATE) {
                    return Err(invalid(name, "bitrate", "not in 1..=10^11"));
                }
                if t.alt_group.is_some() && t.bitrate.is_none() {
                    return Err(invalid(name, "bitrate", "missing on an alternate"));
                }
                if let Some(enh) = &t.enhancement
                    && !self.has(enh, TrackKind::VideoEnhancement)
                {
                    return Err(invalid(name, "enhancement", "names no enhancement track"));
                }
            }
            TrackKind::VideoEnhancement => {
                if !t
                    .base
                    .as_ref()
                    .is_some_and(|b| self.has(b, TrackKind::Video))
                {
                    return Err(invalid(name, "base", "names no video track"));
                }
            }
            TrackKind::Audio => {
                codec()?;
                if !t.sample_rate.is_some_and(|r| r > 0 && r <= MAX_SAMPLE_RATE) {
                    return Err(invalid(name, "sample_rate", "missing or out of range"));
                }
                if !t.channels.is_some_and(|c| c > 0 && c <= MAX_CHANNELS) {
                    return Err(invalid(name, "channels", "missing or out of range"));
                }
                if t.config.is_some() && t.config_bytes().is_none_or(|b| b.len() > MAX_CONFIG_LEN) {
                    return Err(invalid(name, "config", "not hex or too long"));
                }
            }
            TrackKind::Other => {}
        }
        Ok(())
    }

    fn has(&self, name: &str, kind: TrackKind) -> bool {
        self.tracks.iter().any(|t| t.name == name && t.kind == kind)
    }

    /// The entry of the track called `name`.
    pub fn track(&self, name: &str) -> Option<&TrackEntry> {
        self.tracks.iter().find(|t| t.name == name)
    }

    /// The video tracks a receiver may play instead of `name`, itself included, in
    /// catalog order: its alternate group, or only itself.
    pub fn alternates(&self, name: &str) -> Vec<&TrackEntry> {
        let Some(track) = self.track(name) else {
            return Vec::new();
        };
        match track.alt_group {
            Some(group) => self
                .tracks_of(TrackKind::Video)
                .filter(|t| t.alt_group == Some(group))
                .collect(),
            None => vec![track],
        }
    }

    /// The tracks of one kind, in catalog order.
    pub fn tracks_of(&self, kind: TrackKind) -> impl Iterator<Item = &TrackEntry> {
        self.tracks.iter().filter(move |t| t.kind == kind)
    }
}

pub fn hex_encode(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn video() -> TrackEntry {
        TrackEntry {
            codec: Some("avc1.64001e".into()),
            width: Some(320),
            height: Some(240),
            framerate: Some([24, 1]),
            avcc: Some(hex_encode(&[1, 0x64, 0, 0x1e, 0xff])),
            enhancement: Some(ENHANCEMENT_TRACK.into()),
            ..TrackEntry::new(BASE_TRACK, TrackKind::Video)
        }
    }

    fn audio() -> TrackEntry {
        TrackEntry {
            codec: Some("opus".into()),
            sample_rate: Some(48_000),
            channels: Some(2),
            config: Some(hex_encode(b"OpusHead\x01\x02\x38\x01\x80\xbb\0\0\0\0\0")),
            ..TrackEntry::new(AUDIO_TRACK, TrackKind::Audio)
        }
    }

    fn sample() -> Catalog {
        Catalog::native(
            "combined",
            1_795_000_000_000,
            vec![
                video(),
                TrackEntry {
                    base: Some(BASE_TRACK.into()),
                    ..TrackEntry::new(ENHANCEMENT_TRACK, TrackKind::VideoEnhancement)
                },
                audio(),
            ],
        )
    }

    #[test]
    fn json_round_trip() {
        let json = sample().to_json();
        let text = std::str::from_utf8(&json).unwrap();
        assert!(text.contains("\"kind\":\"video-enhancement\""), "{text}");
        assert!(!text.contains("sample_rate\":null"), "{text}");
        let back = Catalog::from_json(&json).unwrap();
        assert_eq!(back, sample());
        let v = back.track(BASE_TRACK).unwrap();
        assert_eq!(v.avcc_bytes().unwrap(), [1, 0x64, 0, 0x1e, 0xff]);
        assert_eq!(v.known_codec(), Some(Codec::H264));
        assert_eq!(back.tracks_of(TrackKind::Audio).count(), 1);
        assert_eq!(
            back.track(AUDIO_TRACK).unwrap().known_codec(),
            Some(Codec::Opus)
        );
    }

    #[test]
    fn codec_strings_name_what_the_elements_carry() {
        assert_eq!(Codec::from_codec_string("avc3.42c01f"), Some(Codec::H264));
        assert_eq!(Codec::from_codec_string("mp4a.40.2"), Some(Codec::Aac));
        assert_eq!(Codec::from_codec_string("OPUS"), Some(Codec::Opus));
        assert_eq!(Codec::from_codec_string("vp09.00.10.08"), None);
        assert_eq!(Codec::from_codec_string("mp4a.69"), None);
    }

    #[test]
    fn unknown_kinds_and_codecs_are_kept_but_not_media_of_ours() {
        let mut c = sample();
        c.tracks.push(TrackEntry {
            codec: Some("flac".into()),
            sample_rate: Some(44_100),
            channels: Some(2),
            ..TrackEntry::new("audio-1", TrackKind::Audio)
        });
        let mut json: serde_json::Value = serde_json::from_slice(&c.to_json()).unwrap();
        json["tracks"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"name": "subtitles", "kind": "text", "language": "en"}));
        let back = Catalog::from_json(json.to_string().as_bytes()).unwrap();
        assert_eq!(back.track("subtitles").unwrap().kind, TrackKind::Other);
        assert_eq!(back.track("audio-1").unwrap().known_codec(), None);
    }

    #[test]
    fn bad_catalogs_are_refused() {
        assert!(matches!(
            Catalog::from_json(b"{not json"),
            Err(CatalogError::Json(_))
        ));
        let mut c = sample();
        c.version = 1;
        assert!(matches!(
            Catalog::from_json(&c.to_json()),
            Err(CatalogError::Version(1))
        ));
        let mut c = sample();
        c.tracks
            .retain(|t| !matches!(t.kind, TrackKind::Video | TrackKind::Audio));
        c.tracks[0].base = None;
        c.tracks[0].kind = TrackKind::Other;
        assert!(matches!(
            Catalog::from_json(&c.to_json()),
            Err(CatalogError::NoMediaTrack)
        ));
        // Audio alone is a broadcast.
        let mut c = sample();
        c.tracks.retain(|t| t.kind == TrackKind::Audio);
        assert!(Catalog::from_json(&c.to_json()).is_ok());
    }

    #[test]
    fn renditions_of_one_alternate_group_are_alternates_of_each_other() {
        let rendition = |name: &str, bitrate: u64, alt_group: Option<u32>| TrackEntry {
            bitrate: Some(bitrate),
            alt_group,
            ..TrackEntry {
                name: name.into(),
                enhancement: None,
                ..video()
            }
        };
        let c = Catalog::native(
            "skip-gops",
            1,
            vec![
                rendition("video", 1_200_000, Some(7)),
                audio(),
                rendition("video-1", 250_000, Some(7)),
                rendition("video-2", 600_000, Some(7)),
                rendition("camera-2", 600_000, None),
            ],
        );
        let c = Catalog::from_json(&c.to_json()).unwrap();
        let names =
            |name| -> Vec<&str> { c.alternates(name).iter().map(|t| t.name.as_str()).collect() };
        assert_eq!(names("video-1"), ["video", "video-1", "video-2"]);
        assert_eq!(names("camera-2"), ["camera-2"]);
        assert!(names("nope").is_empty());
        assert_eq!(c.track("video-2").unwrap().bitrate, Some(600_000));
    }

    #[test]
    fn fields_a_receiver_computes_with_are_range_checked() {
        let refused = |edit: fn(&mut Catalog), field: &str| {
            let mut c = sample();
            edit(&mut c);
            match Catalog::from_json(&c.to_json()) {
                Err(CatalogError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        };
        // A zero denominator made moqsrc's caps panic (gst::Fraction::new(n, 0)).
        refused(|c| c.tracks[0].framerate = Some([24, 0]), "framerate");
        refused(|c| c.tracks[0].framerate = Some([0, 1]), "framerate");
        refused(|c| c.tracks[0].framerate = Some([u32::MAX, 1]), "framerate");
        refused(|c| c.tracks[0].width = Some(u32::MAX), "width/height");
        refused(
            |c| c.tracks[0].height = Some(MAX_DIMENSION + 1),
            "width/height",
        );
        refused(|c| c.tracks[0].height = Some(0), "width/height");
        refused(|c| c.tracks[0].avcc = Some("0g".into()), "avcc");
        refused(|c| c.tracks[0].codec = Some("a".repeat(5000)), "codec");
        refused(|c| c.tracks[0].codec = None, "codec");
        refused(
            |c| c.tracks[0].enhancement = Some("nope".into()),
            "enhancement",
        );
        refused(|c| c.tracks[1].base = Some(AUDIO_TRACK.into()), "base");
        refused(|c| c.tracks[0].bitrate = Some(0), "bitrate");
        refused(|c| c.tracks[0].bitrate = Some(u64::MAX), "bitrate");
        refused(|c| c.tracks[0].alt_group = Some(1), "bitrate");
        refused(|c| c.tracks[2].sample_rate = Some(0), "sample_rate");
        refused(|c| c.tracks[2].sample_rate = Some(u32::MAX), "sample_rate");
        refused(|c| c.tracks[2].channels = Some(0), "channels");
        refused(|c| c.tracks[2].channels = None, "channels");
        refused(|c| c.tracks[2].config = Some("xyz".into()), "config");
        refused(|c| c.timescale = 0, "timescale");
        refused(
            |c| {
                c.tracks = (0..100)
                    .map(|i| TrackEntry::new(format!("t{i}"), TrackKind::Other))
                    .collect()
            },
            "tracks",
        );
        refused(|c| c.tracks[0].name.clear(), "name");
        refused(|c| c.tracks[2].name = BASE_TRACK.into(), "name");
        let huge = vec![b' '; MAX_CATALOG_BYTES + 1];
        assert!(matches!(
            Catalog::from_json(&huge),
            Err(CatalogError::TooLarge)
        ));
        // Nesting deeper than the parser allows is an error, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(Catalog::from_json(deep.as_bytes()).is_err());
    }
}
