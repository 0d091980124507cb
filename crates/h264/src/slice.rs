//! Slice headers, read in full against the PPS and SPS they name.
//!
//! Reading a slice header to its end is the cheapest strong check that a slice is what its
//! NAL header claims: a dozen fields must each land in a range that depends on the parameter
//! sets, and CABAC slices must then be byte-aligned with one bits. Random bytes behind a slice
//! NAL header almost never get through, while classification alone (two exp-Golomb codes)
//! accepts nearly anything.

use crate::H264Error;
use crate::bits::BitReader;
use crate::classify::SliceType;
use crate::nal::{Nal, nal_type};
use crate::pps::Pps;
use crate::sps::Sps;

/// The slice-header fields that identify the picture a slice belongs to. Slices of one
/// primary coded picture agree on all of them except `first_mb`, `slice_type` and
/// `colour_plane_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SliceHeader {
    pub(crate) first_mb: u32,
    pub(crate) slice_type: SliceType,
    /// Raw `slice_type`: values 5..=9 promise every slice of the picture has that type.
    pub(crate) slice_type_code: u32,
    pub(crate) pps_id: u8,
    pub(crate) sps_id: u8,
    pub(crate) colour_plane_id: u8,
    pub(crate) frame_num: u32,
    pub(crate) field_pic: bool,
    pub(crate) bottom_field: bool,
    pub(crate) idr_pic_id: Option<u32>,
    pub(crate) pic_order_cnt_lsb: u32,
    pub(crate) delta_pic_order_cnt_bottom: i32,
    pub(crate) delta_pic_order_cnt: [i32; 2],
    pub(crate) redundant_pic_cnt: u32,
}

impl SliceHeader {
    /// Whether `other` can be a slice of the same coded picture: these fields must be equal
    /// in every slice of one.
    pub(crate) fn same_picture(&self, other: &SliceHeader) -> bool {
        let key = |h: &SliceHeader| {
            (
                h.pps_id,
                h.frame_num,
                h.field_pic,
                h.bottom_field,
                h.idr_pic_id,
                h.pic_order_cnt_lsb,
                h.delta_pic_order_cnt_bottom,
                h.delta_pic_order_cnt,
            )
        };
        key(self) == key(other)
    }
}

/// Upper bound on memory_management_control_operation entries in one slice: a DPB holds at
/// most 16 frames (32 fields), so a valid list is far shorter.
const MAX_MMCO: u32 = 66;

