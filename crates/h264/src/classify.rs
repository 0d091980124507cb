//! Per-access-unit classification: what a frame is needed for.

use crate::H264Error;
use crate::bits::BitReader;
use crate::nal::{Nal, StreamFormat, nal_type, nal_units};

/// Role of a picture in decoding, which decides its track and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// IDR picture: decoding can start here.
    Key,
    /// Later pictures may predict from this one (`nal_ref_idc != 0`), whatever its slice type.
    Reference,
    /// Nothing predicts from this picture (`nal_ref_idc == 0`); it can be dropped alone.
    NonReference,
}

/// `slice_type` of the first slice of a picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SliceType {
    P,
    B,
    I,
    Sp,
    Si,
}

impl SliceType {
    /// Values 5..=9 repeat 0..=4 with the promise that every slice of the picture has the
    /// same type; the distinction does not matter here.
    pub(crate) fn from_code(code: u32) -> Result<Self, H264Error> {
        Ok(match code {
            0 | 5 => SliceType::P,
            1 | 6 => SliceType::B,
            2 | 7 => SliceType::I,
            3 | 8 => SliceType::Sp,
            4 | 9 => SliceType::Si,
            _ => {
                return Err(H264Error::OutOfRange {
                    field: "slice_type",
                    value: code.into(),
                });
            }
        })
    }
}

/// What [`classify`] learns from one access unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuInfo {
    pub kind: FrameKind,
    pub slice_type: SliceType,
    /// `nal_ref_idc` of the first slice (all slices of a picture agree on zero / non-zero).
    pub ref_idc: u8,
    /// The access unit carries an SPS / a PPS in-band.
    pub has_sps: bool,
    pub has_pps: bool,
}

