//! Builders for hand-made NAL units in unit tests.

/// Writes RBSP bits MSB first, with `ue(v)` / `se(v)` encoders.
#[derive(Default)]
pub(crate) struct BitWriter {
    bytes: Vec<u8>,
    used: u8,
}

impl BitWriter {
    pub(crate) fn bit(&mut self, bit: bool) -> &mut Self {
        if self.used == 0 {
            self.bytes.push(0);
        }
        if bit {
            *self.bytes.last_mut().unwrap() |= 0x80 >> self.used;
        }
        self.used = (self.used + 1) % 8;
        self
    }

    pub(crate) fn bits(&mut self, n: u8, value: u64) -> &mut Self {
        for i in (0..n).rev() {
            self.bit((value >> i) & 1 == 1);
        }
        self
    }

    pub(crate) fn ue(&mut self, value: u32) -> &mut Self {
        let code = u64::from(value) + 1;
        let len = 64 - code.leading_zeros() as u8;
        self.bits(len - 1, 0).bits(len, code)
    }

    pub(crate) fn se(&mut self, value: i32) -> &mut Self {
        let code = if value > 0 { 2 * value - 1 } else { -2 * value };
        self.ue(code as u32)
    }

    /// Appends rbsp_trailing_bits and returns the RBSP.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        self.bit(true);
        while self.used != 0 {
            self.bit(false);
        }
        std::mem::take(&mut self.bytes)
    }
}

/// A NAL unit: header byte plus `rbsp` with emulation-prevention bytes inserted.
pub(crate) fn nal(ref_idc: u8, nal_type: u8, rbsp: &[u8]) -> Vec<u8> {
    let mut out = vec![(ref_idc << 5) | nal_type];
    let mut zeros = 0;
    for &b in rbsp {
        if zeros >= 2 && b <= 3 {
            out.push(3);
            zeros = 0;
        }
        out.push(b);
        zeros = if b == 0 { zeros + 1 } else { 0 };
    }
    out
}

/// A slice NAL unit whose header starts with the given first_mb_in_slice and slice_type.
pub(crate) fn slice(ref_idc: u8, nal_type: u8, first_mb: u32, slice_type: u32) -> Vec<u8> {
    let rbsp = BitWriter::default()
        .ue(first_mb)
        .ue(slice_type)
        .ue(0)
        .finish();
    nal(ref_idc, nal_type, &rbsp)
}

/// A PPS whose only meaningful fields are its ids.
pub(crate) fn pps(pps_id: u32, sps_id: u32) -> Vec<u8> {
    nal(
        3,
        8,
        &BitWriter::default()
            .ue(pps_id)
            .ue(sps_id)
            .bits(4, 0)
            .finish(),
    )
}

/// SPS fields that influence what [`crate::parse_sps`] reports.
#[derive(Clone)]
pub(crate) struct SpsSpec {
    pub(crate) profile_idc: u8,
    pub(crate) constraint_flags: u8,
    pub(crate) level_idc: u8,
    pub(crate) sps_id: u32,
    /// Written only for profiles that carry it.
    pub(crate) chroma_format_idc: u32,
    pub(crate) separate_colour_plane: bool,
    pub(crate) bit_depth_minus8: u32,
    /// Per list: the delta_scale values written (an empty list means "not present").
    pub(crate) scaling_lists: Vec<Vec<i32>>,
    pub(crate) poc_type: u32,
    pub(crate) width_mbs: u32,
    pub(crate) height_map_units: u32,
    pub(crate) frame_mbs_only: bool,
    /// left, right, top, bottom
    pub(crate) crop: Option<[u32; 4]>,
    pub(crate) log2_max_frame_num_minus4: u32,
    pub(crate) max_num_ref_frames: u32,
    /// VUI with bitstream restrictions `(max_num_reorder_frames, max_dec_frame_buffering)`.
    pub(crate) vui: Option<(u32, u32)>,
    /// The VUI also carries NAL HRD parameters.
    pub(crate) hrd: bool,
}

impl SpsSpec {
    /// High profile, level 4.0, 1920x1080 (1088 coded, 8 lines cropped).
    pub(crate) fn hd() -> Self {
        SpsSpec {
            profile_idc: 100,
            constraint_flags: 0,
            level_idc: 40,
            sps_id: 0,
            chroma_format_idc: 1,
            separate_colour_plane: false,
            bit_depth_minus8: 0,
            scaling_lists: Vec::new(),
            poc_type: 0,
            width_mbs: 120,
            height_map_units: 68,
            frame_mbs_only: true,
            crop: Some([0, 0, 0, 4]),
            log2_max_frame_num_minus4: 0,
            max_num_ref_frames: 1,
            vui: None,
            hrd: false,
        }
    }

    pub(crate) fn rbsp(&self) -> Vec<u8> {
        self.rbsp_body().finish()
    }

