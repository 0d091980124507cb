//! draft-20 codec tests: hand-derived byte vectors, round trips of every message and header,
//! partial input, malformed input and a randomised no-panic check. Messages are the model
//! types throughout; each is read on the channel it travels on (the control stream, a new
//! request stream, or the stream of the request it answers).

#[allow(dead_code, unused_macros, unused_imports)]
#[path = "../common/mod.rs"]
mod common;
mod filters;
mod fuzz;
mod malformed;
mod roundtrip;
mod samples;
mod support;
mod vectors;

use moq_wire::codec::Codec;

pub use support::*;

/// The codec under test; the draft-22 suite runs the same tests with its own.
pub fn codec() -> &'static dyn Codec {
    &moq_wire::draft20::CODEC
}