/// Classifies one access unit.
///
/// Fails on broken framing (see [`nal_units`]), when there is no slice at all, or when the
/// first slice header cannot be read.
pub fn classify(au: &[u8], format: StreamFormat) -> Result<AuInfo, H264Error> {
    let mut first_slice: Option<Nal<'_>> = None;
    let (mut idr, mut has_sps, mut has_pps) = (false, false, false);
    // Walk every NAL unit, not just up to the first slice, so a truncated tail is reported.
    for nal in nal_units(au, format) {
        let nal = nal?;
        match nal.nal_type {
            nal_type::SLICE | nal_type::SLICE_PARTITION_A | nal_type::IDR => {
                idr |= nal.nal_type == nal_type::IDR;
                first_slice.get_or_insert(nal);
            }
            nal_type::SPS => has_sps = true,
            nal_type::PPS => has_pps = true,
            _ => {}
        }
    }
    let slice = first_slice.ok_or(H264Error::NoSlice)?;
    let mut header = BitReader::new(slice.payload());
    header.ue("first_mb_in_slice")?;
    let slice_type = SliceType::from_code(header.ue("slice_type")?)?;
    let kind = if idr {
        FrameKind::Key
    } else if slice.ref_idc != 0 {
        FrameKind::Reference
    } else {
        FrameKind::NonReference
    };
    Ok(AuInfo {
        kind,
        slice_type,
        ref_idc: slice.ref_idc,
        has_sps,
        has_pps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{SpsSpec, annex_b, length_prefixed, pps, slice};

    const BS: StreamFormat = StreamFormat::ByteStream;

    #[test]
    fn keyframe_with_parameter_sets() {
        let au = annex_b(&[
            &[0x09, 0x10],
            &SpsSpec::hd().nal(),
            &pps(0, 0),
            &slice(3, 5, 0, 7),
        ]);
        let info = classify(&au, BS).unwrap();
        assert_eq!(
            info,
            AuInfo {
                kind: FrameKind::Key,
                slice_type: SliceType::I,
                ref_idc: 3,
                has_sps: true,
                has_pps: true,
            }
        );
        let avc = length_prefixed(&[&slice(3, 5, 0, 2)], 4);
        let info = classify(&avc, StreamFormat::Avc { length_size: 4 }).unwrap();
        assert_eq!(
            (info.kind, info.has_sps, info.has_pps),
            (FrameKind::Key, false, false)
        );
    }

    #[test]
    fn reference_follows_nal_ref_idc_not_slice_type() {
        let kind = |ref_idc, slice_type| {
            let info = classify(&annex_b(&[&slice(ref_idc, 1, 0, slice_type)]), BS).unwrap();
            (info.kind, info.slice_type)
        };
        assert_eq!(kind(2, 0), (FrameKind::Reference, SliceType::P));
        assert_eq!(kind(1, 6), (FrameKind::Reference, SliceType::B));
        assert_eq!(kind(0, 1), (FrameKind::NonReference, SliceType::B));
        assert_eq!(kind(0, 5), (FrameKind::NonReference, SliceType::P));
        assert_eq!(kind(2, 2), (FrameKind::Reference, SliceType::I));
        assert_eq!(kind(2, 8), (FrameKind::Reference, SliceType::Sp));
        assert_eq!(kind(2, 4), (FrameKind::Reference, SliceType::Si));
        assert_eq!(kind(2, 9), (FrameKind::Reference, SliceType::Si));
    }

    #[test]
    fn first_slice_decides_type_and_idr_anywhere_makes_key() {
        let au = annex_b(&[&[0x06, 0x05, 0x80], &slice(2, 1, 0, 1), &slice(2, 1, 40, 0)]);
        assert_eq!(classify(&au, BS).unwrap().slice_type, SliceType::B);
        let partition_a = annex_b(&[&slice(0, 2, 0, 6)]);
        assert_eq!(
            classify(&partition_a, BS).unwrap().kind,
            FrameKind::NonReference
        );
    }

    #[test]
    fn escaped_slice_header() {
        // first_mb_in_slice = 2^23 - 1 codes as 23 zero bits, a one and 23 zero bits, which
        // needs two emulation-prevention bytes before slice_type is reached.
        let nal = slice(0, 1, (1 << 23) - 1, 1);
        assert_eq!(&nal[1..5], [0x00, 0x00, 0x03, 0x01]);
        assert_eq!(nal.iter().filter(|&&b| b == 3).count(), 2);
        let info = classify(&annex_b(&[&nal]), BS).unwrap();
        assert_eq!(
            (info.kind, info.slice_type),
            (FrameKind::NonReference, SliceType::B)
        );
    }

    #[test]
    fn malformed_access_units() {
        let sets = annex_b(&[&SpsSpec::hd().nal(), &pps(0, 0)]);
        assert_eq!(classify(&sets, BS), Err(H264Error::NoSlice));
        assert_eq!(classify(&[], BS), Err(H264Error::EmptyAccessUnit));
        assert_eq!(
            classify(&annex_b(&[&[0x65]]), BS),
            Err(H264Error::EndOfData("first_mb_in_slice"))
        );
        assert_eq!(
            classify(&annex_b(&[&[0x41, 0x80]]), BS),
            Err(H264Error::EndOfData("slice_type"))
        );
        assert_eq!(
            classify(&annex_b(&[&slice(2, 1, 0, 10)]), BS),
            Err(H264Error::OutOfRange {
                field: "slice_type",
                value: 10
            })
        );
        assert_eq!(
            classify(&annex_b(&[&[0x41, 0, 0, 0, 0, 0x80]]), BS),
            Err(H264Error::ExpGolombOverflow("first_mb_in_slice"))
        );
        // A good slice followed by a cut-off NAL unit is still an error.
        let mut au = length_prefixed(&[&slice(2, 1, 0, 0)], 4);
        au.extend_from_slice(&[0, 0, 0, 9, 0x06]);
        assert!(matches!(
            classify(&au, StreamFormat::Avc { length_size: 4 }),
            Err(H264Error::NalOverrun { .. })
        ));
    }
}
