//! Randomised inputs: decoding never panics, and whatever decodes re-encodes to something that
//! decodes to the same value.

use moq_wire::message::*;

use super::common::fuzz::{self, check_reencodes};
use super::{encode, samples};

/// Writes a data header with its `encode(&mut Vec<u8>)`.
macro_rules! written {
    ($header:expr $(, $arg:expr)*) => {{
        let mut bytes = Vec::new();
        $header.encode($($arg,)* &mut bytes);
        bytes
    }};
}

/// Decodes `bytes` with every decoder; anything accepted must survive a re-encode. Returns how
/// many decoders accepted the input.
fn check_all_decoders(bytes: &[u8]) -> usize {
    let mut accepted = check_reencodes(bytes, ControlMessage::decode, encode);
    accepted += check_reencodes(bytes, DataStreamHeader::decode, |h| written!(h));
    for extensions_present in [false, true] {
        accepted += check_reencodes(
            bytes,
            |b| SubgroupObjectHeader::decode(b, extensions_present),
            |h| written!(h, extensions_present),
        );
    }
    accepted += check_reencodes(bytes, FetchObjectHeader::decode, |h| written!(h));
    accepted += check_reencodes(bytes, DatagramHeader::decode, |h| written!(h));
    accepted + usize::from(decode_extensions(bytes).is_ok())
}

/// Valid encodings of everything, as starting points for mutation.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = samples::control_messages().iter().map(encode).collect();
    seeds.extend(samples::stream_headers().iter().map(|h| written!(h)));
    seeds.extend(
        samples::subgroup_objects()
            .iter()
            .map(|(h, extensions_present)| written!(h, *extensions_present)),
    );
    seeds.extend(samples::fetch_objects().iter().map(|h| written!(h)));
    seeds.extend(samples::datagrams().iter().map(|h| written!(h)));
    seeds
}

#[test]
fn random_bytes_never_panic() {
    fuzz::random_bytes(0x22, |bytes| {
        check_all_decoders(bytes);
    });
}

#[test]
fn mutated_encodings_never_panic() {
    let mut accepted = 0;
    fuzz::mutated_seeds(&seeds(), |bytes| accepted += check_all_decoders(bytes));
    // Mutations must often stay decodable, or the re-encode checks above prove nothing.
    assert!(accepted > 20_000, "only {accepted} decodes succeeded");
}
