//! What moqsink and moqsrc share as GStreamer elements, so that they speak one vocabulary:
//! the connection properties, defined once, and properties renamed to the vocabulary, kept
//! under their old names for a release.

// No unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod connection;
pub mod renamed;

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, and takes its data even if a thread panicked holding it: an element keeps
/// working after a panic elsewhere (GStreamer turns a panic into an error message).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
