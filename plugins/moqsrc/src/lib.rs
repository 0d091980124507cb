//! GStreamer plugin `moqsrc`: a Media over QUIC subscriber for H.264 video and Opus/AAC audio.

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::sync::LazyLock;

use gst::glib;

mod moqsrc;

pub use moqsrc::MoqSrc;

/// The plugin's one tokio runtime; element instances share it.
static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| moq_session::blocking::runtime("moqsrc-net"));

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    moqsrc::register(plugin)
}

gst::plugin_define!(
    moqsrc,
    env!("CARGO_PKG_DESCRIPTION"),
    plugin_init,
    concat!(env!("CARGO_PKG_VERSION"), "-", env!("COMMIT_ID")),
    "MPL",
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_REPOSITORY"),
    env!("BUILD_REL_DATE")
);
