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
///
/// This is a lenient reader of facts for a catalog: it does not check that the SPS is one a
/// decoder would accept. [`Sps::parse`] does.
pub fn parse_sps(nal: &[u8]) -> Result<SpsInfo, H264Error> {
    Ok(read_sps(nal)?.0.info)
}

/// A sequence parameter set that passed [`Sps::parse`]'s checks, with the fields PPS and
/// slice-header parsing depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sps {
    info: SpsInfo,
    separate_colour_plane: bool,
    log2_max_frame_num: u8,
    pic_order_cnt_type: u8,
    log2_max_poc_lsb: u8,
    delta_pic_order_always_zero: bool,
    max_num_ref_frames: u32,
    width_mbs: u32,
    height_map_units: u32,
    frame_mbs_only: bool,
    mb_adaptive_frame_field: bool,
}

/// `profile_idc` values an SPS NAL unit (type 7) may carry. The SVC and MVC profiles live
/// in subset SPS units only; 144 (the withdrawn High 4:4:4) no decoder expects any more.
const KNOWN_PROFILES: [u8; 8] = [66, 77, 88, 100, 110, 122, 244, 44];

/// `level_idc` values of the levels H.264 defines (9 is level 1b as High profiles write it;
/// the others write 11 with constraint_set3).
const KNOWN_LEVELS: [u8; 20] = [
    9, 10, 11, 12, 13, 20, 21, 22, 30, 31, 32, 40, 41, 42, 50, 51, 52, 60, 61, 62,
];

/// Frame size in macroblocks of the largest level (6.2); each side is at most
/// sqrt(8 · MaxFS) macroblocks.
const MAX_FRAME_MBS: u64 = 139_264;
const MAX_SIDE_MBS: u64 = 1_055;

/// Largest decoded picture buffer of any level, in frames.
const MAX_DPB_FRAMES: u32 = 16;

impl Sps {
    /// Parses and validates an SPS NAL unit (header byte included, emulation prevention
    /// still in place), VUI and rbsp_trailing_bits included.
    ///
    /// Rejects what a decoder would reject and what no encoder writes: unknown profiles and
    /// levels, fields out of their ranges, pictures larger than the largest level allows,
    /// cropping that leaves nothing, and any bits after the syntax ends. One SPS that only
    /// looks plausible is enough to make every later joiner fail, so strictness is the point.
    pub fn parse(nal: &[u8]) -> Result<Sps, H264Error> {
        let (sps, mut r) = read_sps(nal)?;
        let info = &sps.info;
        if !KNOWN_PROFILES.contains(&info.profile_idc) {
            return Err(out_of_range("profile_idc", info.profile_idc.into()));
        }
        if !KNOWN_LEVELS.contains(&info.level_idc) {
            return Err(out_of_range("level_idc", info.level_idc.into()));
        }
        if sps.max_num_ref_frames > MAX_DPB_FRAMES {
            return Err(out_of_range(
                "max_num_ref_frames",
                sps.max_num_ref_frames.into(),
            ));
        }
        let width = u64::from(sps.width_mbs);
        let height = u64::from(sps.height_map_units) * if sps.frame_mbs_only { 1 } else { 2 };
        if width > MAX_SIDE_MBS {
            return Err(out_of_range("pic_width_in_mbs_minus1", width - 1));
        }
        if height > MAX_SIDE_MBS || width * height > MAX_FRAME_MBS {
            return Err(out_of_range("pic_height_in_map_units_minus1", height - 1));
        }
        if r.bit("vui_parameters_present_flag")? {
            read_vui(&mut r)?;
        }
        r.finish("SPS")?;
        Ok(sps)
    }

    pub fn info(&self) -> SpsInfo {
        self.info
    }

    pub fn sps_id(&self) -> u8 {
        self.info.sps_id
    }

    /// Bits of `frame_num` in slice headers.
    pub fn log2_max_frame_num(&self) -> u8 {
        self.log2_max_frame_num
    }

    pub fn pic_width_in_mbs(&self) -> u32 {
        self.width_mbs
    }

    /// Height of a frame in macroblocks (twice the map units for field-capable streams).
    pub fn frame_height_in_mbs(&self) -> u32 {
        if self.frame_mbs_only {
            self.height_map_units
        } else {
            2 * self.height_map_units
        }
    }

    /// `PicSizeInMapUnits`, what slice groups count in.
    pub(crate) fn pic_size_in_map_units(&self) -> u32 {
        self.width_mbs * self.height_map_units
    }

    /// `ChromaArrayType`: 0 when there are no chroma arrays to weight.
    pub(crate) fn chroma_array_type(&self) -> u8 {
        if self.separate_colour_plane {
            0
        } else {
            self.info.chroma_format_idc
        }
    }

