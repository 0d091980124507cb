//! The per-frame header at the start of every video object: `FrameHeader::decode` never panics,
//! and what it accepts encodes to bytes that decode to the same header.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_media::FrameHeader;

fuzz_target!(|data: &[u8]| {
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
