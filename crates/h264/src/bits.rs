//! Bit reader over an escaped NAL unit payload.

use crate::H264Error;

/// Reads RBSP bits (MSB first) straight from a NAL unit payload, dropping the
/// emulation-prevention byte of every `00 00 03` on the fly.
///
/// Skipping while reading, rather than un-escaping into a buffer first, means classifying a
/// large slice touches only the few header bytes it needs and allocates nothing.
#[derive(Clone)]
pub(crate) struct BitReader<'a> {
    data: &'a [u8],
    /// Next byte of `data` to load.
    pos: usize,
    /// Zero bytes seen in a row, the emulation-prevention trigger.
    zeros: u8,
    /// Byte being consumed and how many of its bits are still unread.
    current: u8,
    bits_left: u8,
}

impl<'a> BitReader<'a> {
    /// `payload` is the NAL unit without its header byte.
    pub(crate) fn new(payload: &'a [u8]) -> Self {
        BitReader {
            data: payload,
            pos: 0,
            zeros: 0,
            current: 0,
            bits_left: 0,
        }
    }

    fn load_byte(&mut self, what: &'static str) -> Result<(), H264Error> {
        loop {
            let byte = *self.data.get(self.pos).ok_or(H264Error::EndOfData(what))?;
            self.pos += 1;
            if self.zeros >= 2 && byte == 0x03 {
                self.zeros = 0;
                continue;
            }
            self.zeros = if byte == 0 {
                self.zeros.saturating_add(1)
            } else {
                0
            };
            self.current = byte;
            self.bits_left = 8;
            return Ok(());
        }
    }

    pub(crate) fn bit(&mut self, what: &'static str) -> Result<bool, H264Error> {
        if self.bits_left == 0 {
            self.load_byte(what)?;
        }
        self.bits_left -= 1;
        Ok((self.current >> self.bits_left) & 1 == 1)
    }

    /// `u(n)` for n ≤ 32.
    pub(crate) fn bits(&mut self, n: u8, what: &'static str) -> Result<u32, H264Error> {
        debug_assert!(n <= 32);
        let mut value = 0u32;
        for _ in 0..n {
            value = (value << 1) | u32::from(self.bit(what)?);
        }
        Ok(value)
    }

    /// `ue(v)`. Codes longer than 32 bits cannot hold a value any H.264 field allows, so they
    /// are rejected instead of overflowing.
    pub(crate) fn ue(&mut self, what: &'static str) -> Result<u32, H264Error> {
        let mut leading_zeros = 0u8;
        while !self.bit(what)? {
            leading_zeros += 1;
            if leading_zeros > 31 {
                return Err(H264Error::ExpGolombOverflow(what));
            }
        }
        let suffix = self.bits(leading_zeros, what)?;
        // 2^lz - 1 + suffix ≤ 2^32 - 2 for lz ≤ 31, so this cannot overflow.
        Ok(((1u64 << leading_zeros) - 1 + u64::from(suffix)) as u32)
    }

    /// `se(v)`: ue values 1, 2, 3, 4, … map to 1, −1, 2, −2, …
    pub(crate) fn se(&mut self, what: &'static str) -> Result<i32, H264Error> {
        let code = i64::from(self.ue(what)?);
        let magnitude = (code + 1) / 2;
        Ok(if code % 2 == 1 { magnitude } else { -magnitude } as i32)
    }

    /// `ue(v)` that must not exceed `max`, for fields that index tables or size loops.
    pub(crate) fn ue_max(&mut self, max: u32, what: &'static str) -> Result<u32, H264Error> {
        let value = self.ue(what)?;
        if value > max {
            return Err(H264Error::OutOfRange {
                field: what,
                value: value.into(),
            });
        }
        Ok(value)
    }

    /// `se(v)` that must lie in `min..=max`.
    pub(crate) fn se_range(
        &mut self,
        min: i32,
        max: i32,
        what: &'static str,
    ) -> Result<i32, H264Error> {
        let value = self.se(what)?;
        if !(min..=max).contains(&value) {
            return Err(H264Error::OutOfRange {
                field: what,
                value: u64::from(value.unsigned_abs()),
            });
        }
        Ok(value)
    }

