//! GStreamer side: plugin registration, the reference sender's description, and an
//! in-process subscriber that records the decode index of every frame moqsrc outputs.
//!
//! In the kit because the [`crate::roles`] are built on it, and a runner that checks a
//! subscriber's continuity while it abuses the sender (the soak scenarios) runs a
//! [`Watcher`] in its own process beside them.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use gst::prelude::*;

/// Raw video of the reference stream: a moving ball with a 96×96 noise patch, so every
/// frame differs and x264 really spends its rate.
const REFERENCE_VIDEO: &str = "compositor name=mix sink_1::xpos=100 sink_1::ypos=80 \
    ! video/x-raw,format=I420,width=320,height=240,framerate=24/1";
const REFERENCE_SOURCES: &str = "videotestsrc is-live=true pattern=ball \
    ! video/x-raw,format=I420,width=320,height=240,framerate=24/1 ! mix.sink_0 \
    videotestsrc is-live=true pattern=snow \
    ! video/x-raw,format=I420,width=96,height=96,framerate=24/1 ! mix.sink_1";
/// ~600 kbit/s, 24 fps, GoP 15, up to 3 B frames, no scene-cut keyframes.
const REFERENCE_ENCODER: &str = "x264enc bitrate=600 bframes=3 key-int-max=15 \
    speed-preset=veryfast option-string=scenecut=0 ! h264parse ! video/x-h264,alignment=au";

/// Namespace the sender publishes (moqsink's default) and the URL path that names it.
pub const NAMESPACE: &str = "live";

/// The sender's pipeline: the reference stream into `moqsink name=sink` with its
/// properties (`key=value ...`), which say where it serves (`listen=…`) or publishes
/// (`url=…`).
pub fn sender_description(moqsink_props: &str) -> String {
    format!(
        "{REFERENCE_VIDEO} ! {REFERENCE_ENCODER} \
         ! moqsink name=sink {moqsink_props} {REFERENCE_SOURCES}"
    )
}

/// Initialises GStreamer and registers moqsink and moqsrc (linked in), once per process;
/// fails naming the elements that are missing.
pub fn init() -> Result<(), String> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| {
        gst::init().map_err(|e| format!("GStreamer does not initialise: {e}"))?;
        gstmoqt::plugin_register_static().map_err(|e| format!("moqsink and moqsrc: {e}"))?;
        let missing: Vec<_> = [
            "videotestsrc",
            "compositor",
            "x264enc",
            "h264parse",
            "avdec_h264",
            "fakesink",
        ]
        .into_iter()
        .filter(|name| gst::ElementFactory::find(name).is_none())
        .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "GStreamer elements {missing:?} are missing: run pipelines/setup.sh \
                 (gstreamer1.0-plugins-{{base,good,bad,ugly}}, gstreamer1.0-libav)"
            ))
        }
    })
    .clone()
}

/// Availability time (µs since the UNIX epoch) from a buffer's `timestamp/x-unix`
/// reference meta.
pub fn availability_us(buffer: &gst::BufferRef) -> Option<i64> {
    static UNIX: OnceLock<gst::Caps> = OnceLock::new();
    let unix = UNIX.get_or_init(|| gst::Caps::new_empty_simple("timestamp/x-unix"));
    buffer
        .iter_meta::<gst::ReferenceTimestampMeta>()
        .find(|m| m.reference().can_intersect(unix))
        .map(|m| m.timestamp().useconds() as i64)
}

pub use moq_media::clock::unix_now_us_i64 as unix_now_us;

/// What a [`Watcher`] recorded.
#[derive(Debug, Default, Clone)]
pub struct FrameLog {
    /// Decode index of every frame moqsrc output, in output order.
    pub indices: Vec<u64>,
    /// Whether the first frame was a keyframe with DISCONT.
    pub first_key: Option<bool>,
    /// Buffers flagged DISCONT (the first included).
    pub disconts: u64,
    /// What explains a break in the output, in order: each break in the decode indices
    /// (the frames it skipped, or a frame again) and each of moqsrc's element messages.
    pub events: Vec<(Instant, String)>,
}

/// How complete a run of decode indices is from its first frame up to `end` (excluded).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Continuity {
    pub first: u64,
    /// Indices the sender published from `first` to `end`.
    pub expected: u64,
    /// Distinct indices received in that range.
    pub received: u64,
    /// Runs of missing indices (decode-index gaps).
    pub gaps: u64,
    /// Frames output more than once or out of order.
    pub disordered: u64,
}

impl Continuity {
    pub fn missing(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    pub fn kept_pct(&self) -> f64 {
        if self.expected == 0 {
            return 0.0;
        }
        100.0 * self.received as f64 / self.expected as f64
    }
}

/// A watcher of an hour-long run keeps this many events; the first ones explain the most.
const MAX_EVENTS: usize = 2000;

impl FrameLog {
    fn event(&mut self, what: String) {
        if self.events.len() < MAX_EVENTS {
            self.events.push((Instant::now(), what));
        }
    }

