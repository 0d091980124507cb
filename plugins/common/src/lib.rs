//! What moqsink and moqsrc share as GStreamer elements, so that they speak one vocabulary:
//! the connection properties, defined once, and properties renamed to the vocabulary, kept
//! under their old names for a release.

// No unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod connection;
pub mod renamed;

use std::sync::{Mutex, MutexGuard};

use gst::glib;

use connection::{Connection, Side};
use renamed::Renamed;

/// An element's ParamSpecs: its own, then the connection properties (worded for `side`),
/// then its old names.
pub fn properties(
    own: Vec<glib::ParamSpec>,
    side: Side,
    renamed: &'static [Renamed],
) -> Vec<glib::ParamSpec> {
    own.into_iter()
        .chain(Connection::properties(side))
        .chain(renamed.iter().map(Renamed::param_spec))
        .collect()
}

/// Locks `m`, and takes its data even if a thread panicked holding it: an element keeps
/// working after a panic elsewhere (GStreamer turns a panic into an error message).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
