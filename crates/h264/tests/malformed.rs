//! Every entry point must return an error, never panic, whatever bytes it is given.

use std::sync::OnceLock;

use h264::{
    ParameterSets, Pps, Sps, StreamFormat, StreamParser, annexb_to_avc, avc_to_annexb, classify,
    nal_units, parse_sps,
};

/// SPS (Baseline 16x16), PPS and an IDR slice behind four-byte start codes.
const KEYFRAME: [u8; 24] = [
    0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x0a, 0xda, 0x79, //
    0, 0, 0, 1, 0x68, 0xce, 0x38, 0x80, //
    0, 0, 0, 1, 0x65, 0x88,
];

/// The same with slice data behind the IDR slice header, so a [`StreamParser`] takes it.
const FULL_KEYFRAME: [u8; 27] = [
    0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x0a, 0xda, 0x79, //
    0, 0, 0, 1, 0x68, 0xce, 0x38, 0x80, //
    0, 0, 0, 1, 0x65, 0x88, 0x84, 0xda, 0xc0,
];

/// A parser that has taken [`FULL_KEYFRAME`], so later units get past the PPS lookup.
fn started_parser() -> StreamParser {
    static STARTED: OnceLock<StreamParser> = OnceLock::new();
    STARTED
        .get_or_init(|| {
            let mut parser = StreamParser::new();
            parser
                .push(&FULL_KEYFRAME, StreamFormat::ByteStream)
                .unwrap();
            parser
        })
        .clone()
}

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
        let _ = StreamParser::new().push(bytes, format);
        let mut parser = started_parser();
        if parser.push(bytes, format).is_ok() {
            let active = parser.active().unwrap();
            let _ = (active.avcc(), active.annexb_prefix(), active.sps_info());
        }
    }
    for length_size in [0, 1, 2, 3, 4, 8] {
        let _ = avc_to_annexb(bytes, length_size);
        let _ = annexb_to_avc(bytes, length_size);
    }
    let _ = parse_sps(bytes);
    if let Ok(sps) = Sps::parse(bytes) {
        let _ = Pps::parse(bytes, &sps);
    }
    let sps = Sps::parse(&FULL_KEYFRAME[4..10]).unwrap();
    let _ = Pps::parse(bytes, &sps);
    if let Ok((sets, _)) = ParameterSets::from_avcc(bytes) {
        let _ = (sets.avcc(), sets.annexb_prefix(), sets.sps_info());
    }
    let _ = StreamParser::new().load_avcc(bytes);
    let mut parser = started_parser();
    if parser.load_avcc(bytes).is_ok() {
        let _ = parser.push(&FULL_KEYFRAME[18..], StreamFormat::ByteStream);
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
    let parsed = started_parser()
        .push(&FULL_KEYFRAME, StreamFormat::ByteStream)
        .unwrap();
    assert_eq!(
        parsed.info,
        classify(&FULL_KEYFRAME, StreamFormat::ByteStream).unwrap()
    );
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
    let full_avc = annexb_to_avc(&FULL_KEYFRAME, 4).unwrap();
    for input in [
        KEYFRAME.to_vec(),
        avc,
        sets.avcc(),
        FULL_KEYFRAME.to_vec(),
        full_avc,
    ] {
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
