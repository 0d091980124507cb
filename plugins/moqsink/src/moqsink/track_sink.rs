//! The sink behind each request pad of `moqsink`: a `GstBaseSink`, so every pad
//! synchronises, prerolls, flushes and reaches EOS as any sink does, while the bin posts
//! EOS once all of them have. It only turns buffers into timed frames and hands them to
//! the bin's publisher.

use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::Duration;

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::prelude::*;
use moq_session::blocking::Canceller;

use super::caps::{self, MediaKind};
use super::frame::{AuTiming, TrackId, unix_now_us};
use moq_session::blocking::runtime;

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "moqsink-track",
        gst::DebugColorFlags::empty(),
        Some("Media over QUIC sink, one track"),
    )
});

/// How long EOS waits for subscribers to receive everything already published.
const EOS_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Frame duration assumed when neither the buffer nor the caps give one (30 fps).
const FALLBACK_FRAME_US: u64 = 33_333;

glib::wrapper! {
    pub struct TrackSink(ObjectSubclass<imp::TrackSink>)
        @extends gst_base::BaseSink, gst::Element, gst::Object;
}

impl TrackSink {
    pub fn new(id: TrackId, kind: MediaKind, name: &str) -> TrackSink {
        let sink: TrackSink = glib::Object::builder().property("name", name).build();
        let _ = sink.imp().track.set((id, kind));
        sink
    }
}

mod imp {
    use super::*;

    #[derive(Default)]
    struct Timing {
        /// Frame duration from the caps' frame rate, µs.
        frame_us: Option<u64>,
        /// Synthesised timestamps when buffers carry none.
        next_fallback_pts: u64,
    }

    #[derive(Default)]
    pub struct TrackSink {
        pub(super) track: OnceLock<(TrackId, MediaKind)>,
        timing: Mutex<Timing>,
        canceller: Canceller,
    }

    impl TrackSink {
        fn bin(&self) -> Option<crate::MoqSink> {
            self.obj().parent().and_downcast::<crate::MoqSink>()
        }

        fn timing(&self, buffer: &gst::BufferRef) -> AuTiming {
            let obj = self.obj();
            let segment = obj.segment();
            // Signed running time: a DTS before the segment start (B-frame reordering
            // delay at the very beginning) is negative, not missing.
            let to_running = |t: Option<gst::ClockTime>| -> Option<i64> {
                let seg = segment.downcast_ref::<gst::format::Time>()?;
                match seg.to_running_time_full(t?)? {
                    gst::Signed::Positive(v) => Some(v.useconds() as i64),
                    gst::Signed::Negative(v) => Some(-(v.useconds() as i64)),
                }
            };
            let mut timing = moqt_common::lock(&self.timing);
            let duration = buffer
                .duration()
                .map(|d| d.useconds())
                .or(timing.frame_us)
                .unwrap_or(FALLBACK_FRAME_US);
            let pts = to_running(buffer.pts()).or_else(|| to_running(buffer.dts()));
            let dts = to_running(buffer.dts()).or(pts);
            let (pts, dts) = match (pts, dts) {
                (Some(p), Some(d)) => (p, d),
                _ => {
                    let t = timing.next_fallback_pts as i64;
                    (t, t)
                }
            };
            timing.next_fallback_pts = pts.max(0) as u64 + duration;
            AuTiming {
                pts,
                dts,
                duration,
                availability_us: unix_now_us(),
                marked_key: !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
            }
        }
    }

    #[glib::object_subclass]
    impl ObjectSubclass for TrackSink {
        const NAME: &'static str = "GstMoqSinkTrack";
        type Type = super::TrackSink;
        type ParentType = gst_base::BaseSink;
    }

    impl ObjectImpl for TrackSink {}

    impl GstObjectImpl for TrackSink {}

