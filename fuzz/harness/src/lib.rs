//! Support code for the fuzz targets in `fuzz/fuzz_targets`: the structured input of the
//! `receive_path` target, how a `control` input names its stream, and (in
//! `src/bin/make-seeds.rs`) the seed corpus generator.
//!
//! Kept out of the fuzz target crate so the generator, an ordinary program, does not link
//! libFuzzer.

pub mod control;
pub mod receive;
