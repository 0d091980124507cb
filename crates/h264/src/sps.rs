//! The part of the sequence parameter set a catalog needs.

use crate::H264Error;
use crate::bits::BitReader;
use crate::nal::{Nal, nal_type};

/// Facts from an SPS: identity, profile/level and the displayed picture size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpsInfo {
    pub sps_id: u8,
    pub profile_idc: u8,
    /// The byte after `profile_idc`: constraint_set0..5 flags and two reserved bits.
    pub constraint_flags: u8,
    pub level_idc: u8,
    /// 0 = monochrome, 1 = 4:2:0, 2 = 4:2:2, 3 = 4:4:4.
    pub chroma_format_idc: u8,
    pub bit_depth_luma: u8,
    pub bit_depth_chroma: u8,
    /// Size after frame cropping, in luma samples.
    pub width: u32,
    pub height: u32,
}

impl SpsInfo {
    /// RFC 6381 `codecs` value, `avc1.PPCCLL` in lower-case hex.
    pub fn codec_string(&self) -> String {
        format!(
            "avc1.{:02x}{:02x}{:02x}",
            self.profile_idc, self.constraint_flags, self.level_idc
        )
    }
}

/// Profiles whose SPS carries chroma format, bit depths and scaling matrices.
pub(crate) fn has_chroma_info(profile_idc: u8) -> bool {
    matches!(
        profile_idc,
        100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135
    )
}

/// Parses an SPS NAL unit (header byte included, emulation prevention still in place).
/// VUI and everything after the cropping window is not read.
pub fn parse_sps(nal: &[u8]) -> Result<SpsInfo, H264Error> {
    let nal = Nal::parse(nal)?;
    if nal.nal_type != nal_type::SPS {
        return Err(H264Error::UnexpectedNalType {
            expected: nal_type::SPS,
            found: nal.nal_type,
        });
    }
    let mut r = BitReader::new(nal.payload());
    let profile_idc = r.bits(8, "profile_idc")? as u8;
    let constraint_flags = r.bits(8, "constraint flags")? as u8;
    let level_idc = r.bits(8, "level_idc")? as u8;
    let sps_id = r.ue_max(31, "seq_parameter_set_id")? as u8;

    let (mut chroma_format_idc, mut separate_colour_plane) = (1, false);
    let (mut bit_depth_luma, mut bit_depth_chroma) = (8, 8);
    if has_chroma_info(profile_idc) {
        chroma_format_idc = r.ue_max(3, "chroma_format_idc")? as u8;
        if chroma_format_idc == 3 {
            separate_colour_plane = r.bit("separate_colour_plane_flag")?;
        }
        bit_depth_luma = 8 + r.ue_max(6, "bit_depth_luma_minus8")? as u8;
        bit_depth_chroma = 8 + r.ue_max(6, "bit_depth_chroma_minus8")? as u8;
        r.bit("qpprime_y_zero_transform_bypass_flag")?;
        if r.bit("seq_scaling_matrix_present_flag")? {
            let lists = if chroma_format_idc == 3 { 12 } else { 8 };
            for i in 0..lists {
                if r.bit("seq_scaling_list_present_flag")? {
                    skip_scaling_list(&mut r, if i < 6 { 16 } else { 64 })?;
                }
            }
        }
    }

    r.ue_max(12, "log2_max_frame_num_minus4")?;
    match r.ue_max(2, "pic_order_cnt_type")? {
        0 => {
            r.ue_max(12, "log2_max_pic_order_cnt_lsb_minus4")?;
        }
        1 => {
            r.bit("delta_pic_order_always_zero_flag")?;
            r.se("offset_for_non_ref_pic")?;
            r.se("offset_for_top_to_bottom_field")?;
            let cycle = r.ue_max(255, "num_ref_frames_in_pic_order_cnt_cycle")?;
            for _ in 0..cycle {
                r.se("offset_for_ref_frame")?;
            }
        }
        _ => {}
    }
    r.ue("max_num_ref_frames")?;
    r.bit("gaps_in_frame_num_value_allowed_flag")?;
    let width_mbs = u64::from(r.ue("pic_width_in_mbs_minus1")?) + 1;
    let height_map_units = u64::from(r.ue("pic_height_in_map_units_minus1")?) + 1;
    let frame_mbs_only = r.bit("frame_mbs_only_flag")?;
    if !frame_mbs_only {
        r.bit("mb_adaptive_frame_field_flag")?;
    }
    r.bit("direct_8x8_inference_flag")?;
    let [mut left, mut right, mut top, mut bottom] = [0u64; 4];
    if r.bit("frame_cropping_flag")? {
        left = r.ue("frame_crop_left_offset")?.into();
        right = r.ue("frame_crop_right_offset")?.into();
        top = r.ue("frame_crop_top_offset")?.into();
        bottom = r.ue("frame_crop_bottom_offset")?.into();
    }

    // Field-coded streams count map units in field pairs, and crop offsets are in chroma
    // sample units (7.4.2.1.1, equations 7-19 to 7-22).
    let field_factor: u64 = if frame_mbs_only { 1 } else { 2 };
    let (crop_x, crop_y) = match (separate_colour_plane, chroma_format_idc) {
        (true, _) | (false, 0) => (1, field_factor),
        (false, 1) => (2, 2 * field_factor),
        (false, 2) => (2, field_factor),
        (false, _) => (1, field_factor),
    };
    let width = cropped("width", width_mbs * 16, crop_x * (left + right))?;
    let height = cropped(
        "height",
        field_factor * height_map_units * 16,
        crop_y * (top + bottom),
    )?;

    Ok(SpsInfo {
        sps_id,
        profile_idc,
        constraint_flags,
        level_idc,
        chroma_format_idc,
        bit_depth_luma,
        bit_depth_chroma,
        width,
        height,
    })
}

