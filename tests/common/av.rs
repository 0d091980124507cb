//! Audio and video together: a live camera-like sender into moqsink's `video_0` and
//! `audio_0` pads, a receiver decoding both of moqsrc's pads, what crossed each pad on
//! both sides, and the figures the A/V tests assert on (delivery, A/V skew, audio gaps).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gst::prelude::*;

use super::{WAIT, init};

/// The audio codec of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioCodec {
    Opus,
    Aac,
}

impl AudioCodec {
    /// Raw audio → encoded frames moqsink takes (64 kbit/s).
    fn encoder(self) -> &'static str {
        match self {
            AudioCodec::Opus => "opusenc bitrate=64000 frame-size=20",
            AudioCodec::Aac => "avenc_aac bitrate=64000 ! aacparse",
        }
    }

    fn decoder(self) -> &'static str {
        match self {
            AudioCodec::Opus => "opusdec",
            AudioCodec::Aac => "avdec_aac",
        }
    }

    pub fn elements(self) -> [&'static str; 2] {
        match self {
            AudioCodec::Opus => ["opusenc", "opusdec"],
            AudioCodec::Aac => ["avenc_aac", "avdec_aac"],
        }
    }
}

/// A ~600 kbit/s stream with B frames (see tests/congestion.rs): too much for
/// [`CONGESTED_LINK_KBIT`].
pub const CONGESTED_VIDEO: &str = "\
    videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,width=320,height=240,framerate=24/1 ! mix.sink_0 \
    videotestsrc is-live=true pattern=snow ! video/x-raw,format=I420,width=96,height=96,framerate=24/1 ! mix.sink_1 \
    compositor name=mix sink_1::xpos=100 sink_1::ypos=80 \
    ! video/x-raw,format=I420,width=320,height=240,framerate=24/1 \
    ! x264enc bitrate=600 bframes=3 key-int-max=15 speed-preset=veryfast option-string=scenecut=0 \
    ! h264parse";

pub const CONGESTED_LINK_KBIT: u64 = 400;
/// 3 s at the link rate, like the congestion tests.
const CONGESTED_QUEUE_BYTES: usize = 150_000;

/// Live stereo audio, every buffer different.
pub const AV_AUDIO: &str = "audiotestsrc is-live=true wave=ticks \
    ! audio/x-raw,rate=48000,channels=2 ! audioconvert ! audioresample";

/// One frame as it reached a moqsink pad: its running time and duration, µs.
#[derive(Debug, Clone, Copy)]
pub struct SentFrame {
    pub pts_us: i64,
    pub duration_us: i64,
}

/// One frame as it left a moqsrc pad.
#[derive(Debug, Clone, Copy)]
pub struct OutFrame {
    /// Position in its track, counted from the publisher's first frame.
    pub offset: u64,
    pub pts_us: i64,
    pub duration_us: i64,
    pub discont: bool,
}

type Shared<T> = Arc<Mutex<T>>;

/// Records every buffer crossing `pad` in running time.
fn record_sent(pad: &gst::Pad) -> Shared<Vec<SentFrame>> {
    let sent: Shared<Vec<SentFrame>> = Arc::default();
    let record = sent.clone();
    let segment: Shared<Option<gst::FormattedSegment<gst::ClockTime>>> = Arc::default();
    pad.add_probe(
        gst::PadProbeType::BUFFER | gst::PadProbeType::EVENT_DOWNSTREAM,
        move |_, info| {
            if let Some(gst::EventView::Segment(s)) = info.event().map(|e| e.view()) {
                *segment.lock().unwrap_or_else(|e| e.into_inner()) =
                    s.segment().clone().downcast().ok();
            }
            if let Some(buffer) = info.buffer()
                && let Some(pts) = buffer.pts()
            {
                let running = segment
                    .lock()
                    .unwrap()
                    .as_ref()
                    .and_then(|s| s.to_running_time(pts))
                    .unwrap_or(pts);
                record
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(SentFrame {
                        pts_us: running.useconds() as i64,
                        duration_us: buffer.duration().map_or(0, |d| d.useconds() as i64),
                    });
            }
            gst::PadProbeReturn::Ok
        },
    );
    sent
}

