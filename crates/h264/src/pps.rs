//! Picture parameter sets: the fields slice headers depend on, validated against their SPS.
//!
//! A PPS cannot be read on its own: how many scaling lists it carries and the range of its
//! initial QP depend on the SPS it names. So it is always parsed against one, and parsed
//! again when that SPS is replaced.

use crate::H264Error;
use crate::bits::BitReader;
use crate::nal::{Nal, nal_type};
use crate::sps::{Sps, skip_scaling_list};

/// A picture parameter set that passed [`Pps::parse`]'s checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pps {
    pps_id: u8,
    sps_id: u8,
    entropy_coding_mode: bool,
    bottom_field_pic_order_in_frame_present: bool,
    num_slice_groups: u32,
    slice_group_map_type: u32,
    slice_group_change_rate: u32,
    num_ref_idx_default_active: [u32; 2],
    weighted_pred: bool,
    weighted_bipred_idc: u8,
    pic_init_qp: i32,
    pic_init_qs: i32,
    deblocking_filter_control_present: bool,
    redundant_pic_cnt_present: bool,
}

/// `(pic_parameter_set_id, seq_parameter_set_id)` of a PPS NAL unit, to find its SPS.
pub(crate) fn pps_ids(nal: &Nal<'_>) -> Result<(u8, u8), H264Error> {
    if nal.nal_type != nal_type::PPS {
        return Err(H264Error::UnexpectedNalType {
            expected: nal_type::PPS,
            found: nal.nal_type,
        });
    }
    let mut r = BitReader::new(nal.payload());
    let pps_id = r.ue_max(255, "pic_parameter_set_id")? as u8;
    let sps_id = r.ue_max(31, "seq_parameter_set_id")? as u8;
    Ok((pps_id, sps_id))
}

/// `Ceil(Log2(n))` for n ≥ 1.
fn ceil_log2(n: u64) -> u8 {
    (u64::BITS - n.saturating_sub(1).leading_zeros()) as u8
}

