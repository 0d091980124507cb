//! The catalog track: `Catalog::from_json` never panics, and a catalog it accepts serialises
//! with `to_json` into JSON that parses to an equal catalog. The codec configurations a
//! receiver turns into caps parse without panicking. The same bytes as a hang `catalog.json`
//! never panic either, and what that parser accepts is a valid catalog of ours.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_media::Catalog;
use moq_media::audio::{AacConfig, OpusHead};
use moq_media::catalog::{Codec, TrackKind};
use moq_media::hang;

fuzz_target!(|data: &[u8]| {
    if let Ok(catalog) = hang::catalog_from_json(data) {
        check_readable(&catalog);
        let again = hang::catalog_to_json(&catalog);
        let back = hang::catalog_from_json(&again).unwrap_or_else(|err| {
            panic!(
                "re-serialised hang catalog is refused: {err}\n{}",
                String::from_utf8_lossy(&again)
            )
        });
        assert_eq!(back.tracks.len(), catalog.tracks.len());
    }
    let Ok(catalog) = Catalog::from_json(data) else {
        return;
    };
    check_readable(&catalog);

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

/// What a subscriber reads from an accepted catalog is well-formed where present.
fn check_readable(catalog: &Catalog) {
    for track in catalog.tracks_of(TrackKind::Video) {
        // Hang catalogs carry no avcC (parameter sets travel in-band).
        assert!(track.avcc.is_none() || track.avcc_bytes().is_some());
        assert!(track.width.is_none_or(|w| w > 0) && track.height.is_none_or(|h| h > 0));
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
}