/// A/V into moqsink, recording what reaches each pad.
pub struct AvSender {
    pub pipeline: gst::Pipeline,
    pub sink: gst::Element,
    pub video: Shared<Vec<SentFrame>>,
    pub audio: Shared<Vec<SentFrame>>,
}

impl AvSender {
    /// `video` is a pipeline fragment ending in H.264 access units; `target` says where
    /// moqsink goes (`listen=…` or `url=…`).
    pub fn start(video: &str, codec: AudioCodec, target: &str) -> AvSender {
        init();
        let description = format!(
            "{video} ! m.video_0 {AV_AUDIO} ! {} ! m.audio_0 moqsink name=m sync=false {target}",
            codec.encoder()
        );
        let pipeline = gst::parse::launch(&description)
            .unwrap_or_else(|e| panic!("{description}: {e}"))
            .downcast::<gst::Pipeline>()
            .expect("a pipeline");
        let sink = pipeline.by_name("m").expect("moqsink");
        let pad = |name| sink.static_pad(name).expect("requested pad");
        let video = record_sent(&pad("video_0"));
        let audio = record_sent(&pad("audio_0"));
        pipeline
            .set_state(gst::State::Playing)
            .expect("sender plays");
        AvSender {
            pipeline,
            sink,
            video,
            audio,
        }
    }

    /// The port a listening sender (`listen=HOST:0`) took.
    pub fn port(&self) -> u16 {
        super::listening_port(&self.sink)
    }

    pub fn fingerprint(&self) -> String {
        self.sink
            .property::<Option<String>>("tls-cert-fingerprint")
            .expect("a fingerprint")
    }

    /// Sends EOS and waits for moqsink to drain it.
    pub fn finish(&self) {
        self.pipeline.send_event(gst::event::Eos::new());
        super::wait_eos(&self.pipeline, WAIT).expect("sender reaches EOS");
    }
}

impl Drop for AvSender {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// What one of moqsrc's pads carried, and what its decoder and sink made of it.
#[derive(Debug, Default)]
pub struct PadRecord {
    pub outputs: Vec<OutFrame>,
    /// Decoded buffers that reached the sink.
    pub rendered: usize,
    pub eos: bool,
}

/// `moqsrc` with both pads decoded into `fakesink sync=true`; the sinks do not take part
/// in the pipeline's state changes, so a branch whose track is missing (or comes later)
/// does not hold the other one in PAUSED.
pub struct AvReceiver {
    pub pipeline: gst::Pipeline,
    pub video: Shared<PadRecord>,
    pub audio: Shared<PadRecord>,
    /// Element messages and warnings, by name / text.
    pub messages: Shared<Vec<String>>,
}

fn record_output(element: &gst::Element, pad: &str, record: Shared<PadRecord>) {
    element
        .static_pad(pad)
        .expect("pad")
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(b) = info.buffer() {
                // A probe must not panic (it runs in a streaming thread, across C): a test
                // that failed while holding the lock leaves it poisoned, not wrong.
                record
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .outputs
                    .push(OutFrame {
                        offset: b.offset(),
                        pts_us: b.pts().map_or(-1, |t| t.useconds() as i64),
                        duration_us: b.duration().map_or(0, |d| d.useconds() as i64),
                        discont: b.flags().contains(gst::BufferFlags::DISCONT),
                    });
            }
            gst::PadProbeReturn::Ok
        });
}

fn record_rendering(element: &gst::Element, record: Shared<PadRecord>) {
    element.static_pad("sink").expect("sink pad").add_probe(
        gst::PadProbeType::BUFFER | gst::PadProbeType::EVENT_DOWNSTREAM,
        move |_, info| {
            let mut r = record.lock().unwrap_or_else(|e| e.into_inner());
            if info.buffer().is_some() {
                r.rendered += 1;
            }
            if let Some(gst::EventView::Eos(_)) = info.event().map(|e| e.view()) {
                r.eos = true;
            }
            gst::PadProbeReturn::Ok
        },
    );
}

