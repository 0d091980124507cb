//! Splitting access units into NAL units and re-framing them.

use crate::H264Error;

/// NAL unit type values (`nal_unit_type`, ITU-T H.264 table 7-1) this crate acts on.
pub mod nal_type {
    /// Coded slice of a non-IDR picture.
    pub const SLICE: u8 = 1;
    /// Coded slice data partition A; carries the slice header like [`SLICE`].
    pub const SLICE_PARTITION_A: u8 = 2;
    /// Coded slice of an IDR picture.
    pub const IDR: u8 = 5;
    pub const SPS: u8 = 7;
    pub const PPS: u8 = 8;
}

/// How NAL units are delimited inside an access unit (the `stream-format` caps field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamFormat {
    /// Annex B: each NAL unit follows a `00 00 01` or `00 00 00 01` start code.
    ByteStream,
    /// ISO/IEC 14496-15: each NAL unit follows a big-endian length of `length_size` bytes
    /// (1, 2 or 4, from the avcC record).
    Avc { length_size: u8 },
}

impl StreamFormat {
    fn validate(self) -> Result<(), H264Error> {
        match self {
            StreamFormat::Avc { length_size } if !matches!(length_size, 1 | 2 | 4) => {
                Err(H264Error::InvalidLengthSize(length_size))
            }
            _ => Ok(()),
        }
    }
}

/// One NAL unit borrowed from an access unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nal<'a> {
    pub nal_type: u8,
    pub ref_idc: u8,
    /// The whole NAL unit, header byte included, without start code or length prefix.
    pub data: &'a [u8],
}

impl<'a> Nal<'a> {
    /// Reads the header of a bare NAL unit (as stored in an avcC record, for instance).
    pub fn parse(data: &'a [u8]) -> Result<Self, H264Error> {
        Self::at(data, 0)
    }

    /// `offset` only serves error messages: where `data` sits in the caller's buffer.
    fn at(data: &'a [u8], offset: usize) -> Result<Self, H264Error> {
        let header = *data.first().ok_or(H264Error::EmptyNal { offset })?;
        if header & 0x80 != 0 {
            return Err(H264Error::ForbiddenBit { offset });
        }
        Ok(Nal {
            nal_type: header & 0x1f,
            ref_idc: (header >> 5) & 0x03,
            data,
        })
    }

    /// The escaped payload after the header byte.
    pub(crate) fn payload(&self) -> &'a [u8] {
        self.data.get(1..).unwrap_or_default()
    }
}

/// Iterates over the NAL units of an access unit, in order.
///
/// Yields an error (and then stops) for a malformed framing: no leading start code, an empty
/// NAL unit, a cut-off or oversized length prefix, a set forbidden bit.
pub fn nal_units(au: &[u8], format: StreamFormat) -> NalUnits<'_> {
    NalUnits {
        data: au,
        format,
        state: State::Start,
    }
}

/// Iterator returned by [`nal_units`].
#[derive(Debug, Clone)]
pub struct NalUnits<'a> {
    data: &'a [u8],
    format: StreamFormat,
    state: State,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Start,
    /// Byte-stream: a start code ends just before this offset. AVC: the next length prefix
    /// starts here.
    At(usize),
    Done,
}

impl<'a> Iterator for NalUnits<'a> {
    type Item = Result<Nal<'a>, H264Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if matches!(self.state, State::Start)
            && let Err(e) = self.start()
        {
            self.state = State::Done;
            return Some(Err(e));
        }
        let pos = match self.state {
            State::At(pos) => pos,
            State::Start | State::Done => return None,
        };
        let result = match self.format {
            StreamFormat::ByteStream => self.next_annex_b(pos),
            StreamFormat::Avc { .. } if pos == self.data.len() => {
                self.state = State::Done;
                return None;
            }
            StreamFormat::Avc { length_size } => self.next_avc(pos, length_size),
        };
        if result.is_err() {
            self.state = State::Done;
        }
        Some(result)
    }
}

impl<'a> NalUnits<'a> {
    fn start(&mut self) -> Result<(), H264Error> {
        if self.data.is_empty() {
            return Err(H264Error::EmptyAccessUnit);
        }
        self.format.validate()?;
        self.state = match self.format {
            StreamFormat::ByteStream => {
                // Only zero bytes (leading_zero_8bits) may precede the first start code.
                let start = find_start_code(self.data, 0).ok_or(H264Error::MissingStartCode)?;
                if self.data[..start].iter().any(|&b| b != 0) {
                    return Err(H264Error::MissingStartCode);
                }
                State::At(start + 3)
            }
            StreamFormat::Avc { .. } => State::At(0),
        };
        Ok(())
    }

