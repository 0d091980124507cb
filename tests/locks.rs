//! Element threads never wait on each other across the network: `unlock()` frees a blocked
//! streaming thread at once, and properties can be read while they are written.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;

#[test]
fn stopping_moqsrc_while_it_waits_for_data_returns_at_once() {
    init();
    // Nobody answers: the streaming thread waits for data that never comes.
    let silent = silent_udp_socket();
    let port = silent.local_addr().unwrap().port();
    let pipeline = gst::parse::launch(&format!(
        "moqsrc url=moqt://127.0.0.1:{port}/live tls-insecure=true media-timeout=60000 ! fakesink"
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    let mut took = Vec::new();
    for _ in 0..5 {
        pipeline.set_state(gst::State::Playing).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        pipeline.set_state(gst::State::Null).unwrap();
        took.push(started.elapsed());
    }
    eprintln!("PLAYING -> NULL while waiting for data: {took:?}");
    // The streaming thread must return within 100 ms; the bound allows a loaded machine.
    let worst = took.iter().max().unwrap();
    assert!(*worst < Duration::from_millis(500), "took {worst:?}");
}

#[test]
fn pausing_moqsrc_while_it_waits_returns_at_once_and_playing_again_resumes() {
    let sender = Sender::start("");
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    receiver.wait_frames(24, WAIT).expect("plays");
    let started = Instant::now();
    receiver.pipeline.set_state(gst::State::Paused).unwrap();
    let (result, _, _) = receiver.pipeline.state(gst::ClockTime::from_seconds(5));
    let took = started.elapsed();
    eprintln!("PLAYING -> PAUSED: {took:?} ({result:?})");
    assert!(took < Duration::from_millis(500), "took {took:?}");
    receiver.pipeline.set_state(gst::State::Playing).unwrap();
    let before = receiver.frames().len();
    receiver
        .wait_frames(before + 24, WAIT)
        .expect("plays again");
}

#[test]
fn properties_can_be_read_while_they_are_written() {
    init();
    let dir = std::env::temp_dir().join(format!("moq-locks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let sink = gst::ElementFactory::make("moqsink").build().unwrap();
    let src = gst::ElementFactory::make("moqsrc").build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for writer in [true, false] {
        let (sink, src, stop) = (sink.clone(), src.clone(), stop.clone());
        let (cert_path, key_path) = (cert_path.clone(), key_path.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if writer {
                    // Each write takes the settings, then drops the TLS identity; the
                    // reader takes each of the two locks on its own.
                    sink.set_property("tls-cert-file", cert_path.to_str());
                    sink.set_property("tls-key-file", key_path.to_str());
                    src.set_property("latency", (n % 500) as u32);
                } else {
                    let _: Option<String> = sink.property("tls-cert-fingerprint");
                    let _: Option<String> = sink.property("tls-cert-file");
                    let _: gst::Structure = sink.property("stats");
                    let _: gst::Structure = src.property("stats");
                }
                n += 1;
            }
            n
        }));
    }
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut counts = Vec::new();
    for t in threads {
        while !t.is_finished() {
            assert!(
                Instant::now() < deadline,
                "a property call is stuck: deadlock"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        counts.push(t.join().unwrap());
    }
    eprintln!("writes {}, reads {} in 2 s", counts[0], counts[1]);
    assert!(counts.iter().all(|n| *n > 10), "{counts:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