impl AvReceiver {
    pub fn start(src_properties: &str, codec: AudioCodec) -> AvReceiver {
        init();
        let description = format!(
            "moqsrc name=s {src_properties} \
             s. ! h264parse name=vparse ! avdec_h264 name=vdec ! fakesink name=vout sync=true async=false \
             s. ! {} name=adec ! fakesink name=aout sync=true async=false",
            codec.decoder()
        );
        let pipeline = gst::parse::launch(&description)
            .unwrap_or_else(|e| panic!("{description}: {e}"))
            .downcast::<gst::Pipeline>()
            .expect("a pipeline");
        let video: Shared<PadRecord> = Arc::default();
        let audio: Shared<PadRecord> = Arc::default();
        let by_name = |n| pipeline.by_name(n).expect("element");
        // moqsrc's pads come with the catalog: what they carry is watched downstream.
        record_output(&by_name("vparse"), "sink", video.clone());
        record_output(&by_name("adec"), "sink", audio.clone());
        record_rendering(&by_name("vout"), video.clone());
        record_rendering(&by_name("aout"), audio.clone());
        let messages: Shared<Vec<String>> = Arc::default();
        let names = messages.clone();
        pipeline
            .bus()
            .expect("bus")
            .set_sync_handler(move |_, msg| {
                match msg.view() {
                    gst::MessageView::Element(e) => {
                        if let Some(s) = e.structure() {
                            names.lock().unwrap().push(s.name().to_string());
                        }
                    }
                    gst::MessageView::Warning(w) => names.lock().unwrap().push(format!(
                        "warning from {}: {}",
                        msg.src().map_or("?".into(), |s| s.name().to_string()),
                        w.error()
                    )),
                    _ => {}
                }
                gst::BusSyncReply::Pass
            });
        pipeline
            .set_state(gst::State::Playing)
            .expect("receiver plays");
        AvReceiver {
            pipeline,
            video,
            audio,
            messages,
        }
    }

    /// moqsrc's `stats`.
    pub fn stats(&self) -> gst::Structure {
        let src = self.pipeline.by_name("s").expect("moqsrc");
        src.property::<gst::Structure>("stats")
    }

    /// Frames of the `kind` track ("video" / "audio") moqsrc let go to bring its playout
    /// delay down (`frames-drained` in its `stats`): missing from the output on purpose.
    pub fn drained(&self, kind: &str) -> usize {
        let stats = self.stats();
        let tracks = stats.get::<gst::Array>("tracks").expect("tracks in stats");
        tracks
            .iter()
            .filter_map(|t| t.get::<gst::Structure>().ok())
            .filter(|t| t.get::<String>("kind").is_ok_and(|k| k.starts_with(kind)))
            .map(|t| t.get::<u64>("frames-drained").unwrap_or(0) as usize)
            .sum()
    }

    /// Waits until both pads have output at least `n` frames.
    pub fn wait_both(&self, n: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let bus = self.pipeline.bus().expect("bus");
        loop {
            let (v, a) = (
                self.video.lock().unwrap().outputs.len(),
                self.audio.lock().unwrap().outputs.len(),
            );
            if v >= n && a >= n {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{v} video, {a} audio frames of {n} after {timeout:?}"
                ));
            }
            if let Some(msg) = bus.timed_pop_filtered(
                gst::ClockTime::from_mseconds(50),
                &[gst::MessageType::Error],
            ) && let gst::MessageView::Error(err) = msg.view()
            {
                return Err(format!(
                    "receiver error: {} ({:?})",
                    err.error(),
                    err.debug()
                ));
            }
        }
    }

    pub fn skips(&self) -> usize {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .filter(|m| *m == "moq-skip")
            .count()
    }
}

