//! The per-frame header at the start of every video object: `FrameHeader::decode` never panics,
//! and what it accepts encodes to bytes that decode to the same header. The same bytes as a
//! hang `legacy` frame (timestamp prefix, then the frame) never panic the hang reader.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_media::FrameHeader;
use moq_media::hang::{self, HangReader};

/// A hang catalog with an avc3 video and an Opus track, as moq-gst writes it.
const HANG_CATALOG: &str = r#"{"video":{"renditions":{"v":{"codec":"avc3.42c01f","codedWidth":320,"codedHeight":240,"framerate":24.0,"container":{"kind":"legacy"}}}},"audio":{"renditions":{"a":{"codec":"opus","sampleRate":48000,"numberOfChannels":2,"container":{"kind":"legacy"}}}},"clock":{"wall":1000,"timescale":1000000}}"#;

fuzz_target!(|data: &[u8]| {
    read_as_hang(data);
    let Ok((header, au)) = FrameHeader::decode(data) else {
        return;
    };
    // The access unit is exactly what follows the header.
    assert!(data.ends_with(au));
    let header_len = data.len() - au.len();

    let mut again = Vec::new();
    header.encode(&mut again);
    assert!(
        again.len() <= header_len,
        "re-encode is longer than the input"
    );
    again.extend_from_slice(au);
    let (back, rest) = FrameHeader::decode(&again).expect("re-encoded header decodes");
    assert_eq!(back, header);
    assert_eq!(rest, au);
});

/// The first two bytes pick the group and object, the rest is the payload.
fn read_as_hang(data: &[u8]) {
    let [group, object, payload @ ..] = data else {
        return;
    };
    let catalog = hang::catalog_from_json(HANG_CATALOG.as_bytes()).expect("valid catalog");
    for track in &catalog.tracks {
        let mut reader = HangReader::new(&catalog, track);
        for g in [u64::from(*group), u64::MAX - u64::from(*group)] {
            if let Ok(Some(frame)) = reader.frame(g, u64::from(*object), payload) {
                assert!(frame.offset <= payload.len());
            }
            reader.group_ended(g);
        }
    }
}
