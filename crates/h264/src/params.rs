//! Parameter-set bookkeeping and the avcC record (ISO/IEC 14496-15 §5.3.3).

use crate::H264Error;
use crate::bits::BitReader;
use crate::nal::{Nal, START_CODE, StreamFormat, nal_type, nal_units};
use crate::sps::{SpsInfo, parse_sps};

/// Length prefix size written into avcC records produced here.
const AVCC_LENGTH_SIZE: u8 = 4;

/// The SPS and PPS NAL units seen so far, keyed by their ids.
///
/// A receiver joining mid-stream needs them before the first picture, so the sender keeps the
/// latest of each id and can hand them out as an avcC record or as an Annex B prefix.
///
/// This cache keeps every set it is given and checks little: one bogus set stays in every
/// record it produces. A publisher should use [`StreamParser`](crate::StreamParser), which
/// validates sets and emits only those the stream uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParameterSets {
    /// `(id, NAL unit)`, sorted by id.
    sps: Vec<(u8, Vec<u8>)>,
    pps: Vec<(u8, Vec<u8>)>,
}

impl ParameterSets {
    /// Stores every SPS and PPS of an access unit. Returns whether anything changed.
    pub fn update_from_au(&mut self, au: &[u8], format: StreamFormat) -> Result<bool, H264Error> {
        let mut changed = false;
        for nal in nal_units(au, format) {
            changed |= self.insert(nal?)?;
        }
        Ok(changed)
    }

    /// Stores `nal` if it is an SPS or PPS, replacing one with the same id. Other NAL units
    /// are ignored. Returns whether anything changed.
    pub fn insert(&mut self, nal: Nal<'_>) -> Result<bool, H264Error> {
        let (list, id) = match nal.nal_type {
            nal_type::SPS => (&mut self.sps, parse_sps(nal.data)?.sps_id),
            nal_type::PPS => {
                let id = BitReader::new(nal.payload()).ue_max(255, "pic_parameter_set_id")?;
                (&mut self.pps, id as u8)
            }
            _ => return Ok(false),
        };
        // avcC stores parameter-set lengths in 16 bits.
        if nal.data.len() > usize::from(u16::MAX) {
            return Err(H264Error::OutOfRange {
                field: "parameter set length",
                value: nal.data.len() as u64,
            });
        }
        match list.binary_search_by_key(&id, |(stored, _)| *stored) {
            Ok(i) if list[i].1 == nal.data => Ok(false),
            Ok(i) => {
                list[i].1 = nal.data.to_vec();
                Ok(true)
            }
            Err(i) => {
                list.insert(i, (id, nal.data.to_vec()));
                Ok(true)
            }
        }
    }

    /// At least one SPS and one PPS are known, so pictures can be decoded.
    pub fn is_complete(&self) -> bool {
        !self.sps.is_empty() && !self.pps.is_empty()
    }

    /// The SPS with the lowest id, parsed (streams almost always carry a single SPS).
    pub fn sps_info(&self) -> Option<SpsInfo> {
        self.sps.first().and_then(|(_, nal)| parse_sps(nal).ok())
    }

    /// An AVCDecoderConfigurationRecord with 4-byte NAL lengths, or an empty vector while
    /// [`is_complete`](Self::is_complete) is false.
    pub fn avcc(&self) -> Vec<u8> {
        let Some(info) = self.sps_info().filter(|_| self.is_complete()) else {
            return Vec::new();
        };
        let sps: Vec<&[u8]> = self.sps.iter().map(|(_, nal)| &nal[..]).collect();
        let pps: Vec<&[u8]> = self.pps.iter().map(|(_, nal)| &nal[..]).collect();
        write_avcc(&info, &sps, &pps)
    }

    /// Reads an avcC record (caps `codec_data`); returns the sets and the NAL length size
    /// the stream uses. A trailing high-profile extension is accepted but not needed.
    pub fn from_avcc(record: &[u8]) -> Result<(Self, u8), H264Error> {
        let record = AvccRecord::parse(record)?;
        let mut sets = ParameterSets::default();
        for nal in record.sps.iter().chain(&record.pps) {
            sets.insert(Nal::parse(nal)?)?;
        }
        Ok((sets, record.length_size))
    }

    /// All SPS then all PPS, each behind a four-byte start code, to put in front of a
    /// keyframe so a byte-stream decoder can start there. Empty when nothing is known.
    pub fn annexb_prefix(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, nal) in self.sps.iter().chain(&self.pps) {
            out.extend_from_slice(&START_CODE);
            out.extend_from_slice(nal);
        }
        out
    }
}

/// The parts of an avcC record (ISO/IEC 14496-15 §5.3.3.1) this crate uses.
pub(crate) struct AvccRecord<'a> {
    pub(crate) length_size: u8,
    pub(crate) sps: Vec<&'a [u8]>,
    pub(crate) pps: Vec<&'a [u8]>,
}