impl Drop for AvReceiver {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// Frames received of those sent from the first received one on: (received, sent).
pub fn delivered(sent: &[SentFrame], out: &[OutFrame]) -> (usize, usize) {
    let Some(first) = out.iter().map(|o| o.offset).min() else {
        return (0, sent.len());
    };
    let mut offsets: Vec<u64> = out.iter().map(|o| o.offset).collect();
    offsets.sort_unstable();
    offsets.dedup();
    (offsets.len(), sent.len().saturating_sub(first as usize))
}

/// Frames output, and frames from the first to the last output one: (output, span).
pub fn received_span(out: &[OutFrame]) -> (usize, usize) {
    let mut offsets: Vec<u64> = out.iter().map(|o| o.offset).collect();
    offsets.sort_unstable();
    offsets.dedup();
    match (offsets.first(), offsets.last()) {
        (Some(first), Some(last)) => (offsets.len(), (last - first + 1) as usize),
        _ => (0, 0),
    }
}

/// How far the receiver put video and audio apart from where the sender had them.
#[derive(Debug, Clone, Copy)]
pub struct Skew {
    /// The largest skew, either way, ms.
    pub worst_ms: f64,
    /// Video frames matched with an audio frame.
    pub pairs: usize,
}

/// The A/V skew of what `video` and `audio` output against what `sender` sent, from a
/// second after the first video frame (see [`av_skew_ms`]).
pub fn skew(sender: &AvSender, video: &PadRecord, audio: &PadRecord) -> Skew {
    let skew = av_skew_ms(
        &sender.video.lock().unwrap(),
        &video.outputs,
        &sender.audio.lock().unwrap(),
        &audio.outputs,
        Duration::from_secs(1),
    );
    Skew {
        worst_ms: skew.iter().fold(0.0f64, |m, s| m.max(s.abs())),
        pairs: skew.len(),
    }
}

/// A/V skew, ms, of every video frame output `settle` or more after the first one: at
/// the frame's timestamp, how far the sender's time of the audio playing then is from the
/// frame's (positive: the audio is ahead). Frames that fall into a hole in the audio
/// are left out (holes are checked on their own).
fn av_skew_ms(
    sent_video: &[SentFrame],
    video: &[OutFrame],
    sent_audio: &[SentFrame],
    audio: &[OutFrame],
    settle: Duration,
) -> Vec<f64> {
    let sent_pts = |sent: &[SentFrame], o: &OutFrame| sent.get(o.offset as usize).map(|s| s.pts_us);
    let Some(start) = video.first().map(|v| v.pts_us) else {
        return Vec::new();
    };
    let settle_us = settle.as_micros() as i64;
    video
        .iter()
        .filter(|v| v.pts_us >= start + settle_us)
        .filter_map(|v| {
            let sv = sent_pts(sent_video, v)?;
            let playing = audio
                .iter()
                .position(|a| a.pts_us <= v.pts_us && v.pts_us < a.pts_us + a.duration_us)?;
            // Against the audio frame playing then, or the next one: where the timeline
            // moved earlier (a video jump, the audio dropping what overlapped), a picture
            // after the move may be shown during the last audio frame before it. What is
            // heard is known to an audio frame, no finer.
            let skew = |a: &OutFrame| Some(sent_pts(sent_audio, a)? + (v.pts_us - a.pts_us) - sv);
            audio[playing..audio.len().min(playing + 2)]
                .iter()
                .filter_map(skew)
                .min_by_key(|s| s.abs())
                .map(|s| s as f64 / 1000.0)
        })
        .collect()
}

/// A hole the receiver cut into the audio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioGap {
    /// How much longer the hole is than the one the sender's audio had there, ms.
    pub ms: f64,
    /// The hole the sender's own audio had there (a live source whose thread was
    /// starved stamps its next buffer later), ms.
    pub at_source_ms: f64,
    /// The track position of the frame before the hole.
    pub after: u64,
    /// Where the hole starts, in media time from the first frame output, s.
    pub at_s: f64,
}