    /// Continuity of the output from its first frame up to decode index `end` (the
    /// sender's frame count at a moment every frame before it had time to arrive).
    pub fn continuity(&self, end: u64) -> Option<Continuity> {
        let first = *self.indices.first()?;
        let mut seen: Vec<u64> = self.indices.iter().copied().filter(|&i| i < end).collect();
        let disordered = self.indices.windows(2).filter(|w| w[1] <= w[0]).count() as u64;
        seen.sort_unstable();
        seen.dedup();
        let mut gaps = 0;
        let mut previous = first;
        for &i in &seen {
            if i > previous + 1 {
                gaps += 1;
            }
            previous = i;
        }
        if end > previous + 1 {
            gaps += 1;
        }
        Some(Continuity {
            first,
            expected: end.saturating_sub(first),
            received: seen.len() as u64,
            gaps,
            disordered,
        })
    }
}

/// `moqsrc ! fakesink` in this process, recording moqsrc's output: the subscriber whose
/// frames must keep flowing while a runner abuses the sender.
pub struct Watcher {
    pipeline: gst::Pipeline,
    log: Arc<Mutex<FrameLog>>,
}

impl Watcher {
    pub fn start(url: &str, fingerprint: &str) -> Result<Watcher, String> {
        Watcher::start_with(url, fingerprint, "")
    }

    /// [`start`](Self::start) with more moqsrc properties (`key=value ...`).
    pub fn start_with(url: &str, fingerprint: &str, moqsrc_props: &str) -> Result<Watcher, String> {
        init()?;
        let description = format!(
            "moqsrc name=src url={url} tls-fingerprint={fingerprint} {moqsrc_props} \
             ! fakesink name=out sync=false async=false"
        );
        let pipeline = gst::parse::launch(&description)
            .map_err(|e| format!("watcher pipeline: {e}"))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| "watcher: not a pipeline".to_string())?;
        let log = Arc::new(Mutex::new(FrameLog::default()));
        let record = log.clone();
        // moqsrc's pads appear with the catalog: its output is watched at the sink.
        pipeline
            .by_name("out")
            .and_then(|sink| sink.static_pad("sink"))
            .ok_or("watcher: no sink pad")?
            .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
                if let Some(buffer) = info.buffer() {
                    let discont = buffer.flags().contains(gst::BufferFlags::DISCONT);
                    let key = !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT);
                    let mut log = record.lock().unwrap_or_else(|p| p.into_inner());
                    if log.first_key.is_none() {
                        log.first_key = Some(key && discont);
                    }
                    log.disconts += u64::from(discont);
                    let index = buffer.offset();
                    if let Some(&last) = log.indices.last()
                        && index != last + 1
                    {
                        let what = match index > last {
                            true => format!("output skipped frames {}..{index}", last + 1),
                            false => format!("output frame {index} after {last}"),
                        };
                        log.event(what);
                    }
                    log.indices.push(index);
                }
                gst::PadProbeReturn::Ok
            });
        let record = log.clone();
        pipeline
            .bus()
            .ok_or("watcher: no bus")?
            .set_sync_handler(move |_, msg| {
                if let gst::MessageView::Element(element) = msg.view()
                    && let Some(s) = element.structure()
                    && s.name().starts_with("moq-")
                {
                    let mut log = record.lock().unwrap_or_else(|p| p.into_inner());
                    log.event(s.to_string());
                }
                gst::BusSyncReply::Pass
            });
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| format!("watcher does not play: {e}"))?;
        Ok(Watcher { pipeline, log })
    }

    pub fn log(&self) -> FrameLog {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn frames(&self) -> usize {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .indices
            .len()
    }

    /// An error the pipeline posted, if any (checked without waiting).
    pub fn error(&self) -> Option<String> {
        let bus = self.pipeline.bus()?;
        while let Some(msg) = bus.pop_filtered(&[gst::MessageType::Error]) {
            if let gst::MessageView::Error(err) = msg.view() {
                return Some(format!("{} ({:?})", err.error(), err.debug()));
            }
        }
        None
    }

    /// Waits until moqsrc has output a first frame.
    pub fn wait_first_frame(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while self.frames() == 0 {
            if let Some(err) = self.error() {
                return Err(format!("watcher: {err}"));
            }
            if Instant::now() > deadline {
                return Err(format!("watcher: no frame after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Stops the pipeline and returns what it recorded.
    pub fn stop(self) -> FrameLog {
        let _ = self.pipeline.set_state(gst::State::Null);
        self.log()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(indices: &[u64]) -> FrameLog {
        FrameLog {
            indices: indices.to_vec(),
            first_key: Some(true),
            disconts: 1,
            events: Vec::new(),
        }
    }

    #[test]
    fn complete_run() {
        let c = log(&[10, 11, 12, 13]).continuity(14).unwrap();
        assert_eq!((c.first, c.expected, c.received, c.gaps), (10, 4, 4, 0));
        assert_eq!(c.kept_pct(), 100.0);
    }

    #[test]
    fn gaps_and_tail() {
        // 12 and 13 missing, then 16..18 never arrived before `end`.
        let c = log(&[10, 11, 14, 15, 20]).continuity(18).unwrap();
        assert_eq!((c.expected, c.received, c.gaps), (8, 4, 2));
        assert_eq!(c.missing(), 4);
        assert_eq!(c.disordered, 0);
    }

    #[test]
    fn duplicates_count_once() {
        let c = log(&[5, 6, 6, 7]).continuity(8).unwrap();
        assert_eq!((c.received, c.gaps, c.disordered), (3, 0, 1));
    }
}