impl<'a> AvccRecord<'a> {
    /// Splits a record into its parameter-set NAL units, checking only the framing and the
    /// NAL unit types; anything after the PPS list (the high-profile extension) is ignored.
    pub(crate) fn parse(record: &'a [u8]) -> Result<Self, H264Error> {
        let mut rest = record;
        let header = take(&mut rest, 6, "shorter than its fixed header")?;
        if header[0] != 1 {
            return Err(H264Error::InvalidAvcc("configurationVersion is not 1"));
        }
        let length_size = (header[4] & 0x03) + 1;
        if length_size == 3 {
            return Err(H264Error::InvalidLengthSize(length_size));
        }
        let sps = read_sets(&mut rest, header[5] & 0x1f, nal_type::SPS)?;
        let pps_count = take(&mut rest, 1, "missing numOfPictureParameterSets")?[0];
        let pps = read_sets(&mut rest, pps_count, nal_type::PPS)?;
        Ok(AvccRecord {
            length_size,
            sps,
            pps,
        })
    }
}

fn read_sets<'a>(rest: &mut &'a [u8], count: u8, expected: u8) -> Result<Vec<&'a [u8]>, H264Error> {
    let mut sets = Vec::with_capacity(count.into());
    for _ in 0..count {
        let len = take(rest, 2, "parameter set length cut off")?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        let nal = Nal::parse(take(rest, len, "parameter set cut off")?)?;
        if nal.nal_type != expected {
            return Err(H264Error::UnexpectedNalType {
                expected,
                found: nal.nal_type,
            });
        }
        sets.push(nal.data);
    }
    Ok(sets)
}

/// An AVCDecoderConfigurationRecord with [`AVCC_LENGTH_SIZE`]-byte NAL lengths holding
/// `sps` and `pps` in that order, profile and level taken from `info`. Every set must be at
/// most 65535 bytes long (avcC stores 16-bit lengths).
pub(crate) fn write_avcc(info: &SpsInfo, sps: &[&[u8]], pps: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![
        1, // configurationVersion
        info.profile_idc,
        info.constraint_flags,
        info.level_idc,
        0xfc | (AVCC_LENGTH_SIZE - 1),
    ];
    // The counts are 5 and 8 bits wide, one short of the number of possible ids; a stream
    // using every id is not worth a failure path.
    let sps = &sps[..sps.len().min(31)];
    let pps = &pps[..pps.len().min(255)];
    out.push(0xe0 | sps.len() as u8);
    write_sets(&mut out, sps);
    out.push(pps.len() as u8);
    write_sets(&mut out, pps);
    // Profiles above High 4:2:0 8-bit signal chroma format and bit depths here.
    if matches!(info.profile_idc, 100 | 110 | 122 | 144) {
        out.extend_from_slice(&[
            0xfc | info.chroma_format_idc,
            0xf8 | (info.bit_depth_luma - 8),
            0xf8 | (info.bit_depth_chroma - 8),
            0, // numOfSequenceParameterSetExt
        ]);
    }
    out
}

fn write_sets(out: &mut Vec<u8>, sets: &[&[u8]]) {
    for nal in sets {
        // Lengths were checked against u16 on insertion.
        out.extend_from_slice(&(nal.len() as u16).to_be_bytes());
        out.extend_from_slice(nal);
    }
}

