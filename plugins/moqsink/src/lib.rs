//! GStreamer plugin `moqsink`: a Media over QUIC publisher for H.264 video and Opus/AAC audio.

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::sync::LazyLock;

use gst::glib;

mod moqsink;

pub use moqsink::{MoqSink, MoqSinkPad};

/// The plugin's one tokio runtime; element instances share it.
static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| moq_session::blocking::runtime("moqsink-net"));

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    moqsink::register(plugin)
}

gst::plugin_define!(
    moqsink,
    env!("CARGO_PKG_DESCRIPTION"),
    plugin_init,
    concat!(env!("CARGO_PKG_VERSION"), "-", env!("COMMIT_ID")),
    "MPL",
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_REPOSITORY"),
    env!("BUILD_REL_DATE")
);
