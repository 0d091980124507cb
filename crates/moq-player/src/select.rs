//! Which of a catalog's tracks to play. Free of GStreamer.

pub use moq_media::catalog::MediaKind;
use moq_media::catalog::{Catalog, Codec, Container, TrackEntry, TrackKind};

/// Why a catalog offers nothing to play as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectError {
    pub reason: String,
    /// A track asked for by name is not in the catalog.
    pub missing: bool,
}

impl std::fmt::Display for SelectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl SelectError {
    fn new(reason: String) -> SelectError {
        SelectError {
            reason,
            missing: false,
        }
    }
}

/// Which track of a kind to play (the `video-track` / `audio-track` properties).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Choice {
    /// The first of the kind with a codec we carry.
    #[default]
    First,
    Named(String),
    /// None of this kind.
    Off,
}

impl Choice {
    /// From a property value: unset → first, `none` → off, anything else a name.
    pub fn from_property(value: Option<&str>) -> Choice {
        match value {
            None | Some("") => Choice::First,
            Some("none") => Choice::Off,
            Some(name) => Choice::Named(name.to_owned()),
        }
    }

    pub fn to_property(&self) -> Option<String> {
        match self {
            Choice::First => None,
            Choice::Named(name) => Some(name.clone()),
            Choice::Off => Some("none".into()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrackPrefs {
    pub video: Choice,
    pub audio: Choice,
}

/// A track to play.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub name: String,
    pub kind: MediaKind,
    pub codec: Codec,
    /// A video track's enhancement layer, in the modes that split layers.
    pub enhancement: Option<String>,
}

/// What [`select`] decided.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    pub tracks: Vec<Selected>,
    /// Media tracks skipped because we do not carry their codec: name and codec.
    pub unplayable: Vec<(String, String)>,
}

/// Picks the tracks `prefs` ask for from `catalog`. A named track that is missing or
/// unplayable, or nothing to play at all, is an error naming what is wrong.
pub fn select(catalog: &Catalog, prefs: &TrackPrefs) -> Result<Selection, SelectError> {
    let mut selection = Selection::default();
    for t in &catalog.tracks {
        if matches!(t.kind, TrackKind::Video | TrackKind::Audio) && t.known_codec().is_none() {
            let mut codec = t.codec.clone().unwrap_or_default();
            if let Container::Unsupported(container) = &t.container {
                codec = format!("{codec} in container {container}");
            }
            selection.unplayable.push((t.name.clone(), codec));
        }
    }
    for (kind, choice) in [
        (MediaKind::Video, &prefs.video),
        (MediaKind::Audio, &prefs.audio),
    ] {
        let playable = |t: &&TrackEntry| t.known_codec().is_some_and(|c| kind.carries(c));
        let entry = match choice {
            Choice::Off => None,
            Choice::First => catalog.tracks_of(kind.track_kind()).find(playable),
            Choice::Named(name) => {
                let entry = catalog
                    .track(name)
                    .filter(|t| t.kind == kind.track_kind())
                    .ok_or_else(|| SelectError {
                        reason: format!("no {} track {name:?} in the catalog", kind.prefix()),
                        missing: true,
                    })?;
                if !playable(&entry) {
                    return Err(SelectError::new(format!(
                        "{} track {name:?} has codec {:?}, which moqsrc does not carry",
                        kind.prefix(),
                        entry.codec.as_deref().unwrap_or("")
                    )));
                }
                Some(entry)
            }
        };
        if let Some(entry) = entry {
            selection.tracks.push(Selected {
                name: entry.name.clone(),
                kind,
                codec: entry.known_codec().unwrap_or(Codec::H264),
                enhancement: entry.enhancement.clone(),
            });
        }
    }
    if selection.tracks.is_empty() {
        return Err(SelectError::new(
            "the catalog has no track moqsrc can play".into(),
        ));
    }
    Ok(selection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_media::catalog;

    fn video(name: &str, codec: &str) -> TrackEntry {
        TrackEntry {
            codec: Some(codec.into()),
            width: Some(320),
            height: Some(240),
            avcc: Some("01".into()),
            ..TrackEntry::new(name, TrackKind::Video)
        }
    }

    fn audio(name: &str, codec: &str) -> TrackEntry {
        TrackEntry {
            codec: Some(codec.into()),
            sample_rate: Some(48_000),
            channels: Some(2),
            ..TrackEntry::new(name, TrackKind::Audio)
        }
    }

    fn catalog(tracks: Vec<TrackEntry>) -> Catalog {
        Catalog::native("skip-gops", 1, tracks)
    }

    fn names(s: &Selection) -> Vec<&str> {
        s.tracks.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn by_default_the_first_playable_video_and_audio() {
        let c = catalog(vec![
            video("vp9", "vp09.00.10.08"),
            video(catalog::BASE_TRACK, "avc1.64001e"),
            audio("flac", "flac"),
            audio(catalog::AUDIO_TRACK, "opus"),
            audio("aac", "mp4a.40.2"),
        ]);
        let s = select(&c, &TrackPrefs::default()).unwrap();
        assert_eq!(names(&s), ["video", "audio"]);
        assert_eq!(s.tracks[1].codec, Codec::Opus);
        assert_eq!(
            s.unplayable,
            [
                ("vp9".to_owned(), "vp09.00.10.08".to_owned()),
                ("flac".to_owned(), "flac".to_owned())
            ]
        );
    }

    #[test]
    fn named_and_disabled_tracks() {
        let c = catalog(vec![
            video(catalog::BASE_TRACK, "avc1.64001e"),
            audio(catalog::AUDIO_TRACK, "opus"),
            audio("aac", "mp4a.40.2"),
            audio("flac", "flac"),
        ]);
        let prefs = TrackPrefs {
            video: Choice::Off,
            audio: Choice::Named("aac".into()),
        };
        let s = select(&c, &prefs).unwrap();
        assert_eq!(names(&s), ["aac"]);
        assert_eq!(s.tracks[0].kind, MediaKind::Audio);
        let missing = TrackPrefs {
            video: Choice::Named("camera".into()),
            ..TrackPrefs::default()
        };
        let err = select(&c, &missing).unwrap_err();
        assert!(err.missing && err.reason.contains("camera"), "{err:?}");
        let wrong_kind = TrackPrefs {
            video: Choice::Named("aac".into()),
            ..TrackPrefs::default()
        };
        assert!(select(&c, &wrong_kind).unwrap_err().missing);
        let unplayable = TrackPrefs {
            audio: Choice::Named("flac".into()),
            ..TrackPrefs::default()
        };
        let err = select(&c, &unplayable).unwrap_err();
        assert!(!err.missing && err.reason.contains("flac"), "{err:?}");
        let nothing = TrackPrefs {
            video: Choice::Off,
            audio: Choice::Off,
        };
        assert!(select(&c, &nothing).is_err());
    }

    #[test]
    fn property_values() {
        assert_eq!(Choice::from_property(None), Choice::First);
        assert_eq!(Choice::from_property(Some("none")), Choice::Off);
        assert_eq!(
            Choice::from_property(Some("video-1")),
            Choice::Named("video-1".into())
        );
        for c in [Choice::First, Choice::Off, Choice::Named("x".into())] {
            assert_eq!(Choice::from_property(c.to_property().as_deref()), c);
        }
    }
}
