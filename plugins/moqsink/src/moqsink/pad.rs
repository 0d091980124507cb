//! `moqsink`'s request pads: ghost pads onto the sink of each track, with the track's name
//! as a property.

use std::sync::{LazyLock, Mutex};

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;

glib::wrapper! {
    pub struct MoqSinkPad(ObjectSubclass<imp::MoqSinkPad>)
        @extends gst::GhostPad, gst::ProxyPad, gst::Pad, gst::Object;
}

impl MoqSinkPad {
    /// The `track` property: the name the pad's track gets, if set.
    pub fn track(&self) -> Option<String> {
        self.imp()
            .track
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

mod imp {
    use super::*;

    #[derive(Default)]
    pub struct MoqSinkPad {
        pub(super) track: Mutex<Option<String>>,
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
                ]
            });
            PROPERTIES.as_ref()
        }

        fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
            if pspec.name() == "track" {
                let name = value
                    .get::<Option<String>>()
                    .unwrap_or_default()
                    .filter(|n| !n.is_empty());
                *self.track.lock().unwrap_or_else(|p| p.into_inner()) = name;
            }
        }

        fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
            match pspec.name() {
                "track" => self
                    .track
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .to_value(),
                _ => None::<String>.to_value(),
            }
        }
    }

    impl GstObjectImpl for MoqSinkPad {}
    impl PadImpl for MoqSinkPad {}
    impl ProxyPadImpl for MoqSinkPad {}
    impl GhostPadImpl for MoqSinkPad {}
}
