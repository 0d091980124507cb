//! The public API of the `h264` crate on arbitrary bytes: nothing panics, and the conversions
//! agree with each other.
//!
//! Input: one selector byte, then the bytes under test. Bits 0-1 of the selector choose the
//! NAL length size of the `avc` format: 1, 2 or 4, or (3) the selector shifted right by two,
//! which is mostly an invalid size. Every function runs on the same bytes, read as an access
//! unit in both formats, as an avcC record and as a bare SPS.

#![no_main]

use h264::{
    FrameKind, H264Error, Nal, ParameterSets, StreamFormat, annexb_to_avc, avc_to_annexb, classify,
    nal_type, nal_units, parse_sps,
};
use libfuzzer_sys::fuzz_target;

fn length_size(selector: u8) -> u8 {
    match selector & 0x03 {
        0 => 1,
        1 => 2,
        2 => 4,
        _ => selector >> 2,
    }
}

/// The NAL units of `au`, or the first framing error.
fn nals(au: &[u8], format: StreamFormat) -> Result<Vec<Nal<'_>>, H264Error> {
    nal_units(au, format).collect()
}

/// Walks the NAL units and checks what each one claims about itself.
fn check_nal_units(au: &[u8], format: StreamFormat) {
    let mut errors = 0;
    for item in nal_units(au, format) {
        match item {
            Ok(nal) => {
                assert_eq!(errors, 0, "iteration goes on after an error");
                assert!(!nal.data.is_empty());
                assert_eq!(nal.nal_type, nal.data[0] & 0x1f);
                assert_eq!(nal.ref_idc, (nal.data[0] >> 5) & 0x03);
                let range = au.as_ptr_range();
                assert!(range.contains(&nal.data.as_ptr()), "NAL lies inside the AU");
                assert_eq!(Nal::parse(nal.data), Ok(nal));
            }
            Err(_) => errors += 1,
        }
    }
    assert!(errors <= 1, "at most one error, then the iterator stops");
}

fn check_classify(au: &[u8], format: StreamFormat) {
    let Ok(info) = classify(au, format) else {
        return;
    };
    let nals = nals(au, format).expect("a classified AU has valid framing");
    assert_eq!(
        info.has_sps,
        nals.iter().any(|n| n.nal_type == nal_type::SPS)
    );
    assert_eq!(
        info.has_pps,
        nals.iter().any(|n| n.nal_type == nal_type::PPS)
    );
    // An IDR picture is a keyframe whatever its nal_ref_idc; otherwise nal_ref_idc decides.
    if info.kind != FrameKind::Key {
        assert_eq!(info.kind == FrameKind::NonReference, info.ref_idc == 0);
    }
}

/// The SPS and PPS counts written in an avcC record (none of this is checked: the record
/// came from `ParameterSets::avcc`, which `from_avcc` has just accepted).
fn avcc_counts(avcc: &[u8]) -> (usize, usize) {
    let sps_count = usize::from(avcc[5] & 0x1f);
    let mut at = 6;
    for _ in 0..sps_count {
        at += 2 + usize::from(u16::from_be_bytes([avcc[at], avcc[at + 1]]));
    }
    (sps_count, usize::from(avcc[at]))
}

/// Everything `ParameterSets` hands out, for sets built any way.
fn check_parameter_sets(sets: &ParameterSets) {
    if let Some(info) = sets.sps_info() {
        let codec = info.codec_string();
        assert!(codec.starts_with("avc1.") && codec.len() == 11, "{codec}");
    }
    // Only SPS and PPS, each behind a start code (their bytes may hold anything when the
    // input was length-prefixed, so the prefix need not split back into the same units).
    let prefix = sets.annexb_prefix();
    assert!(prefix.is_empty() || prefix.starts_with(&[0, 0, 0, 1]));
    let avcc = sets.avcc();
    if !sets.is_complete() {
        assert!(avcc.is_empty());
        return;
    }
    assert!(!avcc.is_empty(), "complete sets give an avcC");
    let (back, length_size) = ParameterSets::from_avcc(&avcc).expect("our avcC parses");
    assert_eq!(length_size, 4);
    // The record's counts are 5 and 8 bits wide; below their maximum it carries every set.
    let (sps_count, pps_count) = avcc_counts(&avcc);
    if sps_count < 31 && pps_count < 255 {
        assert_eq!(&back, sets, "avcC round trip");
        assert_eq!(back.avcc(), avcc);
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    let length_size = length_size(selector);
    let avc = StreamFormat::Avc { length_size };

    for format in [StreamFormat::ByteStream, avc] {
        check_nal_units(data, format);
        check_classify(data, format);
        let mut sets = ParameterSets::default();
        if sets.update_from_au(data, format).is_ok() {
            check_parameter_sets(&sets);
        }
    }

    if let Ok((sets, size)) = ParameterSets::from_avcc(data) {
        assert!(matches!(size, 1 | 2 | 4));
        check_parameter_sets(&sets);
    }

    if let Ok(info) = parse_sps(data) {
        assert!(info.sps_id <= 31);
        assert!(info.chroma_format_idc <= 3);
        assert!((8..=14).contains(&info.bit_depth_luma));
        assert!((8..=14).contains(&info.bit_depth_chroma));
        let _ = info.codec_string();
    }

    // avc → Annex B: the same NAL units, now behind start codes.
    if let Ok(annexb) = avc_to_annexb(data, length_size) {
        let from = nals(data, avc).expect("converted AU had valid framing");
        if from.is_empty() {
            assert!(annexb.is_empty());
        } else {
            assert_eq!(
                annexb.len(),
                data.len() + from.len() * (4 - length_size as usize)
            );
        }
    }

    // Annex B → avc → Annex B keeps the NAL units, and both forms classify alike and carry
    // the same parameter sets.
    if let Ok(avc_au) = annexb_to_avc(data, length_size) {
        let original = nals(data, StreamFormat::ByteStream).expect("converted AU parses");
        let converted = nals(&avc_au, avc).expect("converted AU parses as avc");
        assert_eq!(
            original.iter().map(|n| n.data).collect::<Vec<_>>(),
            converted.iter().map(|n| n.data).collect::<Vec<_>>()
        );
        assert_eq!(
            classify(data, StreamFormat::ByteStream),
            classify(&avc_au, avc),
            "classification depends on the framing"
        );
        let mut from_annexb = ParameterSets::default();
        let mut from_avc = ParameterSets::default();
        assert_eq!(
            from_annexb.update_from_au(data, StreamFormat::ByteStream),
            from_avc.update_from_au(&avc_au, avc)
        );
        assert_eq!(from_annexb, from_avc);

        let back = avc_to_annexb(&avc_au, length_size).expect("our avc AU converts back");
        let again = nals(&back, StreamFormat::ByteStream).expect("round trip parses");
        assert_eq!(
            original.iter().map(|n| n.data).collect::<Vec<_>>(),
            again.iter().map(|n| n.data).collect::<Vec<_>>(),
            "Annex B → avc → Annex B round trip"
        );
    }
});
