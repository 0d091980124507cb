//! The catalog track: `Catalog::from_json` never panics, and a catalog it accepts serialises
//! with `to_json` into JSON that parses to an equal catalog. The codec configurations a
//! receiver turns into caps parse without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_media::Catalog;
use moq_media::audio::{AacConfig, OpusHead};
use moq_media::catalog::{Codec, TrackKind};

fuzz_target!(|data: &[u8]| {
    let Ok(catalog) = Catalog::from_json(data) else {
        return;
    };
    // What a subscriber reads from an accepted catalog must be there.
    for track in catalog.tracks_of(TrackKind::Video) {
        assert!(track.avcc_bytes().is_some());
        assert!(track.width.is_some() && track.height.is_some());
    }
    for track in catalog.tracks_of(TrackKind::Audio) {
        assert!(track.sample_rate.is_some() && track.channels.is_some());
        let config = track.config_bytes().unwrap_or_default();
        match track.known_codec() {
            Some(Codec::Opus) => {
                if let Ok(head) = OpusHead::parse(&config) {
                    assert_eq!(OpusHead::parse(&head.to_bytes()), Ok(head));
                }
            }
            Some(Codec::Aac) => {
                let _ = AacConfig::parse(&config);
            }
            _ => {}
        }
    }

    let json = catalog.to_json();
    let back = Catalog::from_json(&json).unwrap_or_else(|err| {
        panic!(
            "re-serialised catalog is refused: {err}\n{}",
            String::from_utf8_lossy(&json)
        )
    });
    assert_eq!(back, catalog);
    assert_eq!(back.to_json(), json);
});
