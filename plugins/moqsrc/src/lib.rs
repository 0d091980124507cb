//! The `moqsrc` element: a Media over QUIC subscriber for H.264 video and Opus/AAC audio.
//! The `moqt` plugin (plugins/moqt) registers it beside `moqsink`.

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod moqsrc;

pub use moqsrc::{MoqSrc, register};