    /// Every field, without rbsp_trailing_bits.
    pub(crate) fn rbsp_body(&self) -> BitWriter {
        let mut w = BitWriter::default();
        w.bits(8, self.profile_idc.into())
            .bits(8, self.constraint_flags.into())
            .bits(8, self.level_idc.into())
            .ue(self.sps_id);
        if crate::sps::has_chroma_info(self.profile_idc) {
            w.ue(self.chroma_format_idc);
            if self.chroma_format_idc == 3 {
                w.bit(self.separate_colour_plane);
            }
            w.ue(self.bit_depth_minus8)
                .ue(self.bit_depth_minus8)
                .bit(false);
            w.bit(!self.scaling_lists.is_empty());
            if !self.scaling_lists.is_empty() {
                for list in &self.scaling_lists {
                    w.bit(!list.is_empty());
                    for &delta in list {
                        w.se(delta);
                    }
                }
            }
        }
        w.ue(self.log2_max_frame_num_minus4).ue(self.poc_type);
        match self.poc_type {
            0 => {
                w.ue(2);
            }
            1 => {
                w.bit(false).se(-3).se(7).ue(3).se(1).se(-1).se(100);
            }
            _ => {}
        }
        w.ue(self.max_num_ref_frames)
            .bit(false)
            .ue(self.width_mbs - 1)
            .ue(self.height_map_units - 1);
        w.bit(self.frame_mbs_only);
        if !self.frame_mbs_only {
            w.bit(true);
        }
        w.bit(true).bit(self.crop.is_some());
        for offset in self.crop.iter().flatten() {
            w.ue(*offset);
        }
        w.bit(self.vui.is_some());
        if let Some((reorder, buffering)) = self.vui {
            // Square pixels, BT.709 limited range, 24 fps timing, as x264 writes it.
            w.bit(true).bits(8, 1).bit(false);
            w.bit(true)
                .bits(3, 5)
                .bit(false)
                .bit(true)
                .bits(24, 0x01_01_01);
            w.bit(false);
            w.bit(true).bits(32, 1).bits(32, 48).bit(false);
            w.bit(self.hrd);
            if self.hrd {
                // One CPB: 2 Mbit/s, 4 Mbit, CBR; 24-bit delay fields.
                w.ue(0)
                    .bits(4, 0)
                    .bits(4, 2)
                    .ue(31_249)
                    .ue(62_499)
                    .bit(true);
                w.bits(5, 23).bits(5, 23).bits(5, 23).bits(5, 24);
            }
            w.bit(false);
            if self.hrd {
                w.bit(false);
            }
            w.bit(false);
            w.bit(true)
                .bit(true)
                .ue(0)
                .ue(0)
                .ue(16)
                .ue(16)
                .ue(reorder)
                .ue(buffering);
        }
        w
    }

    pub(crate) fn nal(&self) -> Vec<u8> {
        nal(3, 7, &self.rbsp())
    }
}

/// Frames NAL units for a byte-stream access unit with four-byte start codes.
pub(crate) fn annex_b(nals: &[&[u8]]) -> Vec<u8> {
    nals.iter()
        .flat_map(|n| [&[0, 0, 0, 1][..], n].concat())
        .collect()
}

/// Frames NAL units with big-endian lengths of `size` bytes.
pub(crate) fn length_prefixed(nals: &[&[u8]], size: u8) -> Vec<u8> {
    let size = usize::from(size);
    nals.iter()
        .flat_map(|n| [&(n.len() as u32).to_be_bytes()[4 - size..], n].concat())
        .collect()
}

/// PPS fields the validating parsers look at. `Default` is the smallest CAVLC PPS naming
/// SPS 0, without the optional tail.
#[derive(Clone, Default)]
pub(crate) struct PpsSpec {
    pub(crate) pps_id: u32,
    pub(crate) sps_id: u32,
    pub(crate) cabac: bool,
    pub(crate) bottom_field_pic_order: bool,
    /// Number of slice groups, map type, and for type 6 the map units it covers.
    pub(crate) slice_groups: Option<(u32, u32, u32)>,
    pub(crate) num_ref_idx_minus1: [u32; 2],
    pub(crate) weighted_pred: bool,
    pub(crate) weighted_bipred_idc: u8,
    pub(crate) pic_init_qp_minus26: i32,
    pub(crate) chroma_qp_index_offset: i32,
    pub(crate) deblocking_control: bool,
    pub(crate) redundant_pic_cnt: bool,
    /// `None`: the optional tail (transform_8x8_mode_flag …) is left out.
    pub(crate) transform_8x8: Option<bool>,
    /// Write every scaling list (as "use the default").
    pub(crate) scaling_lists: bool,
    /// The SPS's chroma format, which decides how many 8x8 lists there are.
    pub(crate) chroma_format_idc: u32,
}

