//! draft-22 codec tests. Draft-22 writes everything as draft-20 does but the LOCATION_FILTER,
//! so this suite runs draft-20's tests (vectors without a filter, round trips, partial and
//! malformed input, the randomised check) with the draft-22 codec, beside its own filter
//! vectors ([`filters`]).

#[allow(dead_code, unused_macros, unused_imports)]
#[path = "../common/mod.rs"]
mod common;
mod filters;
#[path = "../draft20/fuzz.rs"]
mod fuzz;
#[path = "../draft20/malformed.rs"]
mod malformed;
#[path = "../draft20/roundtrip.rs"]
mod roundtrip;
#[path = "../draft20/samples.rs"]
mod samples;
#[path = "../draft20/support.rs"]
mod support;
#[path = "../draft20/vectors.rs"]
mod vectors;

use moq_wire::codec::Codec;

pub use support::*;

/// The codec under test.
pub fn codec() -> &'static dyn Codec {
    &moq_wire::draft22::CODEC
}