/// Coded size minus cropping, as long as something is left and it fits a u32.
fn cropped(field: &'static str, coded: u64, crop: u64) -> Result<u32, H264Error> {
    coded
        .checked_sub(crop)
        .filter(|&size| size > 0)
        .and_then(|size| u32::try_from(size).ok())
        .ok_or(H264Error::OutOfRange {
            field,
            value: coded,
        })
}

/// Reads past one scaling_list(); its values are not needed, only its length in bits.
fn skip_scaling_list(r: &mut BitReader<'_>, size: usize) -> Result<(), H264Error> {
    let (mut last, mut next) = (8i32, 8i32);
    for _ in 0..size {
        if next != 0 {
            let delta = r.se("delta_scale")?;
            if !(-128..=127).contains(&delta) {
                return Err(H264Error::OutOfRange {
                    field: "delta_scale",
                    value: u64::from(delta.unsigned_abs()),
                });
            }
            next = (last + delta + 256) % 256;
        }
        if next != 0 {
            last = next;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{SpsSpec, nal};

    fn size(spec: &SpsSpec) -> (u32, u32) {
        let info = parse_sps(&spec.nal()).unwrap();
        (info.width, info.height)
    }

    #[test]
    fn high_profile_1080p() {
        let info = parse_sps(&SpsSpec::hd().nal()).unwrap();
        assert_eq!(
            info,
            SpsInfo {
                sps_id: 0,
                profile_idc: 100,
                constraint_flags: 0,
                level_idc: 40,
                chroma_format_idc: 1,
                bit_depth_luma: 8,
                bit_depth_chroma: 8,
                width: 1920,
                height: 1080,
            }
        );
        assert_eq!(info.codec_string(), "avc1.640028");
    }

    #[test]
    fn baseline_without_chroma_fields() {
        let spec = SpsSpec {
            profile_idc: 66,
            constraint_flags: 0xc0,
            level_idc: 30,
            sps_id: 5,
            poc_type: 2,
            width_mbs: 40,
            height_map_units: 30,
            crop: None,
            // Not written for Baseline: the parser must assume 4:2:0.
            chroma_format_idc: 3,
            ..SpsSpec::hd()
        };
        let info = parse_sps(&spec.nal()).unwrap();
        assert_eq!((info.sps_id, info.chroma_format_idc), (5, 1));
        assert_eq!((info.width, info.height), (640, 480));
        assert_eq!(info.codec_string(), "avc1.42c01e");
        // The doc example's hand-assembled SPS.
        assert_eq!(spec_doc_sps(), [0x67, 0x42, 0xc0, 0x0a, 0xda, 0x79]);
    }

    fn spec_doc_sps() -> Vec<u8> {
        SpsSpec {
            profile_idc: 66,
            constraint_flags: 0xc0,
            level_idc: 10,
            poc_type: 2,
            width_mbs: 1,
            height_map_units: 1,
            crop: None,
            ..SpsSpec::hd()
        }
        .nal()
    }

    #[test]
    fn crop_units_follow_chroma_format_and_field_coding() {
        // 4:2:0 frames crop 2x2, 4:2:2 crops 2x1, 4:4:4 1x1; field coding doubles the
        // vertical unit and the map-unit height.
        let base = SpsSpec {
            width_mbs: 20,
            height_map_units: 15,
            crop: Some([1, 2, 1, 1]),
            ..SpsSpec::hd()
        };
        assert_eq!(size(&base), (320 - 6, 240 - 4));
        let s422 = SpsSpec {
            profile_idc: 122,
            chroma_format_idc: 2,
            ..base.clone()
        };
        assert_eq!(size(&s422), (320 - 6, 240 - 2));
        let s444 = SpsSpec {
            profile_idc: 244,
            chroma_format_idc: 3,
            ..base.clone()
        };
        assert_eq!(size(&s444), (320 - 3, 240 - 2));
        let planes = SpsSpec {
            separate_colour_plane: true,
            ..s444.clone()
        };
        assert_eq!(size(&planes), (320 - 3, 240 - 2));
        let mono = SpsSpec {
            chroma_format_idc: 0,
            ..base.clone()
        };
        assert_eq!(size(&mono), (320 - 3, 240 - 2));
        let fields = SpsSpec {
            frame_mbs_only: false,
            height_map_units: 8,
            ..base.clone()
        };
        assert_eq!(size(&fields), (320 - 6, 256 - 8));
        let fields_mono = SpsSpec {
            chroma_format_idc: 0,
            ..fields
        };
        assert_eq!(size(&fields_mono), (320 - 3, 256 - 4));
    }

    #[test]
    fn scaling_lists_and_poc_type_1_are_skipped() {
        // List 0: "use default" (first delta makes nextScale 0); list 1: sixteen explicit
        // entries; list 6: 64 entries; list 7: constant after the third entry.
        let mut lists = vec![Vec::new(); 8];
        lists[0] = vec![-8];
        lists[1] = (0..16).map(|i| if i % 2 == 0 { 3 } else { -3 }).collect();
        lists[6] = vec![1; 64];
        lists[7] = vec![4, 4, -16];
        let spec = SpsSpec {
            scaling_lists: lists,
            poc_type: 1,
            bit_depth_minus8: 2,
            ..SpsSpec::hd()
        };
        let info = parse_sps(&spec.nal()).unwrap();
        assert_eq!((info.width, info.height), (1920, 1080));
        assert_eq!((info.bit_depth_luma, info.bit_depth_chroma), (10, 10));

        let mut lists = vec![Vec::new(); 12];
        lists[11] = vec![127, -128, -7];
        let spec = SpsSpec {
            profile_idc: 244,
            chroma_format_idc: 3,
            scaling_lists: lists,
            ..SpsSpec::hd()
        };
        assert_eq!(size(&spec), (1920, 1084));
    }

    #[test]
    fn escaped_sps() {
        // A huge width codes as long zero runs, which need emulation prevention.
        let spec = SpsSpec {
            width_mbs: 1 << 20,
            crop: None,
            ..SpsSpec::hd()
        };
        let escaped = spec.nal();
        assert!(
            escaped.len() > spec.rbsp().len() + 1,
            "test SPS needs an escape"
        );
        assert_eq!(size(&spec), (1 << 24, 1088));
    }

    #[test]
    fn rejects_bad_sps() {
        assert_eq!(
            parse_sps(&[0x68, 0xce, 0x38, 0x80]),
            Err(H264Error::UnexpectedNalType {
                expected: 7,
                found: 8
            })
        );
        assert_eq!(parse_sps(&[]), Err(H264Error::EmptyNal { offset: 0 }));
        let full = SpsSpec::hd().nal();
        for len in 1..full.len() - 1 {
            assert!(parse_sps(&full[..len]).is_err(), "truncated to {len} bytes");
        }
        let too_much_crop = SpsSpec {
            crop: Some([0, 0, 0, 544]),
            ..SpsSpec::hd()
        };
        assert_eq!(
            parse_sps(&too_much_crop.nal()),
            Err(H264Error::OutOfRange {
                field: "height",
                value: 1088
            })
        );
        let chroma = SpsSpec {
            chroma_format_idc: 4,
            ..SpsSpec::hd()
        };
        assert!(matches!(
            parse_sps(&chroma.nal()),
            Err(H264Error::OutOfRange {
                field: "chroma_format_idc",
                ..
            })
        ));
        let bad_delta = SpsSpec {
            scaling_lists: vec![
                vec![200],
                vec![],
                vec![],
                vec![],
                vec![],
                vec![],
                vec![],
                vec![],
            ],
            ..SpsSpec::hd()
        };
        assert!(matches!(
            parse_sps(&bad_delta.nal()),
            Err(H264Error::OutOfRange {
                field: "delta_scale",
                ..
            })
        ));
        // 32 leading zeros where seq_parameter_set_id starts.
        let overflow = nal(3, 7, &[100, 0, 40, 0, 0, 0, 0, 0x80]);
        assert_eq!(
            parse_sps(&overflow),
            Err(H264Error::ExpGolombOverflow("seq_parameter_set_id"))
        );
    }
}
