//! `moq-demo`: a live test stream published by moqsink in a `gst-launch-1.0` process and
//! played by moqsrc in this one, decoded and rendered on the clock; prints frames and
//! latency (render time − availability time at the sender) every second, and a summary
//! once the sender's EOS arrives.
//!
//! Needs the plugins on `GST_PLUGIN_PATH` (pipelines/demo.sh sets it).

use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gst::prelude::*;

const USAGE: &str = "usage: moq-demo [--seconds N] [--port PORT]

Publishes a 24 fps, 320x240 H.264 test stream with moqsink (in a gst-launch-1.0 child
process) for N seconds (default 10), plays it with moqsrc here, and prints per second
the frames rendered and their latency. Needs moqsink/moqsrc on GST_PLUGIN_PATH.";

struct Args {
    seconds: u64,
    port: u16,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 10,
        port: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value"))?
                .parse::<u64>()
                .map_err(|e| format!("{name}: {e}"))
        };
        match flag.as_str() {
            "--seconds" => args.seconds = value("--seconds")?.max(1),
            "--port" => args.port = u16::try_from(value("--port")?).map_err(|e| e.to_string())?,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if args.port == 0 {
        args.port = std::net::UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .map_err(|e| e.to_string())?
            .port();
    }
    Ok(args)
}

/// A self-signed certificate for the sender; the receiver pins its fingerprint.
fn certificate(dir: &std::path::Path) -> Result<(String, String, String), String> {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(|e| e.to_string())?;
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).map_err(|e| e.to_string())?;
    std::fs::write(&key, certified.key_pair.serialize_pem()).map_err(|e| e.to_string())?;
    let fingerprint =
        moq_session::tls::fingerprint_hex(&moq_session::tls::fingerprint(certified.cert.der()));
    Ok((
        cert.display().to_string(),
        key.display().to_string(),
        fingerprint,
    ))
}

fn spawn_sender(port: u16, cert: &str, key: &str) -> Result<Child, String> {
    let pipeline = format!(
        "videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,width=320,height=240,framerate=24/1 \
         ! x264enc bframes=3 key-int-max=15 bitrate=600 speed-preset=veryfast ! h264parse \
         ! moqsink listen=127.0.0.1:{port} tls-cert-file={cert} tls-key-file={key}"
    );
    Command::new("gst-launch-1.0")
        .arg("-e")
        .args(pipeline.split_whitespace())
        .spawn()
        .map_err(|e| format!("cannot start gst-launch-1.0: {e}"))
}

#[derive(Default)]
struct Window {
    frames: u64,
    latencies_ms: Vec<f64>,
}

