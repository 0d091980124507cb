//! Randomised inputs: decoding never panics, and whatever decodes re-encodes to something that
//! decodes to the same value.

use moq_wire::draft14::*;

use super::samples;

/// xorshift64: a small, deterministic generator, enough to spray bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Decodes `bytes` with every decoder; anything accepted must survive a re-encode. Returns how
/// many decoders accepted the input.
fn check_all_decoders(bytes: &[u8]) -> usize {
    let mut accepted = 0;
    if let Ok((message, used)) = ControlMessage::decode(bytes) {
        accepted += 1;
        assert!(used <= bytes.len());
        let mut again = Vec::new();
        message
            .encode(&mut again)
            .expect("decoded messages are encodable");
        assert_eq!(ControlMessage::decode(&again).unwrap().0, message);
    }
    if let Ok((header, used)) = DataStreamHeader::decode(bytes) {
        accepted += 1;
        assert!(used <= bytes.len());
        let mut again = Vec::new();
        header.encode(&mut again);
        assert_eq!(DataStreamHeader::decode(&again).unwrap().0, header);
    }
    for extensions_present in [false, true] {
        if let Ok((header, used)) = SubgroupObjectHeader::decode(bytes, extensions_present) {
            accepted += 1;
            assert!(used <= bytes.len());
            let mut again = Vec::new();
            header.encode(extensions_present, &mut again);
            let decoded = SubgroupObjectHeader::decode(&again, extensions_present);
            assert_eq!(decoded.unwrap().0, header);
        }
    }
    if let Ok((header, used)) = FetchObjectHeader::decode(bytes) {
        accepted += 1;
        assert!(used <= bytes.len());
        let mut again = Vec::new();
        header.encode(&mut again);
        assert_eq!(FetchObjectHeader::decode(&again).unwrap().0, header);
    }
    if let Ok((header, payload_at)) = DatagramHeader::decode(bytes) {
        accepted += 1;
        assert!(payload_at <= bytes.len());
        let mut again = Vec::new();
        header.encode(&mut again);
        assert_eq!(DatagramHeader::decode(&again).unwrap().0, header);
    }
    accepted + usize::from(decode_extensions(bytes).is_ok())
}

/// Valid encodings of everything, as starting points for mutation.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = samples::control_messages()
        .iter()
        .map(super::encode)
        .collect();
    for header in samples::stream_headers() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        seeds.push(bytes);
    }
    for (header, extensions_present) in samples::subgroup_objects() {
        let mut bytes = Vec::new();
        header.encode(extensions_present, &mut bytes);
        seeds.push(bytes);
    }
    for header in samples::fetch_objects() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        seeds.push(bytes);
    }
    for header in samples::datagrams() {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        seeds.push(bytes);
    }
    seeds
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..100_000 {
        let len = rng.below(40);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        // Often start with a plausible type so decoding gets past the first byte.
        if !bytes.is_empty() && rng.below(2) == 0 {
            bytes[0] = rng.below(0x22) as u8;
        }
        // Control messages need a length that matches what follows.
        if bytes.len() >= 3 && rng.below(2) == 0 {
            let payload = (bytes.len() - 3) as u16;
            bytes[1..3].copy_from_slice(&payload.to_be_bytes());
        }
        check_all_decoders(&bytes);
    }
}

#[test]
fn mutated_encodings_never_panic() {
    let seeds = seeds();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut accepted = 0;
    for _ in 0..100_000 {
        let mut bytes = seeds[rng.below(seeds.len())].clone();
        for _ in 0..=rng.below(3) {
            match rng.below(4) {
                0 if !bytes.is_empty() => {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.byte();
                }
                1 if !bytes.is_empty() => {
                    let at = rng.below(bytes.len());
                    bytes[at] ^= 1 << rng.below(8);
                }
                2 if !bytes.is_empty() => bytes.truncate(rng.below(bytes.len())),
                _ => {
                    let at = rng.below(bytes.len() + 1);
                    bytes.insert(at, rng.byte());
                }
            }
        }
        accepted += check_all_decoders(&bytes);
    }
    // Mutations must often stay decodable, or the re-encode checks above prove nothing.
    assert!(accepted > 20_000, "only {accepted} decodes succeeded");
}
