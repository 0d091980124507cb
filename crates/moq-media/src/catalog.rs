//! The `catalog` track: a JSON document that tells a subscriber how to decode the
//! video and which tracks carry it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Name of the catalog track in every namespace.
pub const CATALOG_TRACK: &str = "catalog";
/// Name of the base-layer track (key and reference pictures, plus everything in `baseline`).
pub const BASE_TRACK: &str = "video";
/// Name of the enhancement-layer track (non-reference pictures, one group per frame).
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
/// Longest codec string, track name or delivery name accepted.
const MAX_NAME_LEN: usize = 1024;

/// What a track carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrackRole {
    /// Key and reference pictures; groups are GoPs.
    Base,
    /// Non-reference pictures only; every frame is its own group.
    Enhancement,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackEntry {
    pub name: String,
    pub role: TrackRole,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoInfo {
    /// RFC 6381 codec string, e.g. `avc1.64001e`.
    pub codec: String,
    pub width: u32,
    pub height: u32,
    /// Frame rate as `[numerator, denominator]`, when the sender knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framerate: Option<[u32; 2]>,
    /// AVCDecoderConfigurationRecord (SPS and PPS), hex encoded.
    pub avcc: String,
    /// Frames per GoP, when the sender has observed a regular GoP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gop_frames: Option<u32>,
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
    pub video: VideoInfo,
    pub tracks: Vec<TrackEntry>,
}

#[derive(Debug, Error)]
pub enum CatalogError {
    #[error("catalog is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unsupported catalog version {0}")]
    Version(u32),
    #[error("catalog avcC is not valid hex")]
    Hex,
    #[error("catalog lists no base track")]
    NoBaseTrack,
    #[error("catalog is larger than {MAX_CATALOG_BYTES} bytes")]
    TooLarge,
    #[error("invalid catalog field {field}: {problem}")]
    Invalid {
        field: &'static str,
        problem: &'static str,
    },
}

fn invalid(field: &'static str, problem: &'static str) -> CatalogError {
    CatalogError::Invalid { field, problem }
}

impl Catalog {
    pub const VERSION: u32 = 1;

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

    fn validate(&self) -> Result<(), CatalogError> {
        if self.version != Self::VERSION {
            return Err(CatalogError::Version(self.version));
        }
        if self.timescale != TIMESCALE {
            return Err(invalid(
                "timescale",
                "only microseconds (1000000) are supported",
            ));
        }
        let video = &self.video;
        for (field, text) in [("video.codec", &video.codec), ("delivery", &self.delivery)] {
            if text.len() > MAX_NAME_LEN {
                return Err(invalid(field, "too long"));
            }
        }
        if video.width > MAX_DIMENSION || video.height > MAX_DIMENSION {
            return Err(invalid("video.width/height", "larger than 16384"));
        }
        if let Some([num, den]) = video.framerate {
            let positive_i32 = |v: u32| v > 0 && i32::try_from(v).is_ok();
            if !positive_i32(num) || !positive_i32(den) {
                return Err(invalid("video.framerate", "not a positive fraction"));
            }
        }
        self.avcc()?;
        if self.tracks.len() > MAX_TRACKS {
            return Err(invalid("tracks", "too many"));
        }
        if self
            .tracks
            .iter()
            .any(|t| t.name.is_empty() || t.name.len() > MAX_NAME_LEN)
        {
            return Err(invalid("tracks.name", "empty or too long"));
        }
        self.track(TrackRole::Base)
            .ok_or(CatalogError::NoBaseTrack)?;
        Ok(())
    }

    /// The decoder configuration record as bytes.
    pub fn avcc(&self) -> Result<Vec<u8>, CatalogError> {
        hex_decode(&self.video.avcc).ok_or(CatalogError::Hex)
    }

    /// The name of the track with the given role, if the catalog lists one.
    pub fn track(&self, role: TrackRole) -> Option<&str> {
        self.tracks
            .iter()
            .find(|t| t.role == role)
            .map(|t| t.name.as_str())
    }
}

pub fn hex_encode(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
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

    fn sample() -> Catalog {
        Catalog {
            version: Catalog::VERSION,
            timescale: TIMESCALE,
            delivery: "combined".into(),
            epoch: 1_795_000_000_000,
            video: VideoInfo {
                codec: "avc1.64001e".into(),
                width: 320,
                height: 240,
                framerate: Some([24, 1]),
                avcc: hex_encode(&[1, 0x64, 0, 0x1e, 0xff]),
                gop_frames: None,
            },
            tracks: vec![
                TrackEntry {
                    name: BASE_TRACK.into(),
                    role: TrackRole::Base,
                },
                TrackEntry {
                    name: ENHANCEMENT_TRACK.into(),
                    role: TrackRole::Enhancement,
                },
            ],
        }
    }

    #[test]
    fn json_round_trip() {
        let json = sample().to_json();
        let text = std::str::from_utf8(&json).unwrap();
        assert!(text.contains("\"role\":\"enhancement\""), "{text}");
        assert!(!text.contains("gop_frames"), "{text}");
        let back = Catalog::from_json(&json).unwrap();
        assert_eq!(back, sample());
        assert_eq!(back.avcc().unwrap(), [1, 0x64, 0, 0x1e, 0xff]);
        assert_eq!(back.track(TrackRole::Enhancement), Some(ENHANCEMENT_TRACK));
    }

    #[test]
    fn bad_catalogs_are_refused() {
        assert!(matches!(
            Catalog::from_json(b"{not json"),
            Err(CatalogError::Json(_))
        ));
        let mut c = sample();
        c.version = 9;
        assert!(matches!(
            Catalog::from_json(&c.to_json()),
            Err(CatalogError::Version(9))
        ));
        let mut c = sample();
        c.video.avcc = "0g".into();
        assert!(matches!(
            Catalog::from_json(&c.to_json()),
            Err(CatalogError::Hex)
        ));
        let mut c = sample();
        c.tracks.retain(|t| t.role != TrackRole::Base);
        assert!(matches!(
            Catalog::from_json(&c.to_json()),
            Err(CatalogError::NoBaseTrack)
        ));
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
        refused(|c| c.video.framerate = Some([24, 0]), "video.framerate");
        refused(|c| c.video.framerate = Some([0, 1]), "video.framerate");
        refused(
            |c| c.video.framerate = Some([u32::MAX, 1]),
            "video.framerate",
        );
        refused(|c| c.video.width = u32::MAX, "video.width/height");
        refused(|c| c.video.height = MAX_DIMENSION + 1, "video.width/height");
        refused(|c| c.timescale = 0, "timescale");
        refused(|c| c.video.codec = "a".repeat(5000), "video.codec");
        refused(
            |c| {
                c.tracks = (0..100)
                    .map(|i| TrackEntry {
                        name: format!("t{i}"),
                        role: TrackRole::Base,
                    })
                    .collect()
            },
            "tracks",
        );
        refused(|c| c.tracks[0].name.clear(), "tracks.name");
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
