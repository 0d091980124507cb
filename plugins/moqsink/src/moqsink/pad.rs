//! `moqsink`'s request pads: ghost pads onto the sink of each track, with the track's name
//! and label and, for renditions of one video, their alternate group and bitrate as
//! properties.

use std::sync::{LazyLock, Mutex};

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use moq_media::catalog;

glib::wrapper! {
    pub struct MoqSinkPad(ObjectSubclass<imp::MoqSinkPad>)
        @extends gst::GhostPad, gst::ProxyPad, gst::Pad, gst::Object;
}

/// What a pad's properties say about its track.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PadSettings {
    /// The `track` property: the name the pad's track gets, if set.
    pub track: Option<String>,
    /// `alt-group`: renditions of one content share it (0: none).
    pub alt_group: u32,
    /// `bitrate`: the rendition's nominal bitrate, bit/s (0: not declared).
    pub bitrate: u64,
    /// `label`: a name for track pickers, if set.
    pub label: Option<String>,
}

impl MoqSinkPad {
    pub fn settings(&self) -> PadSettings {
        moqt_common::lock(&self.imp().settings).clone()
    }

    /// The `track` property: the name the pad's track gets, if set.
    pub fn track(&self) -> Option<String> {
        self.settings().track
    }
}

mod imp {
    use super::*;

    #[derive(Default)]
    pub struct MoqSinkPad {
        pub(super) settings: Mutex<PadSettings>,
    }

    #[glib::object_subclass]
    impl ObjectSubclass for MoqSinkPad {
        const NAME: &'static str = "GstMoqSinkPad";
        type Type = super::MoqSinkPad;
        type ParentType = gst::GhostPad;
    }

    impl ObjectImpl for MoqSinkPad {
        fn properties() -> &'static [glib::ParamSpec] {
            static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
                vec![
                    glib::ParamSpecString::builder("track")
                        .nick("Track")
                        .blurb("Name of this pad's track in the broadcast; unset: video, video-1, ... or audio, audio-1, ... after the pad's number. Read when the first caps arrive")
                        .build(),
                    glib::ParamSpecString::builder("label")
                        .nick("Label")
                        .blurb("Human-readable name of this pad's track for track pickers (\"Main camera\", \"English\"), listed in the catalog; unset: none. Read when the first caps arrive")
                        .build(),
                    glib::ParamSpecUInt::builder("alt-group")
                        .nick("Alternate group")
                        .blurb("Video pads carrying the same content at different bitrates or sizes (renditions) share a non-zero alternate group: the catalog lists them as alternates, a receiver plays one of them. Needs bitrate. Read when the first caps arrive")
                        .build(),
                    glib::ParamSpecUInt64::builder("bitrate")
                        .nick("Bitrate")
                        .blurb("Nominal bitrate of this pad's video in bit/s, listed in the catalog for receivers choosing among renditions (0: not listed). Read when the first caps arrive")
                        .maximum(catalog::MAX_BITRATE)
                        .build(),
                ]
            });
            PROPERTIES.as_ref()
        }

        fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
            let mut settings = moqt_common::lock(&self.settings);
            match pspec.name() {
                "track" => {
                    settings.track = value
                        .get::<Option<String>>()
                        .unwrap_or_default()
                        .filter(|n| !n.is_empty());
                }
                "label" => {
                    settings.label = value
                        .get::<Option<String>>()
                        .unwrap_or_default()
                        .filter(|l| !l.is_empty());
                }
                "alt-group" => settings.alt_group = value.get().unwrap_or_default(),
                "bitrate" => settings.bitrate = value.get().unwrap_or_default(),
                _ => {}
            }
        }

        fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
            let settings = moqt_common::lock(&self.settings);
            match pspec.name() {
                "label" => settings.label.to_value(),
                "alt-group" => settings.alt_group.to_value(),
                "bitrate" => settings.bitrate.to_value(),
                _ => settings.track.to_value(),
            }
        }
    }

    impl GstObjectImpl for MoqSinkPad {}
    impl PadImpl for MoqSinkPad {}
    impl ProxyPadImpl for MoqSinkPad {}
    impl GhostPadImpl for MoqSinkPad {}
}
