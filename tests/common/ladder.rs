//! A rendition ladder: one live camera, three encoders (250 / 600 / 1200 kbit/s at three
//! sizes) into moqsink's video pads as one alternate group; and what a moqsrc viewer of
//! it played.

use std::time::Duration;

use gst::prelude::*;

use super::{ReceivedFrame, Receiver, init, skipped_and_repeated};

/// Bitrate (kbit/s), width and height of each rendition, on `video_0`..`video_2`.
pub const LADDER: [(u64, u32, u32); 3] = [(250, 320, 240), (600, 480, 360), (1200, 640, 480)];
/// The renditions' catalog track names, in the same order.
pub const RENDITIONS: [&str; 3] = ["video", "video-1", "video-2"];
/// The camera's frame interval (24 fps).
pub const FRAME: Duration = Duration::from_micros(41_667);

/// Publishes the ladder to moqsink with `target` (`listen=…` or `url=…`): the pipeline,
/// playing, and moqsink.
pub fn publish_ladder(target: &str) -> (gst::Pipeline, gst::Element) {
    init();
    // A noise patch keeps every encoder at its bitrate, as a camera would.
    let mut description = String::from(
        "videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,width=640,height=480,framerate=24/1 ! mix.sink_0 \
         videotestsrc is-live=true pattern=snow ! video/x-raw,format=I420,width=160,height=120,framerate=24/1 ! mix.sink_1 \
         compositor name=mix sink_1::xpos=240 sink_1::ypos=180 \
         ! video/x-raw,format=I420,width=640,height=480,framerate=24/1 ! tee name=t ",
    );
    for (i, (kbit, width, height)) in LADDER.iter().enumerate() {
        description.push_str(&format!(
            "t. ! queue ! videoscale ! video/x-raw,width={width},height={height} \
             ! x264enc bitrate={kbit} key-int-max=48 bframes=0 speed-preset=ultrafast tune=zerolatency \
             ! h264parse ! m.video_{i} "
        ));
    }
    description.push_str(&format!("moqsink name=m sync=false {target}"));
    let pipeline = gst::parse::launch(&description)
        .unwrap_or_else(|e| panic!("{description}: {e}"))
        .downcast::<gst::Pipeline>()
        .expect("a pipeline");
    let sink = pipeline.by_name("m").expect("moqsink");
    for (i, (kbit, _, _)) in LADDER.iter().enumerate() {
        let pad = sink
            .static_pad(&format!("video_{i}"))
            .expect("requested pad");
        pad.set_property("alt-group", 1u32);
        pad.set_property("bitrate", kbit * 1000);
    }
    pipeline.set_state(gst::State::Playing).expect("plays");
    (pipeline, sink)
}

/// The ladder index of a rendition's track name.
pub fn rung(name: &str) -> Option<usize> {
    RENDITIONS.iter().position(|r| *r == name)
}

/// How playback went across the frames moqsrc output: the longest step in PTS between
/// consecutive frames, how many frames after the first were marked DISCONT, and the frames
/// skipped and repeated in decode order.
pub fn seams(frames: &[ReceivedFrame]) -> Seams {
    let (skipped, repeated) = skipped_and_repeated(frames);
    Seams {
        longest: frames
            .windows(2)
            .map(|w| Duration::from_nanos(w[1].pts.nseconds().saturating_sub(w[0].pts.nseconds())))
            .max()
            .unwrap_or_default(),
        disconts: frames.iter().skip(1).filter(|f| f.discont).count(),
        skipped,
        repeated,
    }
}

#[derive(Debug)]
pub struct Seams {
    pub longest: Duration,
    pub disconts: usize,
    pub skipped: u64,
    pub repeated: usize,
}

impl Seams {
    /// A switch without a seam: every frame once, in order, on one timeline. A step in PTS
    /// longer than a frame is the adaptive playout growing for late frames (a loaded
    /// machine), not the switch: it is bounded as a freeze, generously.
    pub fn assert_seamless(&self) {
        assert_eq!(
            (self.skipped, self.repeated),
            (0, 0),
            "every frame once, in order: {self:?}"
        );
        assert_eq!(self.disconts, 0, "no DISCONT at a switch: {self:?}");
        assert!(
            self.longest <= FREEZE,
            "a {:?} step in PTS: {self:?}",
            self.longest
        );
    }
}

/// The longest step in PTS taken for playback going on rather than a freeze.
const FREEZE: Duration = Duration::from_millis(250);

/// The rendition a moqsrc viewer plays (its `stats`) and its switches so far.
pub fn playing(viewer: &Receiver) -> (String, u64) {
    let stats: gst::Structure = viewer
        .pipeline
        .by_name("src")
        .expect("moqsrc")
        .property("stats");
    (
        stats.get::<String>("rendition").unwrap_or_default(),
        stats.get::<u64>("rendition-switches").unwrap_or_default(),
    )
}
