//! Every entry point must return an error, never panic, whatever bytes it is given.

use h264::{
    ParameterSets, StreamFormat, annexb_to_avc, avc_to_annexb, classify, nal_units, parse_sps,
};

/// SPS (Baseline 16x16), PPS and an IDR slice behind four-byte start codes.
const KEYFRAME: [u8; 24] = [
    0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x0a, 0xda, 0x79, //
    0, 0, 0, 1, 0x68, 0xce, 0x38, 0x80, //
    0, 0, 0, 1, 0x65, 0x88,
];

const FORMATS: [StreamFormat; 5] = [
    StreamFormat::ByteStream,
    StreamFormat::Avc { length_size: 1 },
    StreamFormat::Avc { length_size: 2 },
    StreamFormat::Avc { length_size: 4 },
    StreamFormat::Avc { length_size: 3 },
];

/// Runs every parser over `bytes`; only panics count as failures.
fn exercise(bytes: &[u8]) {
    for format in FORMATS {
        for nal in nal_units(bytes, format) {
            let _ = nal.map(|nal| parse_sps(nal.data));
        }
        let _ = classify(bytes, format);
        let mut sets = ParameterSets::default();
        let _ = sets.update_from_au(bytes, format);
        let _ = (sets.avcc(), sets.annexb_prefix(), sets.sps_info());
    }
    for length_size in [0, 1, 2, 3, 4, 8] {
        let _ = avc_to_annexb(bytes, length_size);
        let _ = annexb_to_avc(bytes, length_size);
    }
    let _ = parse_sps(bytes);
    if let Ok((sets, _)) = ParameterSets::from_avcc(bytes) {
        let _ = (sets.avcc(), sets.annexb_prefix(), sets.sps_info());
    }
}

/// xorshift64: deterministic, dependency-free noise.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        let len = self.next() as usize % (max_len + 1);
        (0..len)
            .map(|_| {
                // Favour the bytes that matter to framing and exp-Golomb codes.
                let r = self.next();
                match r % 4 {
                    0 => 0,
                    1 => (r >> 8) as u8 % 4,
                    _ => (r >> 8) as u8,
                }
            })
            .collect()
    }
}

#[test]
fn valid_inputs_parse() {
    let info = classify(&KEYFRAME, StreamFormat::ByteStream).unwrap();
    assert!(info.has_sps && info.has_pps);
    let mut sets = ParameterSets::default();
    sets.update_from_au(&KEYFRAME, StreamFormat::ByteStream)
        .unwrap();
    assert_eq!(ParameterSets::from_avcc(&sets.avcc()).unwrap(), (sets, 4));
}

#[test]
fn truncations_and_byte_flips() {
    let mut sets = ParameterSets::default();
    sets.update_from_au(&KEYFRAME, StreamFormat::ByteStream)
        .unwrap();
    let avc = annexb_to_avc(&KEYFRAME, 4).unwrap();
    for input in [KEYFRAME.to_vec(), avc, sets.avcc()] {
        for len in 0..=input.len() {
            exercise(&input[..len]);
        }
        for i in 0..input.len() {
            for value in [0x00, 0x01, 0x03, 0x80, 0xff, input[i] ^ 0x10] {
                let mut mutated = input.clone();
                mutated[i] = value;
                exercise(&mutated);
            }
        }
    }
}

#[test]
fn random_bytes() {
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    for _ in 0..100_000 {
        exercise(&noise.bytes(48));
    }
}

#[test]
fn extreme_lengths_and_codes() {
    exercise(&[]);
    exercise(&[0xff; 16]);
    exercise(&[0; 64]);
    // Length prefixes far beyond the buffer.
    exercise(&[0xff, 0xff, 0xff, 0xff, 0x65, 0x88]);
    exercise(&[0x7f, 0xff, 0xff, 0xff, 0x65]);
    // Exp-Golomb prefixes of 32 and more zero bits in a slice header and in an SPS.
    exercise(&[0, 0, 1, 0x65, 0, 0, 3, 0, 0, 3, 0, 0x80]);
    exercise(&[0, 0, 1, 0x67, 0x64, 0, 0x28, 0, 0, 3, 0, 0, 3, 0, 0]);
    // An avcC promising 31 SPS and 255 PPS it does not have.
    exercise(&[1, 0x64, 0, 0x28, 0xff, 0xff, 0xff, 0xff]);
}
