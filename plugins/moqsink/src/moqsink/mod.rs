//! `moqsink`: publishes parsed H.264 video and Opus or AAC audio as MoQ Transport tracks.
//!
//! ```text
//! gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,format=I420,framerate=24/1 \
//!     ! x264enc bframes=3 key-int-max=15 ! h264parse ! m.video_0 \
//!     audiotestsrc is-live=true ! opusenc ! m.audio_0 \
//!     moqsink name=m listen=0.0.0.0:4443
//! ```
//!
//! A bin with request pads `video_%u` and `audio_%u`, each backed by a sink of its own
//! (so each synchronises, prerolls and reaches EOS as a sink does) and each a track of
//! the broadcast. Every access unit is classified (key / reference / non-reference),
//! mapped to a group and object of its video track, audio frames to short
//! groups above all video, and handed to the session layer, whose tasks send them to
//! each subscriber on QUIC streams. The streaming threads never wait on the network.
//!
//! With `signal-object-handoffs`, the `object-handoff` signal (track, group, object, and
//! when moqsink wrote the object and QUIC took its last byte, µs since the UNIX epoch)
//! says how long each object waited in moqsink for each subscriber.

use gst::glib;
use gst::prelude::*;

mod adapt;
mod audio;
mod caps;
mod encoder;
mod frame;
mod imp;
mod pad;
mod publisher;
mod track_sink;
mod video;

pub use pad::MoqSinkPad;

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

/// The media format of the broadcast (the `format` property).
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMoqSinkFormat")]
pub enum Format {
    #[default]
    #[enum_value(
        name = "Native: our catalog and frame header (decode order, frame kinds, availability time); every delivery mode",
        nick = "native"
    )]
    Native = 0,
    #[enum_value(
        name = "Hang: moq-dev's catalog.json and timestamp-prefixed frames, playable by moq-gst and the moq-dev players; one track per video stream, so deprioritize-b acts as baseline and combined as skip-gops",
        nick = "hang"
    )]
    Hang = 1,
}

impl From<Format> for moq_media::catalog::MediaFormat {
    fn from(f: Format) -> Self {
        match f {
            Format::Native => moq_media::catalog::MediaFormat::Native,
            Format::Hang => moq_media::catalog::MediaFormat::Hang,
        }
    }
}

/// The QUIC congestion controller (the `congestion-control` property).
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMoqSinkCongestionControl")]
pub enum CongestionControl {
    #[enum_value(
        name = "CUBIC: grows until loss, so it fills a drop-tail bottleneck queue",
        nick = "cubic"
    )]
    Cubic = 0,
    #[enum_value(
        name = "NewReno: halves on loss, grows a packet per round trip",
        nick = "newreno"
    )]
    NewReno = 1,
    #[enum_value(
        name = "BBR (quinn's, experimental): paces at the measured bandwidth",
        nick = "bbr"
    )]
    Bbr = 2,
    #[enum_value(
        name = "Delay: a window of the measured rate times the minimum RTT plus 40 ms, cut when the queue grows past that",
        nick = "delay"
    )]
    Delay = 3,
    #[default]
    #[enum_value(
        name = "Auto: delay with rate-control=encoder (the encoder follows the path, so keep its queue short), cubic otherwise",
        nick = "auto"
    )]
    Auto = 4,
}

/// Whether moqsink drives the encoder's bitrate (the `rate-control` property).
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMoqSinkRateControl")]
pub enum RateControl {
    #[default]
    #[enum_value(name = "None: the encoder's bitrate is left alone", nick = "none")]
    None = 0,
    #[enum_value(
        name = "Encoder: set the upstream encoder's bitrate from the path estimate, and post moq-target-bitrate",
        nick = "encoder"
    )]
    Encoder = 1,
}

/// How several subscribers' paths make one target (the `rate-policy` property).
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMoqSinkRatePolicy")]
pub enum RatePolicy {
    #[default]
    #[enum_value(name = "Minimum: the slowest subscriber's path", nick = "minimum")]
    Minimum = 0,
    #[enum_value(
        name = "Median: the median subscriber's path; slower ones rely on skip-forward",
        nick = "median"
    )]
    Median = 1,
}

impl From<RatePolicy> for moq_media::rate_control::RatePolicy {
    fn from(p: RatePolicy) -> Self {
        match p {
            RatePolicy::Minimum => moq_media::rate_control::RatePolicy::Minimum,
            RatePolicy::Median => moq_media::rate_control::RatePolicy::Median,
        }
    }
}

impl CongestionControl {
    /// The controller to run with `rate_control`. With a fixed-rate stream the delay-aware
    /// controller trades stalls for latency (see BENCHMARKS.md), so `auto` picks it only
    /// when the encoder follows the path.
    pub fn resolve(self, rate_control: RateControl) -> moq_session::congestion::CongestionControl {
        use moq_session::congestion::CongestionControl as C;
        match self {
            CongestionControl::Cubic => C::Cubic,
            CongestionControl::NewReno => C::NewReno,
            CongestionControl::Bbr => C::Bbr,
            CongestionControl::Delay => C::Delay,
            CongestionControl::Auto if rate_control == RateControl::Encoder => C::Delay,
            CongestionControl::Auto => C::Cubic,
        }
    }
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
        @extends gst::Bin, gst::Element, gst::Object,
        @implements gst::ChildProxy, gst::URIHandler;
}

pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    MoqSinkPad::static_type().mark_as_plugin_api(gst::PluginAPIFlags::empty());
    gst::Element::register(
        Some(plugin),
        "moqsink",
        gst::Rank::PRIMARY,
        MoqSink::static_type(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_session::congestion::CongestionControl as C;

    #[test]
    fn the_delivery_property_is_moq_medias_delivery_mode_with_its_default() {
        assert_eq!(
            moq_media::DeliveryMode::from(Delivery::default()),
            moq_media::DeliveryMode::default()
        );
        let class = glib::EnumClass::with_type(Delivery::static_type()).unwrap();
        for value in class.values() {
            let delivery: Delivery = value.to_value(&class).get().unwrap();
            assert_eq!(
                value.nick(),
                moq_media::DeliveryMode::from(delivery).name(),
                "one name per mode"
            );
        }
        assert_eq!(class.values().len(), moq_media::DeliveryMode::ALL.len());
    }

    #[test]
    fn auto_congestion_control_is_delay_only_with_rate_control() {
        let auto = CongestionControl::default();
        assert_eq!(auto, CongestionControl::Auto);
        assert_eq!(auto.resolve(RateControl::Encoder), C::Delay);
        assert_eq!(auto.resolve(RateControl::None), C::Cubic);
        assert_eq!(
            CongestionControl::Cubic.resolve(RateControl::Encoder),
            C::Cubic
        );
    }
}