fn unix_now() -> gst::ClockTime {
    gst::ClockTime::from_nseconds(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    )
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    gst::init().map_err(|e| e.to_string())?;
    for element in ["moqsink", "moqsrc"] {
        if gst::ElementFactory::find(element).is_none() {
            return Err(format!(
                "element {element} not found: set GST_PLUGIN_PATH to the directory with libgstmoqt.so"
            ));
        }
    }
    let dir = std::env::temp_dir().join(format!("moq-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (cert, key, fingerprint) = certificate(&dir)?;
    let mut sender = spawn_sender(args.port, &cert, &key)?;

    let receiver = gst::parse::launch(&format!(
        "moqsrc name=src url=moqt://127.0.0.1:{}/live tls-fingerprint={fingerprint} media-timeout=10000 \
         ! h264parse name=parse ! avdec_h264 ! fakesink name=sink sync=true signal-handoffs=true",
        args.port
    ))
    .map_err(|e| e.to_string())?
    .downcast::<gst::Pipeline>()
    .map_err(|_| "not a pipeline".to_owned())?;

    let window = Arc::new(Mutex::new(Window::default()));
    let indices = Arc::new(Mutex::new(Vec::<u64>::new()));
    let unix = gst::Caps::new_empty_simple("timestamp/x-unix");
    let w = window.clone();
    receiver
        .by_name("sink")
        .expect("sink")
        .connect("handoff", false, move |values| {
            let buffer = values[1].get::<gst::Buffer>().expect("handoff buffer");
            let latency = buffer
                .iter_meta::<gst::ReferenceTimestampMeta>()
                .find(|m| m.reference().can_intersect(&unix))
                .map(|m| unix_now().saturating_sub(m.timestamp()));
            let mut w = w.lock().unwrap();
            w.frames += 1;
            w.latencies_ms
                .extend(latency.map(|l| l.nseconds() as f64 / 1e6));
            None
        });
    let idx = indices.clone();
    // moqsrc's pads appear with the catalog: its output is watched at the parser.
    receiver
        .by_name("parse")
        .expect("parser")
        .static_pad("sink")
        .expect("parser sink pad")
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(b) = info.buffer() {
                idx.lock().unwrap().push(b.offset());
            }
            gst::PadProbeReturn::Ok
        });
    receiver
        .set_state(gst::State::Playing)
        .map_err(|e| e.to_string())?;

    let bus = receiver.bus().expect("bus");
    let started = Instant::now();
    let mut next_report = started + Duration::from_secs(1);
    let mut stop_sent = false;
    let mut all_latencies = Vec::new();
    println!("   t  frames  latency mean / max (ms)");
    let outcome = loop {
        if !stop_sent && started.elapsed() >= Duration::from_secs(args.seconds) {
            // gst-launch-1.0 -e turns SIGINT into EOS, which moqsink forwards to us.
            let _ = Command::new("kill")
                .arg("-INT")
                .arg(sender.id().to_string())
                .status();
            stop_sent = true;
        }
        if started.elapsed() > Duration::from_secs(args.seconds + 30) {
            break Err("no EOS within 30 s of stopping the sender".to_owned());
        }
        let wait = next_report.saturating_duration_since(Instant::now());
        let msg = bus.timed_pop(gst::ClockTime::from_nseconds(wait.as_nanos() as u64));
        if Instant::now() >= next_report {
            let mut w = window.lock().unwrap();
            let mean = w.latencies_ms.iter().sum::<f64>() / w.latencies_ms.len().max(1) as f64;
            let max = w.latencies_ms.iter().copied().fold(0.0, f64::max);
            println!(
                "{:>4}  {:>6}  {mean:>7.1} / {max:>7.1}",
                started.elapsed().as_secs(),
                w.frames
            );
            all_latencies.append(&mut w.latencies_ms);
            w.frames = 0;
            next_report += Duration::from_secs(1);
        }
        match msg.as_ref().map(|m| m.view()) {
            Some(gst::MessageView::Eos(_)) => break Ok(()),
            Some(gst::MessageView::Error(e)) => {
                break Err(format!("receiver error: {} ({:?})", e.error(), e.debug()));
            }
            _ => {}
        }
    };
    let _ = receiver.set_state(gst::State::Null);
    let _ = sender.kill();
    let _ = sender.wait();
    let _ = std::fs::remove_dir_all(&dir);
    outcome?;

    let indices = indices.lock().unwrap();
    all_latencies.append(&mut window.lock().unwrap().latencies_ms);
    let rendered = all_latencies.len();
    if let (Some(first), Some(last)) = (indices.first(), indices.last()) {
        let expected = last - first + 1;
        let mut sorted = all_latencies.clone();
        sorted.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            sorted
                .get(((sorted.len() as f64 - 1.0) * p) as usize)
                .copied()
                .unwrap_or(0.0)
        };
        println!(
            "received {} of {expected} frames sent after joining ({:.1}%), rendered {rendered}; latency p50 {:.1} ms, p95 {:.1} ms",
            indices.len(),
            100.0 * indices.len() as f64 / expected as f64,
            pct(0.5),
            pct(0.95),
        );
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("moq-demo: {e}");
        std::process::exit(1);
    }
}