/// Splits `n` bytes off the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: usize, problem: &'static str) -> Result<&'a [u8], H264Error> {
    if rest.len() < n {
        return Err(H264Error::InvalidAvcc(problem));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{SpsSpec, annex_b, length_prefixed, pps, slice};

    fn sets_with(sps: &[&[u8]], pps: &[&[u8]]) -> ParameterSets {
        let mut sets = ParameterSets::default();
        for nal in sps.iter().chain(pps) {
            assert!(sets.insert(Nal::parse(nal).unwrap()).unwrap());
        }
        sets
    }

    #[test]
    fn collects_from_access_units() {
        let sps = SpsSpec::hd().nal();
        let mut sets = ParameterSets::default();
        assert!(!sets.is_complete());
        assert_eq!(sets.sps_info(), None);
        assert!(sets.avcc().is_empty());
        assert!(sets.annexb_prefix().is_empty());

        let only_sps = annex_b(&[&sps, &slice(3, 5, 0, 7)]);
        assert!(
            sets.update_from_au(&only_sps, StreamFormat::ByteStream)
                .unwrap()
        );
        assert!(!sets.is_complete());
        assert!(sets.avcc().is_empty());

        let key = length_prefixed(&[&sps, &pps(0, 0), &slice(3, 5, 0, 7)], 4);
        let avc = StreamFormat::Avc { length_size: 4 };
        assert!(sets.update_from_au(&key, avc).unwrap());
        assert!(sets.is_complete());
        // Same sets again: nothing changes.
        assert!(!sets.update_from_au(&key, avc).unwrap());
        assert_eq!(sets.sps_info().unwrap().width, 1920);

        // A new SPS under the same id replaces the old one.
        let smaller = SpsSpec {
            width_mbs: 80,
            height_map_units: 45,
            crop: None,
            ..SpsSpec::hd()
        }
        .nal();
        assert!(
            sets.update_from_au(&annex_b(&[&smaller]), StreamFormat::ByteStream)
                .unwrap()
        );
        assert_eq!(sets.sps_info().unwrap().height, 720);
        assert_eq!(sets.annexb_prefix(), annex_b(&[&smaller, &pps(0, 0)]));
    }

    #[test]
    fn keeps_one_set_per_id_in_id_order() {
        let sps1 = SpsSpec {
            sps_id: 1,
            ..SpsSpec::hd()
        }
        .nal();
        let sps0 = SpsSpec::hd().nal();
        let sets = sets_with(&[&sps1, &sps0], &[&pps(7, 1), &pps(2, 0)]);
        assert_eq!(sets.sps_info().unwrap().sps_id, 0);
        assert_eq!(
            sets.annexb_prefix(),
            annex_b(&[&sps0, &sps1, &pps(2, 0), &pps(7, 1)])
        );
    }

    #[test]
    fn avcc_round_trip() {
        let sps = SpsSpec::hd().nal();
        let sets = sets_with(&[&sps], &[&pps(0, 0)]);
        let avcc = sets.avcc();
        let mut expected = vec![1, 100, 0, 40, 0xff, 0xe1];
        expected.extend_from_slice(&(sps.len() as u16).to_be_bytes());
        expected.extend_from_slice(&sps);
        expected.extend_from_slice(&[1, 0, pps(0, 0).len() as u8]);
        expected.extend_from_slice(&pps(0, 0));
        // High profile extension: 4:2:0, 8-bit, no SPS extensions.
        expected.extend_from_slice(&[0xfd, 0xf8, 0xf8, 0]);
        assert_eq!(avcc, expected);

        let (back, length_size) = ParameterSets::from_avcc(&avcc).unwrap();
        assert_eq!((back, length_size), (sets, 4));
        // Readers must also take a record without the extension and other length sizes.
        let mut short = avcc[..avcc.len() - 4].to_vec();
        short[4] = 0xfd;
        assert_eq!(ParameterSets::from_avcc(&short).unwrap().1, 2);
    }

    #[test]
    fn baseline_avcc_has_no_extension() {
        let sps = SpsSpec {
            profile_idc: 66,
            ..SpsSpec::hd()
        }
        .nal();
        let avcc = sets_with(&[&sps], &[&pps(0, 0)]).avcc();
        assert_eq!(avcc.len(), 6 + 2 + sps.len() + 1 + 2 + pps(0, 0).len());
    }

    #[test]
    fn rejects_bad_avcc() {
        let good = sets_with(&[&SpsSpec::hd().nal()], &[&pps(0, 0)]).avcc();
        let with = |i: usize, b: u8| {
            let mut v = good.clone();
            v[i] = b;
            v
        };
        assert!(matches!(
            ParameterSets::from_avcc(&[]),
            Err(H264Error::InvalidAvcc(_))
        ));
        assert!(matches!(
            ParameterSets::from_avcc(&with(0, 0)),
            Err(H264Error::InvalidAvcc(_))
        ));
        assert_eq!(
            ParameterSets::from_avcc(&with(4, 0xfe)),
            Err(H264Error::InvalidLengthSize(3))
        );
        // SPS slot holding a PPS.
        assert_eq!(
            ParameterSets::from_avcc(&with(8, 0x68)),
            Err(H264Error::UnexpectedNalType {
                expected: 7,
                found: 8
            })
        );
        // Counts promising more than is there, and every truncation of the record.
        assert!(ParameterSets::from_avcc(&with(5, 0xe3)).is_err());
        for len in 0..good.len() - 4 {
            assert!(
                ParameterSets::from_avcc(&good[..len]).is_err(),
                "truncated to {len} bytes"
            );
        }
    }

    #[test]
    fn rejects_bad_parameter_sets() {
        let mut sets = ParameterSets::default();
        let broken_sps = [0x67, 0x64];
        assert!(
            sets.update_from_au(&annex_b(&[&broken_sps]), StreamFormat::ByteStream)
                .is_err()
        );
        let broken_pps = crate::testutil::nal(3, 8, &[0, 0, 0, 0, 0x80]);
        assert!(matches!(
            sets.insert(Nal::parse(&broken_pps).unwrap()),
            Err(H264Error::ExpGolombOverflow("pic_parameter_set_id"))
        ));
        let huge = [vec![0x68, 0x80], vec![0xaa; 70_000]].concat();
        assert!(matches!(
            sets.insert(Nal::parse(&huge).unwrap()),
            Err(H264Error::OutOfRange { .. })
        ));
        assert_eq!(sets, ParameterSets::default());
        // Other NAL units are ignored.
        assert!(
            !sets
                .insert(Nal::parse(&slice(3, 5, 0, 7)).unwrap())
                .unwrap()
        );
    }
}
