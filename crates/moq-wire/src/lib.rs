//! MoQ Transport wire codec, free of I/O.
//!
//! The crate turns protocol values into bytes and back; it never touches a socket, a runtime
//! or a clock, so a session layer can drive it from whatever transport it has and tests can
//! exercise it with plain byte strings.
//!
//! Version-independent pieces live at the top level ([`varint`], [`DecodeError`],
//! [`EncodeError`]); everything that a draft may change lives in a module per draft, chosen at
//! run time (by ALPN). [`message`] defines the message model; [`draft14`], [`draft16`],
//! [`draft20`] and [`draft22`] read and write it as their drafts' bytes, so a session keeps one vocabulary whichever draft it
//! speaks. [`codec`] is the seam a session uses: one [`codec::Codec`] per draft, which says
//! how each message travels as well as how it is written.
//!
//! # Decoding convention
//!
//! Decoders take the bytes received so far and return the value together with the number of
//! bytes it used. [`DecodeError::Incomplete`] means "read more and call again": the input is a
//! valid prefix, nothing was consumed and nothing is wrong yet. Every other error is a protocol
//! error and [`DecodeError::session_error_code`] gives the code to close the session with.

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod codec;
mod cursor;
pub mod draft14;
pub mod draft16;
pub mod draft20;
pub mod draft22;
mod error;
pub mod message;
pub mod varint;

pub use error::{DecodeError, EncodeError};
