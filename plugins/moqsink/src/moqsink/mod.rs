//! `moqsink`: publishes parsed H.264 as MoQ Transport tracks.
//!
//! ```text
//! gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,format=I420,framerate=24/1 \
//!     ! x264enc bframes=3 key-int-max=15 ! h264parse ! moqsink listen=0.0.0.0:4443
//! ```
//!
//! Every access unit is classified (key / reference / non-reference), mapped to a group
//! and object of the `video` track (DESIGN.md §4) and handed to the session layer, whose
//! tasks send it to each subscriber on QUIC streams. The streaming thread never waits
//! on the network.

use gst::glib;
use gst::prelude::*;

mod imp;
mod publisher;

glib::wrapper! {
    pub struct MoqSink(ObjectSubclass<imp::MoqSink>)
        @extends gst_base::BaseSink, gst::Element, gst::Object;
}

pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "moqsink",
        gst::Rank::NONE,
        MoqSink::static_type(),
    )
}
