//! GStreamer plugin `moqt`: Media over QUIC Transport. One library registers both
//! elements, `moqsink` (plugins/moqsink) and `moqsrc` (plugins/moqsrc), and both run their
//! network tasks on one shared runtime ([`moq_session::blocking::runtime`]).

use gst::glib;

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gstmoqsink::register(plugin)?;
    gstmoqsrc::register(plugin)
}

gst::plugin_define!(
    moqt,
    env!("CARGO_PKG_DESCRIPTION"),
    plugin_init,
    concat!(env!("CARGO_PKG_VERSION"), "-", env!("COMMIT_ID")),
    "MPL",
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_REPOSITORY"),
    env!("BUILD_REL_DATE")
);