    pub(crate) fn separate_colour_plane(&self) -> bool {
        self.separate_colour_plane
    }

    pub(crate) fn pic_order_cnt_type(&self) -> u8 {
        self.pic_order_cnt_type
    }

    pub(crate) fn log2_max_poc_lsb(&self) -> u8 {
        self.log2_max_poc_lsb
    }

    pub(crate) fn delta_pic_order_always_zero(&self) -> bool {
        self.delta_pic_order_always_zero
    }

    pub(crate) fn frame_mbs_only(&self) -> bool {
        self.frame_mbs_only
    }

    pub(crate) fn mb_adaptive_frame_field(&self) -> bool {
        self.mb_adaptive_frame_field
    }

    /// `QpBdOffsetY`: how far below zero luma QPs may go at this bit depth.
    pub(crate) fn qp_bd_offset_luma(&self) -> i32 {
        6 * (i32::from(self.info.bit_depth_luma) - 8)
    }
}

fn out_of_range(field: &'static str, value: u64) -> H264Error {
    H264Error::OutOfRange { field, value }
}

/// Reads an SPS up to and including the cropping window, with the range checks every
/// reader needs to walk the syntax safely. Returns the reader positioned at
/// vui_parameters_present_flag.
fn read_sps(nal: &[u8]) -> Result<(Sps, BitReader<'_>), H264Error> {
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

    let log2_max_frame_num = 4 + r.ue_max(12, "log2_max_frame_num_minus4")? as u8;
    let pic_order_cnt_type = r.ue_max(2, "pic_order_cnt_type")? as u8;
    let (mut log2_max_poc_lsb, mut delta_pic_order_always_zero) = (0, false);
    match pic_order_cnt_type {
        0 => {
            log2_max_poc_lsb = 4 + r.ue_max(12, "log2_max_pic_order_cnt_lsb_minus4")? as u8;
        }
        1 => {
            delta_pic_order_always_zero = r.bit("delta_pic_order_always_zero_flag")?;
            r.se("offset_for_non_ref_pic")?;
            r.se("offset_for_top_to_bottom_field")?;
            let cycle = r.ue_max(255, "num_ref_frames_in_pic_order_cnt_cycle")?;
            for _ in 0..cycle {
                r.se("offset_for_ref_frame")?;
            }
        }
        _ => {}
    }
    let max_num_ref_frames = r.ue("max_num_ref_frames")?;
    r.bit("gaps_in_frame_num_value_allowed_flag")?;
    let width_mbs = u64::from(r.ue("pic_width_in_mbs_minus1")?) + 1;
    let height_map_units = u64::from(r.ue("pic_height_in_map_units_minus1")?) + 1;
    let frame_mbs_only = r.bit("frame_mbs_only_flag")?;
    let mut mb_adaptive_frame_field = false;
    if !frame_mbs_only {
        mb_adaptive_frame_field = r.bit("mb_adaptive_frame_field_flag")?;
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

    let sps = Sps {
        info: SpsInfo {
            sps_id,
            profile_idc,
            constraint_flags,
            level_idc,
            chroma_format_idc,
            bit_depth_luma,
            bit_depth_chroma,
            width,
            height,
        },
        separate_colour_plane,
        log2_max_frame_num,
        pic_order_cnt_type,
        log2_max_poc_lsb,
        delta_pic_order_always_zero,
        max_num_ref_frames,
        // ue(v) + 1 ≤ 2^32 - 1, so these fit.
        width_mbs: width_mbs as u32,
        height_map_units: height_map_units as u32,
        frame_mbs_only,
        mb_adaptive_frame_field,
    };
    Ok((sps, r))
}

/// vui_parameters(): nothing in it is needed, but walking it is the only way to find where
/// the SPS ends, and its ranges catch corruption past the fields we use.
fn read_vui(r: &mut BitReader<'_>) -> Result<(), H264Error> {
    if r.bit("aspect_ratio_info_present_flag")? && r.bits(8, "aspect_ratio_idc")? == 255 {
        r.bits(16, "sar_width")?;
        r.bits(16, "sar_height")?;
    }
    if r.bit("overscan_info_present_flag")? {
        r.bit("overscan_appropriate_flag")?;
    }
    if r.bit("video_signal_type_present_flag")? {
        r.bits(3, "video_format")?;
        r.bit("video_full_range_flag")?;
        if r.bit("colour_description_present_flag")? {
            r.bits(24, "colour description")?;
        }
    }
    if r.bit("chroma_loc_info_present_flag")? {
        r.ue_max(5, "chroma_sample_loc_type_top_field")?;
        r.ue_max(5, "chroma_sample_loc_type_bottom_field")?;
    }
    if r.bit("timing_info_present_flag")? {
        r.bits(32, "num_units_in_tick")?;
        r.bits(32, "time_scale")?;
        r.bit("fixed_frame_rate_flag")?;
    }
    let nal_hrd = r.bit("nal_hrd_parameters_present_flag")?;
    if nal_hrd {
        read_hrd(r)?;
    }
    let vcl_hrd = r.bit("vcl_hrd_parameters_present_flag")?;
    if vcl_hrd {
        read_hrd(r)?;
    }
    if nal_hrd || vcl_hrd {
        r.bit("low_delay_hrd_flag")?;
    }
    r.bit("pic_struct_present_flag")?;
    if r.bit("bitstream_restriction_flag")? {
        r.bit("motion_vectors_over_pic_boundaries_flag")?;
        r.ue_max(16, "max_bytes_per_pic_denom")?;
        r.ue_max(16, "max_bits_per_mb_denom")?;
        r.ue_max(16, "log2_max_mv_length_horizontal")?;
        r.ue_max(16, "log2_max_mv_length_vertical")?;
        // Each at most the largest DPB. How they relate to each other and to
        // max_num_ref_frames is not checked: decoders cope with encoders that get it wrong,
        // and refusing a whole stream for it would do more harm than the error.
        r.ue_max(MAX_DPB_FRAMES, "max_num_reorder_frames")?;
        r.ue_max(MAX_DPB_FRAMES, "max_dec_frame_buffering")?;
    }
    Ok(())
}

/// hrd_parameters(): read for its length and ranges only.
fn read_hrd(r: &mut BitReader<'_>) -> Result<(), H264Error> {
    let cpb_count = r.ue_max(31, "cpb_cnt_minus1")? + 1;
    r.bits(4, "bit_rate_scale")?;
    r.bits(4, "cpb_size_scale")?;
    for _ in 0..cpb_count {
        r.ue("bit_rate_value_minus1")?;
        r.ue("cpb_size_value_minus1")?;
        r.bit("cbr_flag")?;
    }
    // initial_cpb_removal_delay_length_minus1, cpb_removal_delay_length_minus1,
    // dpb_output_delay_length_minus1, time_offset_length: 5 bits each.
    r.bits(20, "hrd delay lengths")?;
    Ok(())
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
pub(crate) fn skip_scaling_list(r: &mut BitReader<'_>, size: usize) -> Result<(), H264Error> {
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

    /// The SPS from the issue that broke late joiners: Baseline, level_idc 80 (no such
    /// level), sps_id 1, a 16x32 field-coded picture and a VUI of noise.
    pub(crate) const BOGUS_SPS: [u8; 12] = [
        0x67, 0x42, 0x12, 0x50, 0x42, 0x7f, 0x36, 0xef, 0xd0, 0x62, 0x72, 0x40,
    ];

    #[test]
    fn strict_parse_accepts_what_encoders_write() {
        let variants = [
            SpsSpec::hd(),
            SpsSpec {
                vui: Some((2, 4)),
                max_num_ref_frames: 4,
                ..SpsSpec::hd()
            },
            SpsSpec {
                vui: Some((0, 1)),
                hrd: true,
                ..SpsSpec::hd()
            },
            SpsSpec {
                profile_idc: 66,
                poc_type: 2,
                width_mbs: 1,
                height_map_units: 1,
                crop: None,
                ..SpsSpec::hd()
            },
            SpsSpec {
                poc_type: 1,
                frame_mbs_only: false,
                height_map_units: 34,
                log2_max_frame_num_minus4: 12,
                ..SpsSpec::hd()
            },
            SpsSpec {
                profile_idc: 244,
                chroma_format_idc: 3,
                separate_colour_plane: true,
                bit_depth_minus8: 6,
                ..SpsSpec::hd()
            },
            // The largest picture of level 6.2: 8192x4320.
            SpsSpec {
                level_idc: 62,
                width_mbs: 512,
                height_map_units: 270,
                crop: None,
                ..SpsSpec::hd()
            },
        ];
        for spec in variants {
            let nal = spec.nal();
            let sps = Sps::parse(&nal).unwrap_or_else(|e| panic!("{e}: {nal:02x?}"));
            assert_eq!(sps.info(), parse_sps(&nal).unwrap());
        }
        let sps = Sps::parse(&SpsSpec::hd().nal()).unwrap();
        assert_eq!(sps.log2_max_frame_num(), 4);
        assert_eq!(
            (sps.pic_width_in_mbs(), sps.frame_height_in_mbs()),
            (120, 68)
        );
        // The lenient reader's doc example passes too.
        assert!(Sps::parse(&spec_doc_sps()).is_ok());
    }

    #[test]
    fn strict_parse_rejects_the_bogus_sps() {
        // The lenient reader takes it, which is how it got into the catalog.
        assert_eq!(parse_sps(&BOGUS_SPS).unwrap().level_idc, 80);
        assert_eq!(
            Sps::parse(&BOGUS_SPS),
            Err(H264Error::OutOfRange {
                field: "level_idc",
                value: 80
            })
        );
        // Even with a real level, its VUI does not parse to rbsp_trailing_bits.
        let mut patched = BOGUS_SPS;
        patched[3] = 30;
        assert!(Sps::parse(&patched).is_err());
    }

    #[test]
    fn strict_parse_rejects_out_of_range_fields() {
        let field = |spec: SpsSpec| match Sps::parse(&spec.nal()) {
            Err(H264Error::OutOfRange { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        for profile_idc in [0, 1, 99, 144, 83, 118, 255] {
            let spec = SpsSpec {
                profile_idc,
                ..SpsSpec::hd()
            };
            assert_eq!(field(spec), "profile_idc", "profile {profile_idc}");
        }
        for level_idc in [0, 8, 14, 19, 23, 33, 43, 53, 63, 80, 255] {
            let spec = SpsSpec {
                level_idc,
                ..SpsSpec::hd()
            };
            assert_eq!(field(spec), "level_idc", "level {level_idc}");
        }
        let spec = SpsSpec {
            max_num_ref_frames: 17,
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "max_num_ref_frames");
        let spec = SpsSpec {
            log2_max_frame_num_minus4: 13,
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "log2_max_frame_num_minus4");
        let spec = SpsSpec {
            bit_depth_minus8: 7,
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "bit_depth_luma_minus8");
        let spec = SpsSpec {
            width_mbs: 1056,
            crop: None,
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "pic_width_in_mbs_minus1");
        // Each side within bounds, the area not.
        let spec = SpsSpec {
            width_mbs: 1055,
            height_map_units: 133,
            crop: None,
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "pic_height_in_map_units_minus1");
        let spec = SpsSpec {
            frame_mbs_only: false,
            height_map_units: 528,
            crop: None,
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "pic_height_in_map_units_minus1");
        let spec = SpsSpec {
            crop: Some([480, 480, 0, 0]),
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "width");
        let spec = SpsSpec {
            vui: Some((17, 17)),
            ..SpsSpec::hd()
        };
        assert_eq!(field(spec), "max_num_reorder_frames");
        // The escaped 16M-pixel-wide SPS the lenient reader takes.
        let spec = SpsSpec {
            width_mbs: 1 << 20,
            crop: None,
            ..SpsSpec::hd()
        };
        assert!(parse_sps(&spec.nal()).is_ok());
        assert_eq!(field(spec), "pic_width_in_mbs_minus1");
    }

    #[test]
    fn strict_parse_checks_vui_and_trailing_bits() {
        // Reorder depth, DPB size and reference count that contradict each other are
        // tolerated (only their ranges are checked).
        for (vui, max_num_ref_frames) in [(Some((3, 2)), 1), (Some((0, 1)), 2)] {
            let spec = SpsSpec {
                vui,
                max_num_ref_frames,
                ..SpsSpec::hd()
            };
            assert!(Sps::parse(&spec.nal()).is_ok());
        }
        // One bit too many after the last field, with and without a VUI.
        for vui in [None, Some((0, 1))] {
            let spec = SpsSpec {
                vui,
                ..SpsSpec::hd()
            };
            assert!(Sps::parse(&spec.nal()).is_ok());
            let mut w = spec.rbsp_body();
            w.bit(true);
            assert_eq!(
                Sps::parse(&nal(3, 7, &w.finish())),
                Err(H264Error::TrailingBits("SPS"))
            );
            let mut w = spec.rbsp_body();
            w.bits(9, 0);
            assert_eq!(
                Sps::parse(&nal(3, 7, &w.finish())),
                Err(H264Error::TrailingBits("SPS"))
            );
            // Missing stop bit: cut at the last byte.
            let full = spec.nal();
            assert!(Sps::parse(&full[..full.len() - 1]).is_err());
        }
        // Zero bytes after the stop bit are tolerated (avc framing may leave them).
        let mut padded = SpsSpec::hd().nal();
        padded.extend_from_slice(&[0, 0]);
        assert!(Sps::parse(&padded).is_ok());
        // Every truncation fails.
        let full = SpsSpec {
            vui: Some((1, 2)),
            hrd: true,
            ..SpsSpec::hd()
        }
        .nal();
        for len in 0..full.len() {
            assert!(Sps::parse(&full[..len]).is_err(), "{len} bytes");
        }
    }
}
