//! What moqsink and moqsrc share as GStreamer elements, so that they speak one vocabulary:
//! the connection properties, defined once, and properties renamed to the vocabulary, kept
//! under their old names for a release.

// No unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod connection;
pub mod renamed;