impl PpsSpec {
    /// Every field, without rbsp_trailing_bits.
    pub(crate) fn rbsp_body(&self) -> BitWriter {
        let mut w = BitWriter::default();
        w.ue(self.pps_id)
            .ue(self.sps_id)
            .bit(self.cabac)
            .bit(self.bottom_field_pic_order);
        match self.slice_groups {
            None => {
                w.ue(0);
            }
            Some((groups, map_type, units)) => {
                w.ue(groups - 1);
                if groups > 1 {
                    w.ue(map_type);
                    match map_type {
                        0 => {
                            for _ in 0..groups {
                                w.ue(0);
                            }
                        }
                        2 => {
                            for _ in 1..groups {
                                w.ue(0).ue(0);
                            }
                        }
                        3..=5 => {
                            w.bit(false).ue(0);
                        }
                        6 => {
                            w.ue(units - 1);
                            let bits = 32 - (groups - 1).leading_zeros() as u8;
                            for _ in 0..units {
                                w.bits(bits, 0);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        w.ue(self.num_ref_idx_minus1[0])
            .ue(self.num_ref_idx_minus1[1])
            .bit(self.weighted_pred)
            .bits(2, self.weighted_bipred_idc.into())
            .se(self.pic_init_qp_minus26)
            .se(0)
            .se(self.chroma_qp_index_offset)
            .bit(self.deblocking_control)
            .bit(false)
            .bit(self.redundant_pic_cnt);
        if let Some(transform_8x8) = self.transform_8x8 {
            w.bit(transform_8x8).bit(self.scaling_lists);
            if self.scaling_lists {
                let per_8x8 = if self.chroma_format_idc == 3 { 6 } else { 2 };
                let lists = 6 + if transform_8x8 { per_8x8 } else { 0 };
                for _ in 0..lists {
                    // Present, first delta −8: "use the default list".
                    w.bit(true).se(-8);
                }
            }
            w.se(0);
        }
        w
    }

    pub(crate) fn nal(&self) -> Vec<u8> {
        nal(3, 8, &self.rbsp_body().finish())
    }
}

/// A slice whose header matches an [`SpsSpec`] (4-bit frame_num, 6-bit POC LSB for POC type
/// 0) and a [`PpsSpec`] without weighted prediction, deblocking control or
/// redundant pictures, followed by a few bytes of slice data.
#[derive(Clone)]
pub(crate) struct SliceSpec {
    pub(crate) nal_type: u8,
    pub(crate) ref_idc: u8,
    pub(crate) first_mb: u32,
    pub(crate) slice_type: u32,
    pub(crate) pps_id: u32,
    pub(crate) frame_num: u32,
    pub(crate) idr_pic_id: u32,
    pub(crate) poc_type: u32,
    pub(crate) poc_lsb: u32,
    pub(crate) cabac: bool,
    pub(crate) qp_delta: i32,
    /// For an SPS without frame_mbs_only_flag: field_pic_flag (a field is always the top one).
    pub(crate) field_pic: Option<bool>,
}

impl SliceSpec {
    /// First slice of an IDR I picture.
    pub(crate) fn idr() -> Self {
        SliceSpec {
            nal_type: 5,
            ref_idc: 3,
            first_mb: 0,
            slice_type: 7,
            pps_id: 0,
            frame_num: 0,
            idr_pic_id: 0,
            poc_type: 0,
            poc_lsb: 0,
            cabac: false,
            qp_delta: 0,
            field_pic: None,
        }
    }

    /// A P picture with the given frame_num.
    pub(crate) fn p(frame_num: u32) -> Self {
        SliceSpec {
            nal_type: 1,
            ref_idc: 2,
            slice_type: 5,
            frame_num,
            poc_lsb: 2 * frame_num,
            ..SliceSpec::idr()
        }
    }

    /// A non-reference B picture.
    pub(crate) fn b(frame_num: u32) -> Self {
        SliceSpec {
            ref_idc: 0,
            slice_type: 6,
            poc_lsb: 2 * frame_num - 1,
            ..SliceSpec::p(frame_num)
        }
    }

    pub(crate) fn nal(&self) -> Vec<u8> {
        let kind = self.slice_type % 5;
        let (is_b, is_i) = (kind == 1, kind == 2 || kind == 4);
        let mut w = BitWriter::default();
        w.ue(self.first_mb)
            .ue(self.slice_type)
            .ue(self.pps_id)
            .bits(4, self.frame_num.into());
        if let Some(field_pic) = self.field_pic {
            w.bit(field_pic);
            if field_pic {
                w.bit(false);
            }
        }
        if self.nal_type == 5 {
            w.ue(self.idr_pic_id);
        }
        match self.poc_type {
            0 => {
                w.bits(6, self.poc_lsb.into());
            }
            1 => {
                w.se(0);
            }
            _ => {}
        }
        if is_b {
            w.bit(true);
        }
        if !is_i {
            // No num_ref_idx override, no reference list modification (one flag per list).
            w.bit(false).bit(false);
            if is_b {
                w.bit(false);
            }
        }
        if self.ref_idc != 0 {
            if self.nal_type == 5 {
                w.bits(2, 0);
            } else {
                w.bit(false);
            }
        }
        if self.cabac && !is_i {
            w.ue(0);
        }
        w.se(self.qp_delta);
        if self.cabac {
            while w.used != 0 {
                w.bit(true);
            }
        }
        w.bits(16, 0xa55a);
        nal(self.ref_idc, self.nal_type, &w.finish())
    }
}
