//! The randomised no-panic harness: a byte generator, random and mutated inputs, and the
//! decode → re-encode → decode check.

use std::fmt::Debug;

use moq_wire::DecodeError;

/// xorshift64: a small, deterministic generator, enough to spray bytes.
pub struct Rng(u64);

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

/// If `bytes` decodes, it uses no more than it was given and its re-encoding decodes to the
/// same value. Returns 1 if it decoded, else 0.
pub fn check_reencodes<T: PartialEq + Debug>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Result<(T, usize), DecodeError>,
    encode: impl Fn(&T) -> Vec<u8>,
) -> usize {
    let Ok((value, used)) = decode(bytes) else {
        return 0;
    };
    assert!(used <= bytes.len());
    let again = encode(&value);
    assert_eq!(decode(&again).unwrap().0, value);
    1
}

/// Feeds 100,000 random inputs of up to 40 bytes to `check`. Half start with a type below
/// `type_limit`, and half carry a 16-bit control-message length that matches what follows.
pub fn random_bytes(type_limit: usize, mut check: impl FnMut(&[u8])) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..100_000 {
        let len = rng.below(40);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        // Often start with a plausible type so decoding gets past the first byte.
        if !bytes.is_empty() && rng.below(2) == 0 {
            bytes[0] = rng.below(type_limit) as u8;
        }
        // Control messages need a length that matches what follows.
        if bytes.len() >= 3 && rng.below(2) == 0 {
            let payload = (bytes.len() - 3) as u16;
            bytes[1..3].copy_from_slice(&payload.to_be_bytes());
        }
        check(&bytes);
    }
}

/// Feeds 100,000 mutations of `seeds` (one to three byte changes, flips, truncations or
/// insertions each) to `check`.
pub fn mutated_seeds(seeds: &[Vec<u8>], mut check: impl FnMut(&[u8])) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
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
        check(&bytes);
    }
}
