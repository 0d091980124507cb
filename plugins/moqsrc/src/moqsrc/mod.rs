//! `moqsrc`: plays an H.264 track published over MoQ Transport.
//!
//! ```text
//! gst-launch-1.0 moqsrc url=moqt://127.0.0.1:4443/live tls-insecure=true \
//!     ! h264parse ! avdec_h264 ! videoconvert ! autovideosink
//! ```
//!
//! A live source: it subscribes to the catalog and the video track(s), puts frames
//! from the QUIC streams back in decode order (dropping what can no longer be decoded),
//! and stamps them in running time so playback runs at 1× behind the `latency` it
//! reports; after a jump or a stall it snaps to the new media at once.

use gst::glib;
use gst::prelude::*;

mod imp;
mod receiver;
mod stats;

glib::wrapper! {
    pub struct MoqSrc(ObjectSubclass<imp::MoqSrc>)
        @extends gst_base::PushSrc, gst_base::BaseSrc, gst::Element, gst::Object;
}

pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "moqsrc",
        gst::Rank::NONE,
        MoqSrc::static_type(),
    )
}