    /// At a byte boundary of the RBSP.
    pub(crate) fn byte_aligned(&self) -> bool {
        self.bits_left == 0
    }

    /// `more_rbsp_data()`: something other than rbsp_trailing_bits follows, i.e. a one bit
    /// comes after the next bit. Needs no bookkeeping of where the payload ends because the
    /// stop bit is the last one bit of the RBSP.
    pub(crate) fn more_rbsp_data(&self) -> bool {
        let mut r = self.clone();
        r.bit("").is_ok() && r.any_one_bit()
    }

    /// Whether a one bit remains anywhere ahead (consumes the reader).
    fn any_one_bit(&mut self) -> bool {
        loop {
            match self.bit("") {
                Ok(true) => return true,
                Ok(false) => {}
                Err(_) => return false,
            }
        }
    }

    /// Checks that exactly rbsp_trailing_bits follow: a one bit, zero bits up to the byte
    /// boundary, then nothing but zero bytes (which some muxers leave after a NAL unit).
    /// Anything else means the syntax before was misread or the unit is corrupt.
    pub(crate) fn finish(&mut self, what: &'static str) -> Result<(), H264Error> {
        if !self.bit(what).map_err(|_| H264Error::TrailingBits(what))? {
            return Err(H264Error::TrailingBits(what));
        }
        while self.bits_left > 0 {
            if self.bit(what)? {
                return Err(H264Error::TrailingBits(what));
            }
        }
        while self.load_byte(what).is_ok() {
            if self.current != 0 {
                return Err(H264Error::TrailingBits(what));
            }
            self.bits_left = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs a string of '0'/'1' (spaces ignored) into bytes, padding the last with zeros.
    fn pack(bits: &str) -> Vec<u8> {
        let bits: Vec<u8> = bits
            .bytes()
            .filter(|b| *b != b' ')
            .map(|b| b - b'0')
            .collect();
        bits.chunks(8)
            .map(|chunk| {
                chunk
                    .iter()
                    .enumerate()
                    .fold(0u8, |acc, (i, b)| acc | (b << (7 - i)))
            })
            .collect()
    }

    #[test]
    fn fixed_width_fields() {
        let mut r = BitReader::new(&[0b1010_0000, 0xff]);
        assert!(r.bit("a").unwrap());
        assert_eq!(r.bits(3, "b").unwrap(), 0b010);
        assert_eq!(r.bits(8, "c").unwrap(), 0b0000_1111);
        assert_eq!(r.bits(4, "d").unwrap(), 0b1111);
        assert_eq!(r.bit("e"), Err(H264Error::EndOfData("e")));
    }

    #[test]
    fn exp_golomb_values() {
        // ue: 1 → 0, 010 → 1, 011 → 2, 00100 → 3, 0001000 → 7, 000010001 → 16
        let data = pack("1 010 011 00100 0001000 000010001");
        let mut r = BitReader::new(&data);
        for expected in [0, 1, 2, 3, 7, 16] {
            assert_eq!(r.ue("v").unwrap(), expected);
        }
        // se: 1 → 0, 010 → 1, 011 → −1, 00100 → 2, 00101 → −2
        let data = pack("1 010 011 00100 00101");
        let mut r = BitReader::new(&data);
        for expected in [0, 1, -1, 2, -2] {
            assert_eq!(r.se("v").unwrap(), expected);
        }
    }

    #[test]
    fn exp_golomb_extremes() {
        // 31 leading zeros and an all-ones suffix: the largest accepted code.
        let max = format!("{}1{}", "0".repeat(31), "1".repeat(31));
        assert_eq!(BitReader::new(&pack(&max)).ue("v").unwrap(), u32::MAX - 1);
        // The most negative se(v) the reader can produce.
        assert_eq!(BitReader::new(&pack(&max)).se("v").unwrap(), i32::MIN + 1);

        let too_long = format!("{}1{}", "0".repeat(32), "0".repeat(32));
        assert_eq!(
            BitReader::new(&pack(&too_long)).ue("v"),
            Err(H264Error::ExpGolombOverflow("v"))
        );
        assert_eq!(
            BitReader::new(&[0; 16]).ue("v"),
            Err(H264Error::ExpGolombOverflow("v"))
        );
        // Prefix complete, suffix cut off.
        assert_eq!(
            BitReader::new(&pack("0000 0001")).ue("v"),
            Err(H264Error::EndOfData("v"))
        );
        assert_eq!(BitReader::new(&[]).ue("v"), Err(H264Error::EndOfData("v")));
    }

    #[test]
    fn bounded_exp_golomb() {
        let data = pack("00100 00101");
        let mut r = BitReader::new(&data);
        assert_eq!(r.ue_max(3, "x").unwrap(), 3);
        assert_eq!(
            r.ue_max(3, "y"),
            Err(H264Error::OutOfRange {
                field: "y",
                value: 4
            })
        );
    }

    #[test]
    fn rbsp_trailing_bits() {
        // Stop bit right after a field, then alignment zeros.
        let data = pack("011 1 0000");
        let mut r = BitReader::new(&data);
        assert_eq!(r.bits(3, "x").unwrap(), 0b011);
        assert!(!r.more_rbsp_data());
        assert_eq!(r.finish("t"), Ok(()));
        // Trailing zero bytes are tolerated, anything else is not.
        let mut r = BitReader::new(&[0x80, 0x00, 0x00]);
        assert_eq!(r.finish("t"), Ok(()));
        let mut r = BitReader::new(&[0x80, 0x01]);
        assert_eq!(r.finish("t"), Err(H264Error::TrailingBits("t")));
        // A zero where the stop bit belongs, a one among the alignment bits, nothing at all.
        assert_eq!(
            BitReader::new(&[0x40]).finish("t"),
            Err(H264Error::TrailingBits("t"))
        );
        assert_eq!(
            BitReader::new(&[0x81]).finish("t"),
            Err(H264Error::TrailingBits("t"))
        );
        assert_eq!(
            BitReader::new(&[]).finish("t"),
            Err(H264Error::TrailingBits("t"))
        );
        // more_rbsp_data: true while a one bit follows the next bit.
        let data = pack("1 1 000000");
        let mut r = BitReader::new(&data);
        assert!(r.more_rbsp_data());
        r.bit("x").unwrap();
        assert!(!r.more_rbsp_data());
        assert!(BitReader::new(&pack("0 0 1 00000")).more_rbsp_data());
        assert!(!BitReader::new(&[0, 0]).more_rbsp_data());
        assert!(!r.byte_aligned() && BitReader::new(&[1]).byte_aligned());
    }

    #[test]
    fn bounded_signed_exp_golomb() {
        // se: 00100 → 2, 00101 → −2
        let data = pack("00100 00101 00101");
        let mut r = BitReader::new(&data);
        assert_eq!(r.se_range(-2, 2, "a").unwrap(), 2);
        assert_eq!(r.se_range(-2, 2, "b").unwrap(), -2);
        assert_eq!(
            r.se_range(-1, 1, "c"),
            Err(H264Error::OutOfRange {
                field: "c",
                value: 2
            })
        );
    }

    #[test]
    fn emulation_prevention_bytes_are_skipped() {
        let mut r = BitReader::new(&[
            0x00, 0x00, 0x03, 0x01, 0x00, 0x00, 0x03, 0x00, 0x00, 0x03, 0xab,
        ]);
        let mut bytes = Vec::new();
        while let Ok(b) = r.bits(8, "byte") {
            bytes.push(b as u8);
        }
        assert_eq!(bytes, [0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xab]);
    }

    #[test]
    fn three_after_a_single_zero_is_data() {
        let mut r = BitReader::new(&[0x00, 0x03, 0x01, 0x00, 0x00, 0x03]);
        let bytes: Vec<u32> = (0..5).map(|_| r.bits(8, "byte").unwrap()).collect();
        assert_eq!(bytes, [0x00, 0x03, 0x01, 0x00, 0x00]);
        // The trailing 03 is an escape, so nothing is left.
        assert_eq!(r.bit("end"), Err(H264Error::EndOfData("end")));
    }
}
