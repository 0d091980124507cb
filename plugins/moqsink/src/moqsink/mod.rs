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

/// How frames are mapped to QUIC streams and prioritised (the `delivery` property).
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMoqSinkDelivery")]
pub enum Delivery {
    #[enum_value(
        name = "Baseline: one stream per GoP, older GoPs first, like a single in-order stream",
        nick = "baseline"
    )]
    Baseline = 0,
    #[enum_value(
        name = "Deprioritize B: non-reference frames on track video-enh, each on its own stream, newest first and below every GoP stream",
        nick = "deprioritize-b"
    )]
    DeprioritizeB = 1,
    #[default]
    #[enum_value(
        name = "Skip GoPs: newest GoP first; older GoPs are dropped once the newer one can be delivered",
        nick = "skip-gops"
    )]
    SkipGops = 2,
    #[enum_value(
        name = "Combined: skip GoPs for key and reference frames plus deprioritized non-reference frames",
        nick = "combined"
    )]
    Combined = 3,
}

impl From<Delivery> for moq_media::DeliveryMode {
    fn from(d: Delivery) -> Self {
        match d {
            Delivery::Baseline => moq_media::DeliveryMode::Baseline,
            Delivery::DeprioritizeB => moq_media::DeliveryMode::DeprioritizeB,
            Delivery::SkipGops => moq_media::DeliveryMode::SkipGops,
            Delivery::Combined => moq_media::DeliveryMode::Combined,
        }
    }
}

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
