//! `moqsrc`: plays the H.264 video and Opus or AAC audio tracks of a MoQ broadcast.
//!
//! ```text
//! gst-launch-1.0 moqsrc name=s url=moqt://127.0.0.1:4443/live tls-insecure=true \
//!     s. ! h264parse ! avdec_h264 ! videoconvert ! autovideosink \
//!     s. ! opusdec ! audioconvert ! autoaudiosink
//! ```
//!
//! A live source with a sometimes pad per track it plays (`video_%u`, `audio_%u`, made
//! from the catalog), each with its own streaming thread, so audio never waits for
//! video. It puts frames from the QUIC streams back in order (dropping what can no longer
//! be decoded) and stamps them in running time through one timeline for the whole
//! broadcast, so playback runs at 1× behind the `latency` it reports and stays in sync;
//! after a jump or a stall every track snaps to the new media at once.

use gst::glib;
use gst::prelude::*;

mod imp;
mod receiver;
mod select;
mod stats;

glib::wrapper! {
    pub struct MoqSrc(ObjectSubclass<imp::MoqSrc>)
        @extends gst::Element, gst::Object,
        @implements gst::URIHandler;
}

pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "moqsrc",
        // Ranked, so uridecodebin (playbin, gst-play-1.0) picks it for moqt:// URIs.
        gst::Rank::PRIMARY,
        MoqSrc::static_type(),
    )
}