/// Reads the header of a slice (or slice data partition A) NAL unit and checks that slice
/// data follows. `lookup` resolves the header's pic_parameter_set_id to the PPS and its SPS.
pub(crate) fn parse_slice_header<'s>(
    nal: &Nal<'_>,
    lookup: impl FnOnce(u8) -> Result<(&'s Pps, &'s Sps), H264Error>,
) -> Result<SliceHeader, H264Error> {
    let idr = nal.nal_type == nal_type::IDR;
    let mut r = BitReader::new(nal.payload());
    let first_mb = r.ue("first_mb_in_slice")?;
    let slice_type_code = r.ue("slice_type")?;
    let slice_type = SliceType::from_code(slice_type_code)?;
    let pps_id = r.ue_max(255, "pic_parameter_set_id")? as u8;
    let (pps, sps) = lookup(pps_id)?;
    let (is_i, is_si, is_p, is_sp, is_b) = (
        slice_type == SliceType::I,
        slice_type == SliceType::Si,
        slice_type == SliceType::P,
        slice_type == SliceType::Sp,
        slice_type == SliceType::B,
    );
    // An IDR picture predicts from nothing and starts frame numbering.
    if idr && !(is_i || is_si) {
        return Err(H264Error::OutOfRange {
            field: "slice_type of an IDR picture",
            value: slice_type_code.into(),
        });
    }
    if nal.nal_type == nal_type::SLICE_PARTITION_A && sps.info().profile_idc != 88 {
        return Err(H264Error::Inconsistent(
            "slice data partitioning outside the Extended profile",
        ));
    }

    let mut colour_plane_id = 0;
    if sps.separate_colour_plane() {
        colour_plane_id = r.bits(2, "colour_plane_id")? as u8;
        if colour_plane_id > 2 {
            return Err(H264Error::OutOfRange {
                field: "colour_plane_id",
                value: colour_plane_id.into(),
            });
        }
    }
    let frame_num = r.bits(sps.log2_max_frame_num(), "frame_num")?;
    if idr && frame_num != 0 {
        return Err(H264Error::OutOfRange {
            field: "frame_num of an IDR picture",
            value: frame_num.into(),
        });
    }
    let (mut field_pic, mut bottom_field) = (false, false);
    if !sps.frame_mbs_only() {
        field_pic = r.bit("field_pic_flag")?;
        if field_pic {
            bottom_field = r.bit("bottom_field_flag")?;
        }
    }
    let mbaff = sps.mb_adaptive_frame_field() && !field_pic;
    let pic_size_in_mbs = u64::from(sps.pic_width_in_mbs())
        * u64::from(sps.frame_height_in_mbs() / if field_pic { 2 } else { 1 });
    if u64::from(first_mb) * if mbaff { 2 } else { 1 } >= pic_size_in_mbs {
        return Err(H264Error::OutOfRange {
            field: "first_mb_in_slice",
            value: first_mb.into(),
        });
    }
    let idr_pic_id = if idr {
        Some(r.ue_max(65_535, "idr_pic_id")?)
    } else {
        None
    };
    let bottom_present = pps.bottom_field_pic_order_in_frame_present() && !field_pic;
    let (mut pic_order_cnt_lsb, mut delta_pic_order_cnt_bottom) = (0, 0);
    let mut delta_pic_order_cnt = [0; 2];
    match sps.pic_order_cnt_type() {
        0 => {
            pic_order_cnt_lsb = r.bits(sps.log2_max_poc_lsb(), "pic_order_cnt_lsb")?;
            if bottom_present {
                delta_pic_order_cnt_bottom = r.se("delta_pic_order_cnt_bottom")?;
            }
        }
        1 if !sps.delta_pic_order_always_zero() => {
            delta_pic_order_cnt[0] = r.se("delta_pic_order_cnt[0]")?;
            if bottom_present {
                delta_pic_order_cnt[1] = r.se("delta_pic_order_cnt[1]")?;
            }
        }
        _ => {}
    }
    let mut redundant_pic_cnt = 0;
    if pps.redundant_pic_cnt_present() {
        redundant_pic_cnt = r.ue_max(127, "redundant_pic_cnt")?;
    }
    if is_b {
        r.bit("direct_spatial_mv_pred_flag")?;
    }

    let mut num_ref_idx_active = pps.num_ref_idx_default_active();
    if is_p || is_sp || is_b {
        if r.bit("num_ref_idx_active_override_flag")? {
            num_ref_idx_active[0] = r.ue_max(31, "num_ref_idx_l0_active_minus1")? + 1;
            if is_b {
                num_ref_idx_active[1] = r.ue_max(31, "num_ref_idx_l1_active_minus1")? + 1;
            }
        }
        // Frames index at most 16 references per list, fields 32.
        let max = if field_pic { 32 } else { 16 };
        let lists = if is_b { 2 } else { 1 };
        if let Some(&n) = num_ref_idx_active[..lists].iter().find(|&&n| n > max) {
            return Err(H264Error::OutOfRange {
                field: "num_ref_idx_active_minus1",
                value: (n - 1).into(),
            });
        }
    }
    let lists = if is_b {
        2
    } else if is_p || is_sp {
        1
    } else {
        0
    };

    // ref_pic_list_modification()
    let max_pic_num = (1u32 << sps.log2_max_frame_num()) * if field_pic { 2 } else { 1 };
    for &active in &num_ref_idx_active[..lists] {
        if !r.bit("ref_pic_list_modification_flag")? {
            continue;
        }
        let mut entries = 0;
        loop {
            match r.ue_max(3, "modification_of_pic_nums_idc")? {
                0 | 1 => {
                    r.ue_max(max_pic_num - 1, "abs_diff_pic_num_minus1")?;
                }
                2 => {
                    r.ue_max(31, "long_term_pic_num")?;
                }
                _ => break,
            }
            entries += 1;
            if entries > active {
                return Err(H264Error::Inconsistent(
                    "more reference list modifications than references",
                ));
            }
        }
    }

    // pred_weight_table()
    if (pps.weighted_pred() && (is_p || is_sp)) || (pps.weighted_bipred_idc() == 1 && is_b) {
        let chroma = sps.chroma_array_type() != 0;
        r.ue_max(7, "luma_log2_weight_denom")?;
        if chroma {
            r.ue_max(7, "chroma_log2_weight_denom")?;
        }
        for &active in &num_ref_idx_active[..lists] {
            for _ in 0..active {
                if r.bit("luma_weight_flag")? {
                    r.se_range(-128, 127, "luma_weight")?;
                    r.se_range(-128, 127, "luma_offset")?;
                }
                if chroma && r.bit("chroma_weight_flag")? {
                    for _ in 0..2 {
                        r.se_range(-128, 127, "chroma_weight")?;
                        r.se_range(-128, 127, "chroma_offset")?;
                    }
                }
            }
        }
    }

    // dec_ref_pic_marking()
    if nal.ref_idc != 0 {
        if idr {
            r.bit("no_output_of_prior_pics_flag")?;
            r.bit("long_term_reference_flag")?;
        } else if r.bit("adaptive_ref_pic_marking_mode_flag")? {
            let mut operations = 0;
            loop {
                match r.ue_max(6, "memory_management_control_operation")? {
                    0 => break,
                    1 => {
                        r.ue("difference_of_pic_nums_minus1")?;
                    }
                    2 => {
                        r.ue_max(31, "long_term_pic_num")?;
                    }
                    3 => {
                        r.ue("difference_of_pic_nums_minus1")?;
                        r.ue_max(15, "long_term_frame_idx")?;
                    }
                    4 => {
                        r.ue_max(16, "max_long_term_frame_idx_plus1")?;
                    }
                    6 => {
                        r.ue_max(15, "long_term_frame_idx")?;
                    }
                    _ => {}
                }
                operations += 1;
                if operations > MAX_MMCO {
                    return Err(H264Error::Inconsistent(
                        "implausibly many memory management operations",
                    ));
                }
            }
        }
    }

    if pps.entropy_coding_mode() && !(is_i || is_si) {
        r.ue_max(2, "cabac_init_idc")?;
    }
    let qp_delta = r.se("slice_qp_delta")?;
    let qp = i64::from(pps.pic_init_qp()) + i64::from(qp_delta);
    if !(-i64::from(sps.qp_bd_offset_luma())..=51).contains(&qp) {
        return Err(H264Error::OutOfRange {
            field: "slice_qp_delta",
            value: u64::from(qp_delta.unsigned_abs()),
        });
    }
    if is_sp || is_si {
        if is_sp {
            r.bit("sp_for_switch_flag")?;
        }
        let qs_delta = r.se("slice_qs_delta")?;
        if !(0..=51).contains(&(i64::from(pps.pic_init_qs()) + i64::from(qs_delta))) {
            return Err(H264Error::OutOfRange {
                field: "slice_qs_delta",
                value: u64::from(qs_delta.unsigned_abs()),
            });
        }
    }
    if pps.deblocking_filter_control_present() && r.ue_max(2, "disable_deblocking_filter_idc")? != 1
    {
        r.se_range(-6, 6, "slice_alpha_c0_offset_div2")?;
        r.se_range(-6, 6, "slice_beta_offset_div2")?;
    }
    if let Some((bits, max)) = pps.slice_group_change_cycle(sps) {
        let cycle = r.bits(bits, "slice_group_change_cycle")?;
        if u64::from(cycle) > max {
            return Err(H264Error::OutOfRange {
                field: "slice_group_change_cycle",
                value: cycle.into(),
            });
        }
    }
    if nal.nal_type == nal_type::SLICE_PARTITION_A {
        r.ue_max(
            u32::try_from(pic_size_in_mbs - 1).unwrap_or(u32::MAX),
            "slice_id",
        )?;
    }

    // slice_data() starts here: CABAC first pads to a byte boundary with one bits, and every
    // slice codes at least one macroblock, so more than the stop bit must follow.
    if pps.entropy_coding_mode() {
        while !r.byte_aligned() {
            if !r.bit("cabac_alignment_one_bit")? {
                return Err(H264Error::Inconsistent("cabac_alignment_one_bit is zero"));
            }
        }
    }
    if !r.more_rbsp_data() {
        return Err(H264Error::EndOfData("slice_data"));
    }

    Ok(SliceHeader {
        first_mb,
        slice_type,
        slice_type_code,
        pps_id,
        sps_id: sps.sps_id(),
        colour_plane_id,
        frame_num,
        field_pic,
        bottom_field,
        idr_pic_id,
        pic_order_cnt_lsb,
        delta_pic_order_cnt_bottom,
        delta_pic_order_cnt,
        redundant_pic_cnt,
    })
}
