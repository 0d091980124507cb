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
//! broadcast, so the tracks stay in sync; after a jump or a stall every track snaps to
//! the new media at once. The timeline's offset follows how late frames come
//! (`playout=adaptive`): it grows at once when they come late and gives latency back a few
//! percent at a time when they come early, never buffering less than the `latency` it
//! reports.
//!
//! Every buffer carries two reference timestamp metas in µs since the UNIX epoch: when
//! the frame reached the publisher (`timestamp/x-unix`) and when moqsrc had its object
//! whole (`timestamp/x-moq-received`), so a probe can tell the network's share of the
//! latency from the receiver's.

use gst::glib;
use gst::prelude::*;

mod imp;
mod moving;
mod receiver;
mod upstream;

/// Whether moqsrc chooses among a video's renditions (the `abr` property).
#[derive(Debug, Eq, PartialEq, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMoqSrcAbr")]
pub enum Abr {
    #[enum_value(
        name = "Off: play the rendition selected (video-track or rendition) whatever the path",
        nick = "off"
    )]
    Off = 0,
    #[enum_value(
        name = "Auto: start on the lowest rendition, go down when the path cannot carry it, up when it shows room",
        nick = "auto"
    )]
    #[default]
    Auto = 1,
}

/// How moqsrc's playout offset moves (the `playout` property).
#[derive(Debug, Eq, PartialEq, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMoqSrcPlayout")]
pub enum Playout {
    #[enum_value(
        name = "Adaptive: follow how late frames come, growing at once when they come late and draining by up to a tenth of the media time when they come early; latency is the least buffering",
        nick = "adaptive"
    )]
    #[default]
    Adaptive = 0,
    #[enum_value(
        name = "Fixed: keep the offset of the first frame; move it only when a frame comes later than latency allows (a rebuffer) or playback jumps",
        nick = "fixed"
    )]
    Fixed = 1,
}

glib::wrapper! {
    pub struct MoqSrc(ObjectSubclass<imp::MoqSrc>)
        @extends gst::Element, gst::Object,
        @implements gst::URIHandler;
}

pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    Abr::static_type().mark_as_plugin_api(gst::PluginAPIFlags::empty());
    Playout::static_type().mark_as_plugin_api(gst::PluginAPIFlags::empty());
    gst::Element::register(
        Some(plugin),
        "moqsrc",
        // Ranked, so uridecodebin (playbin, gst-play-1.0) picks it for moqt:// URIs.
        gst::Rank::PRIMARY,
        MoqSrc::static_type(),
    )
}