impl Pps {
    /// Parses a PPS NAL unit (header byte included) against the SPS it names, through
    /// rbsp_trailing_bits, checking every field's range.
    pub fn parse(nal: &[u8], sps: &Sps) -> Result<Pps, H264Error> {
        let nal = Nal::parse(nal)?;
        let (pps_id, sps_id) = pps_ids(&nal)?;
        if sps_id != sps.sps_id() {
            return Err(H264Error::Inconsistent(
                "PPS parsed against an SPS with another id",
            ));
        }
        let mut r = BitReader::new(nal.payload());
        r.ue("pic_parameter_set_id")?;
        r.ue("seq_parameter_set_id")?;
        let entropy_coding_mode = r.bit("entropy_coding_mode_flag")?;
        let bottom_field_pic_order_in_frame_present =
            r.bit("bottom_field_pic_order_in_frame_present_flag")?;
        let num_slice_groups = r.ue_max(7, "num_slice_groups_minus1")? + 1;
        let map_units = sps.pic_size_in_map_units();
        let (mut slice_group_map_type, mut slice_group_change_rate) = (0, 1);
        if num_slice_groups > 1 {
            slice_group_map_type = r.ue_max(6, "slice_group_map_type")?;
            match slice_group_map_type {
                0 => {
                    for _ in 0..num_slice_groups {
                        r.ue_max(map_units - 1, "run_length_minus1")?;
                    }
                }
                2 => {
                    let width = sps.pic_width_in_mbs();
                    for _ in 1..num_slice_groups {
                        let top_left = r.ue_max(map_units - 1, "top_left")?;
                        let bottom_right = r.ue_max(map_units - 1, "bottom_right")?;
                        if top_left > bottom_right || top_left % width > bottom_right % width {
                            return Err(H264Error::Inconsistent(
                                "slice group rectangle has its corners swapped",
                            ));
                        }
                    }
                }
                3..=5 => {
                    r.bit("slice_group_change_direction_flag")?;
                    slice_group_change_rate =
                        r.ue_max(map_units - 1, "slice_group_change_rate_minus1")? + 1;
                }
                6 => {
                    let units = r.ue("pic_size_in_map_units_minus1")?;
                    if units != map_units - 1 {
                        return Err(H264Error::OutOfRange {
                            field: "pic_size_in_map_units_minus1",
                            value: units.into(),
                        });
                    }
                    let bits = ceil_log2(num_slice_groups.into());
                    for _ in 0..map_units {
                        if r.bits(bits, "slice_group_id")? >= num_slice_groups {
                            return Err(H264Error::OutOfRange {
                                field: "slice_group_id",
                                value: num_slice_groups.into(),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        let num_ref_idx_default_active = [
            r.ue_max(31, "num_ref_idx_l0_default_active_minus1")? + 1,
            r.ue_max(31, "num_ref_idx_l1_default_active_minus1")? + 1,
        ];
        let weighted_pred = r.bit("weighted_pred_flag")?;
        let weighted_bipred_idc = r.bits(2, "weighted_bipred_idc")? as u8;
        if weighted_bipred_idc > 2 {
            return Err(H264Error::OutOfRange {
                field: "weighted_bipred_idc",
                value: weighted_bipred_idc.into(),
            });
        }
        let pic_init_qp =
            26 + r.se_range(-26 - sps.qp_bd_offset_luma(), 25, "pic_init_qp_minus26")?;
        let pic_init_qs = 26 + r.se_range(-26, 25, "pic_init_qs_minus26")?;
        r.se_range(-12, 12, "chroma_qp_index_offset")?;
        let deblocking_filter_control_present = r.bit("deblocking_filter_control_present_flag")?;
        r.bit("constrained_intra_pred_flag")?;
        let redundant_pic_cnt_present = r.bit("redundant_pic_cnt_present_flag")?;
        if r.more_rbsp_data() {
            let transform_8x8 = r.bit("transform_8x8_mode_flag")?;
            if r.bit("pic_scaling_matrix_present_flag")? {
                let per_8x8 = if sps.info().chroma_format_idc == 3 {
                    6
                } else {
                    2
                };
                let lists = 6 + if transform_8x8 { per_8x8 } else { 0 };
                for i in 0..lists {
                    if r.bit("pic_scaling_list_present_flag")? {
                        skip_scaling_list(&mut r, if i < 6 { 16 } else { 64 })?;
                    }
                }
            }
            r.se_range(-12, 12, "second_chroma_qp_index_offset")?;
        }
        r.finish("PPS")?;
        Ok(Pps {
            pps_id,
            sps_id,
            entropy_coding_mode,
            bottom_field_pic_order_in_frame_present,
            num_slice_groups,
            slice_group_map_type,
            slice_group_change_rate,
            num_ref_idx_default_active,
            weighted_pred,
            weighted_bipred_idc,
            pic_init_qp,
            pic_init_qs,
            deblocking_filter_control_present,
            redundant_pic_cnt_present,
        })
    }

    pub fn pps_id(&self) -> u8 {
        self.pps_id
    }

    /// The SPS this PPS names.
    pub fn sps_id(&self) -> u8 {
        self.sps_id
    }

    /// CABAC rather than CAVLC.
    pub fn entropy_coding_mode(&self) -> bool {
        self.entropy_coding_mode
    }

    pub(crate) fn bottom_field_pic_order_in_frame_present(&self) -> bool {
        self.bottom_field_pic_order_in_frame_present
    }

    pub(crate) fn num_ref_idx_default_active(&self) -> [u32; 2] {
        self.num_ref_idx_default_active
    }

    pub(crate) fn weighted_pred(&self) -> bool {
        self.weighted_pred
    }

    pub(crate) fn weighted_bipred_idc(&self) -> u8 {
        self.weighted_bipred_idc
    }

    pub(crate) fn pic_init_qp(&self) -> i32 {
        self.pic_init_qp
    }

    pub(crate) fn pic_init_qs(&self) -> i32 {
        self.pic_init_qs
    }

    pub(crate) fn deblocking_filter_control_present(&self) -> bool {
        self.deblocking_filter_control_present
    }

    pub(crate) fn redundant_pic_cnt_present(&self) -> bool {
        self.redundant_pic_cnt_present
    }

    /// Width in bits of slice_group_change_cycle, and its largest value, when slice headers
    /// carry it (map types 3 to 5).
    pub(crate) fn slice_group_change_cycle(&self, sps: &Sps) -> Option<(u8, u64)> {
        if self.num_slice_groups < 2 || !(3..=5).contains(&self.slice_group_map_type) {
            return None;
        }
        let units = u64::from(sps.pic_size_in_map_units());
        let rate = u64::from(self.slice_group_change_rate);
        // Ceil(Log2(units ÷ rate + 1)) with an exact quotient: the smallest n with
        // 2^n · rate ≥ units + rate.
        let mut bits = 0u8;
        while (rate << bits) < units + rate {
            bits += 1;
        }
        Some((bits, units.div_ceil(rate)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{BitWriter, PpsSpec, SpsSpec, nal};

    fn sps() -> Sps {
        Sps::parse(&SpsSpec::hd().nal()).unwrap()
    }

    #[test]
    fn ceil_log2_values() {
        let got: Vec<u8> = (1..=9).map(ceil_log2).collect();
        assert_eq!(got, [0, 1, 2, 2, 3, 3, 3, 3, 4]);
    }

    #[test]
    fn parses_cavlc_and_cabac_sets() {
        let pps = Pps::parse(&PpsSpec::default().nal(), &sps()).unwrap();
        assert_eq!((pps.pps_id(), pps.sps_id()), (0, 0));
        assert!(!pps.entropy_coding_mode());
        assert_eq!(pps.num_ref_idx_default_active(), [1, 1]);

        let spec = PpsSpec {
            pps_id: 200,
            cabac: true,
            transform_8x8: Some(true),
            scaling_lists: true,
            ..PpsSpec::default()
        };
        let pps = Pps::parse(&spec.nal(), &sps()).unwrap();
        assert_eq!(pps.pps_id(), 200);
        assert!(pps.entropy_coding_mode());
    }

    #[test]
    fn scaling_list_count_follows_chroma_format() {
        // With 4:4:4 the PPS carries six 8x8 lists instead of two: the same bytes cannot
        // be valid under both SPS.
        let spec = PpsSpec {
            transform_8x8: Some(true),
            scaling_lists: true,
            ..PpsSpec::default()
        };
        let s444 = Sps::parse(
            &SpsSpec {
                profile_idc: 244,
                chroma_format_idc: 3,
                ..SpsSpec::hd()
            }
            .nal(),
        )
        .unwrap();
        assert!(Pps::parse(&spec.nal(), &sps()).is_ok());
        assert!(Pps::parse(&spec.nal(), &s444).is_err());
        let spec444 = PpsSpec {
            chroma_format_idc: 3,
            ..spec
        };
        assert!(Pps::parse(&spec444.nal(), &s444).is_ok());
    }

    #[test]
    fn slice_groups() {
        let sps = sps();
        let units = sps.pic_size_in_map_units();
        for map_type in 0..=6 {
            let spec = PpsSpec {
                slice_groups: Some((3, map_type, units)),
                ..PpsSpec::default()
            };
            let pps = Pps::parse(&spec.nal(), &sps)
                .unwrap_or_else(|e| panic!("map type {map_type}: {e}"));
            let cycle = pps.slice_group_change_cycle(&sps);
            assert_eq!(cycle.is_some(), (3..=5).contains(&map_type));
        }
        // Rate 1 over 8160 map units: values up to 8160 need 13 bits.
        let spec = PpsSpec {
            slice_groups: Some((2, 4, units)),
            ..PpsSpec::default()
        };
        let pps = Pps::parse(&spec.nal(), &sps).unwrap();
        assert_eq!(pps.slice_group_change_cycle(&sps), Some((13, 8160)));
        // Map type 6 must cover exactly the picture.
        let spec = PpsSpec {
            slice_groups: Some((2, 6, units - 1)),
            ..PpsSpec::default()
        };
        assert!(matches!(
            Pps::parse(&spec.nal(), &sps),
            Err(H264Error::OutOfRange {
                field: "pic_size_in_map_units_minus1",
                ..
            })
        ));
    }

    #[test]
    fn rejects_out_of_range_fields() {
        let sps = sps();
        let bad = |spec: PpsSpec| Pps::parse(&spec.nal(), &sps).unwrap_err();
        assert!(matches!(
            bad(PpsSpec {
                sps_id: 1,
                ..PpsSpec::default()
            }),
            H264Error::Inconsistent(_)
        ));
        assert!(matches!(
            bad(PpsSpec {
                num_ref_idx_minus1: [32, 0],
                ..PpsSpec::default()
            }),
            H264Error::OutOfRange {
                field: "num_ref_idx_l0_default_active_minus1",
                ..
            }
        ));
        assert!(matches!(
            bad(PpsSpec {
                weighted_bipred_idc: 3,
                ..PpsSpec::default()
            }),
            H264Error::OutOfRange {
                field: "weighted_bipred_idc",
                ..
            }
        ));
        assert!(matches!(
            bad(PpsSpec {
                pic_init_qp_minus26: 26,
                ..PpsSpec::default()
            }),
            H264Error::OutOfRange {
                field: "pic_init_qp_minus26",
                ..
            }
        ));
        // 8-bit video: QP may not go below 0.
        assert!(matches!(
            bad(PpsSpec {
                pic_init_qp_minus26: -27,
                ..PpsSpec::default()
            }),
            H264Error::OutOfRange { .. }
        ));
        assert!(matches!(
            bad(PpsSpec {
                chroma_qp_index_offset: 13,
                ..PpsSpec::default()
            }),
            H264Error::OutOfRange {
                field: "chroma_qp_index_offset",
                ..
            }
        ));
        assert!(matches!(
            bad(PpsSpec {
                slice_groups: Some((9, 0, 0)),
                ..PpsSpec::default()
            }),
            H264Error::OutOfRange {
                field: "num_slice_groups_minus1",
                ..
            }
        ));
        // Junk after the last field.
        let mut rbsp = PpsSpec::default().rbsp_body();
        rbsp.bits(5, 0b10101);
        assert_eq!(
            Pps::parse(&nal(3, 8, &rbsp.finish()), &sps),
            Err(H264Error::TrailingBits("PPS"))
        );
        // Cut short, and not a PPS at all.
        let full = PpsSpec::default().nal();
        for len in 1..full.len() {
            assert!(Pps::parse(&full[..len], &sps).is_err(), "{len} bytes");
        }
        assert!(matches!(
            Pps::parse(&SpsSpec::hd().nal(), &sps),
            Err(H264Error::UnexpectedNalType { .. })
        ));
        let _ = BitWriter::default();
    }
}