    impl ElementImpl for TrackSink {
        // Static caps and names: creating the template cannot fail.
        #[allow(clippy::expect_used)]
        fn pad_templates() -> &'static [gst::PadTemplate] {
            static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
                let mut accepted = caps::pad_caps(MediaKind::Video);
                accepted.merge(caps::pad_caps(MediaKind::Audio));
                vec![
                    gst::PadTemplate::new(
                        "sink",
                        gst::PadDirection::Sink,
                        gst::PadPresence::Always,
                        &accepted,
                    )
                    .expect("valid pad template"),
                ]
            });
            TEMPLATES.as_ref()
        }
    }

    impl BaseSinkImpl for TrackSink {
        fn caps(&self, filter: Option<&gst::Caps>) -> Option<gst::Caps> {
            let (_, kind) = self.track.get()?;
            let caps = caps::pad_caps(*kind);
            Some(match filter {
                Some(filter) => filter.intersect_with_mode(&caps, gst::CapsIntersectMode::First),
                None => caps,
            })
        }

        fn query(&self, query: &mut gst::QueryRef) -> bool {
            // Any caps are accepted here and judged in `set_caps`, so caps we cannot carry
            // fail with an error that says why instead of a bare not-negotiated. What the
            // pad offers (the caps query) stays what it carries.
            if let gst::QueryViewMut::AcceptCaps(q) = query.view_mut() {
                q.set_result(true);
                return true;
            }
            BaseSinkImplExt::parent_query(self, query)
        }

        fn set_caps(&self, caps: &gst::Caps) -> Result<(), gst::LoggableError> {
            let (id, _) = *self
                .track
                .get()
                .ok_or_else(|| gst::loggable_error!(CAT, "no track"))?;
            let bin = self
                .bin()
                .ok_or_else(|| gst::loggable_error!(CAT, "not in a moqsink"))?;
            if let Err(reason) = bin.imp().track_caps(id, caps) {
                // A clear error, not just a failed negotiation.
                gst::element_error!(
                    bin,
                    gst::StreamError::Format,
                    ("moqsink cannot carry {}: {reason}", caps),
                    ["pad {}", self.obj().name()]
                );
                return Err(gst::loggable_error!(CAT, "{reason}"));
            }
            let frame_us = caps
                .structure(0)
                .and_then(|s| s.get::<gst::Fraction>("framerate").ok())
                .filter(|f| f.numer() > 0 && f.denom() > 0)
                .map(|f| 1_000_000 * f.denom() as u64 / f.numer() as u64);
            moqt_common::lock(&self.timing).frame_us = frame_us;
            gst::debug!(CAT, imp = self, "caps {caps}");
            Ok(())
        }

        fn render(&self, buffer: &gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
            let (id, _) = *self.track.get().ok_or(gst::FlowError::Error)?;
            let bin = self.bin().ok_or(gst::FlowError::Flushing)?;
            let timing = self.timing(buffer);
            bin.imp().track_render(id, buffer, timing);
            Ok(gst::FlowSuccess::Ok)
        }

        fn event(&self, event: gst::Event) -> bool {
            if let gst::EventView::Eos(_) = event.view()
                && let Some((id, _)) = self.track.get()
                && let Some(bin) = self.bin()
                && let Some(broadcast) = bin.imp().track_eos(*id)
            {
                gst::debug!(
                    CAT,
                    imp = self,
                    "EOS on every pad: waiting for {} subscription(s) to drain",
                    broadcast.active_subscriptions()
                );
                let drained = self.canceller.block_on(runtime().handle(), async {
                    tokio::time::timeout(EOS_DRAIN_TIMEOUT, broadcast.drained()).await
                });
                if !matches!(drained, Ok(Ok(()))) {
                    gst::warning!(
                        CAT,
                        imp = self,
                        "EOS: {} subscription(s) did not receive everything",
                        broadcast.active_subscriptions()
                    );
                }
            }
            self.parent_event(event)
        }

        fn unlock(&self) -> Result<(), gst::ErrorMessage> {
            self.canceller.cancel();
            Ok(())
        }

        fn unlock_stop(&self) -> Result<(), gst::ErrorMessage> {
            self.canceller.reset();
            Ok(())
        }
    }
}
