//! The catalog track: `Catalog::from_json` never panics, and a catalog it accepts serialises
//! with `to_json` into JSON that parses to an equal catalog.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_media::Catalog;
use moq_media::catalog::TrackRole;

fuzz_target!(|data: &[u8]| {
    let Ok(catalog) = Catalog::from_json(data) else {
        return;
    };
    // What a subscriber reads from an accepted catalog must be there.
    assert!(catalog.avcc().is_ok());
    assert!(catalog.track(TrackRole::Base).is_some());

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
