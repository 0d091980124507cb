//! A small seeded PRNG of our own (xoshiro256** seeded through splitmix64).
//!
//! Written here rather than taken from a crate so that a given seed yields the same loss and
//! jitter pattern in every version of the tool: results must stay reproducible.

/// One step of splitmix64: expands a single 64-bit seed into well-mixed state words.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256**: fast, 256 bits of state, good statistical quality for simulation.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// An independent generator for `(seed, stream)`; streams separate the directions and the
    /// purposes (loss, jitter) so that one never shifts the draws of another.
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        let mut sm = seed ^ stream.wrapping_mul(0xD134_2543_DE82_EF95);
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_reference_vector() {
        // First outputs of splitmix64 from state 0, as published with the algorithm.
        let mut s = 0;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut s), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn xoshiro_matches_reference_vector() {
        // xoshiro256** from state {1, 2, 3, 4}: the published first outputs.
        let mut r = Rng { s: [1, 2, 3, 4] };
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(got, [11520, 0, 1509978240, 1215971899390074240]);
    }

    #[test]
    fn sequence_is_pinned() {
        // Pins the generator: if this changes, old seeds no longer reproduce old runs.
        let mut r = Rng::new(42, 0);
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(got, PINNED);
    }

    const PINNED: [u64; 3] = [
        1546998764402558742,
        6990951692964543102,
        12544586762248559009,
    ];

    #[test]
    fn streams_differ_and_floats_are_in_range() {
        let mut a = Rng::new(1, 0);
        let mut b = Rng::new(1, 1);
        assert_ne!(a.next_u64(), b.next_u64());
        let mean = (0..100_000).map(|_| a.next_f64()).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
        assert!(
            (0..10_000)
                .map(|_| b.next_f64())
                .all(|x| (0.0..1.0).contains(&x))
        );
    }
}
