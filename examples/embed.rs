//! Embedding moqsink and moqsrc in an application.
//!
//! The application makes its own pictures (a moving gradient) and pushes them through
//! `appsrc ! x264enc ! h264parse ! moqsink`, which serves them on 127.0.0.1; a second
//! pipeline, `moqsrc ! appsink`, receives the access units and reads, for each, the time it
//! reached moqsink (the `timestamp/x-unix` reference meta), printing the latency.
//!
//! ```text
//! cargo run --example embed -- [SECONDS]
//! ```
//!
//! The plugins are registered statically here (they are Rust crates of this workspace);
//! an application in another language loads them from `GST_PLUGIN_PATH` instead, as
//! `examples/embed.py` does. Exits with an error if nothing arrived.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gst::prelude::*;

const WIDTH: usize = 320;
const HEIGHT: usize = 240;
const FPS: u64 = 24;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5);
    gst::init()?;
    gstmoqt::plugin_register_static()?;

    // The publisher: frames the application makes, encoded and served.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let sender = gst::parse::launch(&format!(
        "appsrc name=frames is-live=true format=time \
           caps=video/x-raw,format=GRAY8,width={WIDTH},height={HEIGHT},framerate={FPS}/1 \
         ! videoconvert ! video/x-raw,format=I420 \
         ! x264enc tune=zerolatency key-int-max=48 ! h264parse \
         ! moqsink name=sink listen=127.0.0.1:{port}"
    ))?
    .downcast::<gst::Pipeline>()
    .map_err(|_| "not a pipeline")?;
    sender.set_state(gst::State::Ready)?;
    let fingerprint: String = sender
        .by_name("sink")
        .ok_or("no moqsink")?
        .property::<Option<String>>("tls-cert-fingerprint")
        .ok_or("moqsink has no certificate")?;
    let frames = sender
        .by_name("frames")
        .and_downcast::<gst_app::AppSrc>()
        .ok_or("no appsrc")?;
    sender.set_state(gst::State::Playing)?;

    // The player: access units out of moqsrc, with the time each reached the publisher.
    let receiver = gst::parse::launch(&format!(
        "moqsrc url=moqt://127.0.0.1:{port}/live tls-fingerprint={fingerprint} \
         ! appsink name=out sync=false"
    ))?
    .downcast::<gst::Pipeline>()
    .map_err(|_| "not a pipeline")?;
    let out = receiver
        .by_name("out")
        .and_downcast::<gst_app::AppSink>()
        .ok_or("no appsink")?;
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let record = latencies.clone();
    let unix = gst::Caps::new_empty_simple("timestamp/x-unix");
    out.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |sink| {
                let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                let buffer = sample.buffer().ok_or(gst::FlowError::Error)?;
                if let Some(meta) = buffer
                    .iter_meta::<gst::ReferenceTimestampMeta>()
                    .find(|m| m.reference().can_intersect(&unix))
                {
                    let now = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default();
                    let sent = Duration::from_nanos(meta.timestamp().nseconds());
                    let ms = now.saturating_sub(sent).as_secs_f64() * 1000.0;
                    println!(
                        "frame {:>5}  {:>6} bytes  {}  latency {ms:6.1} ms",
                        buffer.offset(),
                        buffer.size(),
                        if buffer.flags().contains(gst::BufferFlags::DELTA_UNIT) {
                            "  "
                        } else {
                            "key"
                        },
                    );
                    record.lock().unwrap_or_else(|p| p.into_inner()).push(ms);
                }
                Ok(gst::FlowSuccess::Ok)
            })
            .build(),
    );
    receiver.set_state(gst::State::Playing)?;

    // The application's frames, pushed at the frame rate.
    let start = Instant::now();
    for n in 0..seconds * FPS {
        let picture: Vec<u8> = (0..WIDTH * HEIGHT)
            .map(|i| ((i % WIDTH + i / WIDTH + n as usize * 4) % 256) as u8)
            .collect();
        let mut buffer = gst::Buffer::from_mut_slice(picture);
        let pts = gst::ClockTime::from_nseconds(n * 1_000_000_000 / FPS);
        if let Some(b) = buffer.get_mut() {
            b.set_pts(pts);
            b.set_duration(gst::ClockTime::from_nseconds(1_000_000_000 / FPS));
        }
        frames.push_buffer(buffer)?;
        if let Some(wait) =
            Duration::from_nanos(n * 1_000_000_000 / FPS).checked_sub(start.elapsed())
        {
            std::thread::sleep(wait);
        }
    }
    let _ = frames.end_of_stream();
    std::thread::sleep(Duration::from_millis(500));
    receiver.set_state(gst::State::Null)?;
    sender.set_state(gst::State::Null)?;

    let latencies = latencies.lock().unwrap_or_else(|p| p.into_inner());
    if latencies.is_empty() {
        return Err("no frame arrived".into());
    }
    let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
    println!(
        "{} frames received, mean latency {mean:.1} ms (to moqsrc's output, no decoding)",
        latencies.len()
    );
    Ok(())
}
