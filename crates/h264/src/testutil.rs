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
        }
    }

    pub(crate) fn rbsp(&self) -> Vec<u8> {
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
        w.ue(0).ue(self.poc_type);
        match self.poc_type {
            0 => {
                w.ue(2);
            }
            1 => {
                w.bit(false).se(-3).se(7).ue(3).se(1).se(-1).se(100);
            }
            _ => {}
        }
        w.ue(1)
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
        w.bit(false).finish()
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