    fn next_annex_b(&mut self, pos: usize) -> Result<Nal<'a>, H264Error> {
        let (end, next) = match find_start_code(self.data, pos) {
            Some(code) => (code, State::At(code + 3)),
            None => (self.data.len(), State::Done),
        };
        self.state = next;
        // Zeros before a start code are its optional fourth byte or trailing_zero_8bits; a NAL
        // unit itself never ends in a zero byte.
        let body = &self.data[pos..end];
        let len = body
            .iter()
            .rposition(|&b| b != 0)
            .map_or(0, |last| last + 1);
        Nal::at(&body[..len], pos)
    }

    fn next_avc(&mut self, pos: usize, length_size: u8) -> Result<Nal<'a>, H264Error> {
        let rest = &self.data[pos..];
        let prefix = rest
            .get(..usize::from(length_size))
            .ok_or(H264Error::TruncatedLengthPrefix { offset: pos })?;
        let len = prefix
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        let start = pos + prefix.len();
        let available = self.data.len() - start;
        if len > available {
            return Err(H264Error::NalOverrun {
                offset: start,
                len,
                available,
            });
        }
        self.state = State::At(start + len);
        Nal::at(&self.data[start..start + len], start)
    }
}

/// Offset of the next `00 00 01` at or after `from`.
fn find_start_code(data: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 2 < data.len() {
        match data[i + 2] {
            // No start code can begin at i, i+1 or i+2.
            2.. => i += 3,
            1 if data[i] == 0 && data[i + 1] == 0 => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Four-byte Annex B start code, the form written by this crate.
pub(crate) const START_CODE: [u8; 4] = [0, 0, 0, 1];

/// Appends one NAL unit framed for `format` (a four-byte start code for byte-stream).
fn write_nal(out: &mut Vec<u8>, nal: &[u8], format: StreamFormat) -> Result<(), H264Error> {
    match format {
        StreamFormat::ByteStream => out.extend_from_slice(&START_CODE),
        StreamFormat::Avc { length_size } => {
            let too_long = H264Error::NalTooLong {
                len: nal.len(),
                length_size,
            };
            let len = u32::try_from(nal.len()).map_err(|_| too_long.clone())?;
            if length_size < 4 && len >> (8 * u32::from(length_size)) != 0 {
                return Err(too_long);
            }
            out.extend_from_slice(&len.to_be_bytes()[4 - usize::from(length_size)..]);
        }
    }
    out.extend_from_slice(nal);
    Ok(())
}

fn reframe(au: &[u8], from: StreamFormat, to: StreamFormat) -> Result<Vec<u8>, H264Error> {
    to.validate()?;
    let mut out = Vec::with_capacity(au.len() + 16);
    for nal in nal_units(au, from) {
        write_nal(&mut out, nal?.data, to)?;
    }
    Ok(out)
}

/// Length-prefixed (avc) access unit to Annex B with four-byte start codes.
pub fn avc_to_annexb(au: &[u8], length_size: u8) -> Result<Vec<u8>, H264Error> {
    reframe(
        au,
        StreamFormat::Avc { length_size },
        StreamFormat::ByteStream,
    )
}

/// Annex B access unit to length-prefixed (avc) with `length_size`-byte lengths.
pub fn annexb_to_avc(au: &[u8], length_size: u8) -> Result<Vec<u8>, H264Error> {
    reframe(
        au,
        StreamFormat::ByteStream,
        StreamFormat::Avc { length_size },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{annex_b, length_prefixed, slice};

    fn collect(au: &[u8], format: StreamFormat) -> Result<Vec<Nal<'_>>, H264Error> {
        nal_units(au, format).collect()
    }

    fn bodies(au: &[u8], format: StreamFormat) -> Vec<Vec<u8>> {
        collect(au, format)
            .unwrap()
            .iter()
            .map(|n| n.data.to_vec())
            .collect()
    }

    #[test]
    fn header_fields() {
        let nal = Nal::parse(&[0x65, 0x88]).unwrap();
        assert_eq!((nal.nal_type, nal.ref_idc), (5, 3));
        let nal = Nal::parse(&[0x21]).unwrap();
        assert_eq!((nal.nal_type, nal.ref_idc), (1, 1));
        assert_eq!(nal.payload(), &[] as &[u8]);
        assert_eq!(
            Nal::parse(&[0x80 | 0x65]),
            Err(H264Error::ForbiddenBit { offset: 0 })
        );
        assert_eq!(Nal::parse(&[]), Err(H264Error::EmptyNal { offset: 0 }));
    }

    #[test]
    fn byte_stream_start_codes() {
        // Leading zero bytes, a four-byte and a three-byte start code, trailing zeros.
        let au = [
            0, 0, 0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x41, 0x9a, 0x00, 0x03, 0x01, 0, 0,
        ];
        assert_eq!(
            bodies(&au, StreamFormat::ByteStream),
            [vec![0x09, 0xf0], vec![0x41, 0x9a, 0x00, 0x03, 0x01]]
        );
        let nals = collect(&au, StreamFormat::ByteStream).unwrap();
        assert_eq!((nals[1].nal_type, nals[1].ref_idc), (1, 2));
        // Start codes split across the skip-ahead scan: 0x02 right before, 0x01 inside data.
        let au = [0, 0, 1, 0x06, 0x02, 0x01, 0x05, 0, 0, 1, 0x01, 0x80];
        assert_eq!(
            bodies(&au, StreamFormat::ByteStream),
            [vec![0x06, 0x02, 0x01, 0x05], vec![0x01, 0x80]]
        );
    }

    #[test]
    fn byte_stream_framing_errors() {
        let bs = StreamFormat::ByteStream;
        assert_eq!(collect(&[], bs), Err(H264Error::EmptyAccessUnit));
        assert_eq!(collect(&[0x65, 0x88], bs), Err(H264Error::MissingStartCode));
        assert_eq!(collect(&[0, 0, 0], bs), Err(H264Error::MissingStartCode));
        assert_eq!(
            collect(&[0xff, 0, 0, 1, 0x65], bs),
            Err(H264Error::MissingStartCode)
        );
        assert_eq!(
            collect(&[0, 0, 1], bs),
            Err(H264Error::EmptyNal { offset: 3 })
        );
        assert_eq!(
            collect(&[0, 0, 1, 0, 0, 1, 0x65], bs),
            Err(H264Error::EmptyNal { offset: 3 })
        );
        assert_eq!(
            collect(&[0, 0, 1, 0x65, 0x88, 0, 0, 1], bs),
            Err(H264Error::EmptyNal { offset: 8 })
        );
        assert_eq!(
            collect(&[0, 0, 1, 0xe5, 0x88], bs),
            Err(H264Error::ForbiddenBit { offset: 3 })
        );
        // The iterator stops after the first error.
        let mut it = nal_units(&[0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x80, 0, 0, 1, 0x09], bs);
        assert!(it.next().unwrap().is_ok());
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    #[test]
    fn length_prefixed_framing() {
        let a = slice(2, 1, 0, 0);
        let b = [0x06, 0x05, 0x01, 0x80];
        for size in [1, 2, 4] {
            let au = length_prefixed(&[&a, &b], size);
            let format = StreamFormat::Avc { length_size: size };
            assert_eq!(bodies(&au, format), [a.clone(), b.to_vec()]);
        }
    }

    #[test]
    fn length_prefixed_errors() {
        let avc = |length_size| StreamFormat::Avc { length_size };
        for size in [0, 3, 5, 255] {
            assert_eq!(
                collect(&[0, 1, 0x65], avc(size)),
                Err(H264Error::InvalidLengthSize(size))
            );
        }
        assert_eq!(collect(&[], avc(4)), Err(H264Error::EmptyAccessUnit));
        assert_eq!(
            collect(&[0, 0, 1], avc(4)),
            Err(H264Error::TruncatedLengthPrefix { offset: 0 })
        );
        assert_eq!(
            collect(&[0, 2, 0x09, 0xf0, 0], avc(2)),
            Err(H264Error::TruncatedLengthPrefix { offset: 4 })
        );
        assert_eq!(
            collect(&[0xff, 0xff, 0xff, 0xff, 0x65, 0x88], avc(4)),
            Err(H264Error::NalOverrun {
                offset: 4,
                len: 0xffff_ffff,
                available: 2
            })
        );
        assert_eq!(
            collect(&[0, 0, 0, 0, 0x65], avc(4)),
            Err(H264Error::EmptyNal { offset: 4 })
        );
    }

    #[test]
    fn conversions_round_trip() {
        let nals: [&[u8]; 3] = [&[0x09, 0xf0], &[0x67, 0x64, 0x00, 0x1e], &slice(3, 5, 0, 7)];
        let annex_b_au = annex_b(&nals);
        for size in [1, 2, 4] {
            let avc = annexb_to_avc(&annex_b_au, size).unwrap();
            assert_eq!(avc, length_prefixed(&nals, size));
            assert_eq!(avc_to_annexb(&avc, size).unwrap(), annex_b_au);
        }
        // Three-byte start codes come back as four-byte ones; the NAL units are unchanged.
        let short = [0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x41, 0x9a];
        let back = avc_to_annexb(&annexb_to_avc(&short, 4).unwrap(), 4).unwrap();
        assert_eq!(back, [0, 0, 0, 1, 0x09, 0xf0, 0, 0, 0, 1, 0x41, 0x9a]);
    }

    #[test]
    fn conversion_errors() {
        let big = [vec![0x41], vec![0xaa; 299]].concat();
        assert_eq!(
            annexb_to_avc(&annex_b(&[&big]), 1),
            Err(H264Error::NalTooLong {
                len: 300,
                length_size: 1
            })
        );
        assert_eq!(annexb_to_avc(&annex_b(&[&big]), 2).unwrap().len(), 302);
        assert_eq!(
            annexb_to_avc(&[0, 0, 1, 0x09], 3),
            Err(H264Error::InvalidLengthSize(3))
        );
        assert_eq!(
            avc_to_annexb(&[0, 5, 0x09], 2).unwrap_err(),
            H264Error::NalOverrun {
                offset: 2,
                len: 5,
                available: 1
            }
        );
    }
}