/// Holes the receiver cut into the audio it output: where a frame starts later than the
/// previous one ended by more than `longer_than` beyond what the sender's audio (`sent`)
/// had between the same two frames.
pub fn audio_gaps(sent: &[SentFrame], audio: &[OutFrame], longer_than: Duration) -> Vec<AudioGap> {
    let limit = longer_than.as_micros() as i64;
    let start = audio.first().map_or(0, |f| f.pts_us);
    let hole = |a_pts: i64, a_duration: i64, b_pts: i64| b_pts - (a_pts + a_duration);
    audio
        .windows(2)
        .filter_map(|w| {
            let output = hole(w[0].pts_us, w[0].duration_us, w[1].pts_us);
            let at_source = match (
                sent.get(w[0].offset as usize),
                sent.get(w[1].offset as usize),
            ) {
                (Some(a), Some(b)) => hole(a.pts_us, a.duration_us, b.pts_us).max(0),
                _ => 0,
            };
            (output - at_source > limit).then(|| AudioGap {
                ms: (output - at_source) as f64 / 1000.0,
                at_source_ms: at_source as f64 / 1000.0,
                after: w[0].offset,
                at_s: (w[0].pts_us + w[0].duration_us - start) as f64 / 1e6,
            })
        })
        .collect()
}

/// Plays what `sender` publishes for 30 s through a [`CONGESTED_LINK_KBIT`] link in front
/// of `forward` (moqsink's port or a relay's), with `src_properties(link address)` on
/// moqsrc, and checks that the video skipped while the audio played on: ≥ 95 % of it, no
/// hole over 60 ms, A/V skew within 40 ms.
pub fn play_congested(
    sender: &AvSender,
    forward: SocketAddr,
    src_properties: impl Fn(SocketAddr) -> String,
) {
    let link = linkem::Link::start(linkem::LinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        forward,
        downstream: Some(linkem::Profile::constant(
            CONGESTED_LINK_KBIT,
            CONGESTED_QUEUE_BYTES,
        )),
        upstream: None,
        seed: 1,
        log: None,
    })
    .expect("link starts");
    let receiver = AvReceiver::start(&src_properties(link.local_addr()), AudioCodec::Opus);
    receiver.wait_both(24, WAIT).expect("both tracks play");
    std::thread::sleep(Duration::from_secs(30));
    let skips = receiver.skips();
    let sink_stats: gst::Structure = sender.sink.property("stats");
    let src_stats: gst::Structure = receiver.pipeline.by_name("s").unwrap().property("stats");
    eprintln!("sender {sink_stats}\nreceiver {src_stats}");
    receiver.pipeline.set_state(gst::State::Null).unwrap();
    let totals = link.stop();
    let (video, audio) = (
        receiver.video.lock().unwrap(),
        receiver.audio.lock().unwrap(),
    );
    let gaps = audio_gaps(
        &sender.audio.lock().unwrap(),
        &audio.outputs,
        Duration::from_millis(60),
    );
    let (a_got, a_span) = received_span(&audio.outputs);
    // Video frames after the jumps land on the audio's timeline.
    let Skew {
        worst_ms: worst,
        pairs,
    } = skew(sender, &video, &audio);
    eprintln!(
        "{CONGESTED_LINK_KBIT} kbit/s: video {} frames output, {skips} skips; audio {a_got} of \
         {a_span} frames output, {} gaps over 60 ms {gaps:?}; A/V skew worst {worst:.1} ms over \
         {} pairs; link {totals:?}",
        video.outputs.len(),
        gaps.len(),
        pairs
    );
    assert!(worst <= 40.0, "A/V skew {worst:.1} ms");
    assert!(skips > 0, "the video skipped (the link is too slow for it)");
    assert!(a_got * 100 >= a_span * 95, "audio {a_got}/{a_span}");
    assert!(gaps.is_empty(), "audio gaps over 60 ms: {gaps:?}");
}
